/*
 * File descriptors that arrive on a connection, in SCM_RIGHTS ancillary
 * data, and the bytes they came with.
 *
 * A connection is read with recvmsg() here rather than by libuv, which
 * drops ancillary data on pipes that are not IPC pipes. The kernel hands
 * a descriptor over with the first read that returns any byte of the
 * sendmsg() that carried it, and ends that read there, so the last byte
 * of the read lies among the bytes the client sent with the descriptor.
 * Each descriptor is queued with that byte's position in the connection's
 * stream; when the parser finishes a request, the descriptors at
 * positions before its end are that request's (gr_fdq_take). A map
 * request takes exactly one; any other request that finds one fails, and
 * the descriptor is closed.
 *
 * A socket is let go as it arrives, and only its place is queued: no
 * request can use one, and the one a client sends may be its own end of
 * the connection (or hold it, in flight in its queue), which the daemon
 * would then keep open: the connection would never see the client go.
 *
 * Nothing here closes a descriptor itself: each one the daemon lets go
 * goes to the queue's drop(), which hands it to a closer thread
 * (util/closer.h), since a client's descriptor may block its close.
 * For the same reason every read takes all the descriptors a message
 * can carry: those the kernel drops for want of room it closes in the
 * reader's thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Descriptors a connection may have waiting for their request. */
#define GR_FDQ_MAX 16u
/* Descriptors one read takes at most: the most one message carries
 * (the kernel's SCM_MAX_FD), and a read returns one message's. */
#define GR_FDPASS_PER_READ 253u

/* Queued in place of descriptors the kernel dropped (too many at once),
 * and of a socket, closed on arrival. */
#define GR_FDQ_DROPPED (-1)
#define GR_FDQ_SOCKET (-2)

typedef struct gr_fdq_entry {
	int fd;       /* or GR_FDQ_DROPPED, GR_FDQ_SOCKET */
	uint64_t pos; /* stream position of the last byte read with it */
} gr_fdq_entry;

typedef struct gr_fdq {
	gr_fdq_entry e[GR_FDQ_MAX];
	unsigned head, n;
	unsigned nfd;  /* entries that hold a descriptor */
	/* takes a descriptor let go (fdpass.h) */
	void (*drop)(void *userdata, int fd);
	void *userdata;
} gr_fdq;

static inline void gr_fdq_init(gr_fdq *q, void (*drop)(void *userdata, int fd), void *userdata)
{
	q->head = q->n = q->nfd = 0;
	q->drop = drop;
	q->userdata = userdata;
}

/* Let go of every queued descriptor. */
void gr_fdq_clear(gr_fdq *q);

/* Let go of fd (ignored when negative): the queue's drop(). */
void gr_fdq_drop(gr_fdq *q, int fd);

/*
 * Take the descriptors queued before stream position end (every byte
 * before it has been parsed): the first one stays open in *ret_fd (-1 if
 * none came, or if the kernel dropped it; GR_FDQ_SOCKET for a socket),
 * every other one is let go.
 * Returns how many came, a note of dropped ones counted as one more: a
 * request that takes one descriptor got exactly that when this returns 1
 * and *ret_fd >= 0.
 */
unsigned gr_fdq_take(gr_fdq *q, uint64_t end, int *ret_fd);

/*
 * recvmsg() into buf[0..len) from fd, without blocking, with the
 * descriptors that come along queued on q at position pos + n - 1 (pos:
 * the stream position of buf[0]). Returns the bytes read, 0 at end of
 * file, or a negative errno (-EAGAIN: nothing to read now; -EMFILE: q is
 * full, and what came was let go).
 */
ssize_t gr_fdpass_recv(int fd, void *buf, size_t len, gr_fdq *q, uint64_t pos);
