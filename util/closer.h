/*
 * Closing what clients hand over, off the loop thread.
 *
 * close() of a descriptor can wait on whoever made it: a TCP socket with
 * SO_LINGER and unsent data waits up to its linger time, a file on a FUSE
 * mount waits for its server's answer to the flush, and the last close of
 * a Unix socket drops the descriptors still queued in it, each of which
 * may be such a one. None of that may stall the loop, so every descriptor
 * a client passed, and every connection's own socket, is closed by
 * threads here. Each descriptor has an owner (the uid that sent it, or
 * whose connection it was), and no owner has more than one close under
 * way: the next owner's descriptors go to another thread, one more being
 * started while every thread is held, up to GR_CLOSER_THREADS_MAX. So a
 * user whose closes hang holds one thread and waits behind itself. A
 * descriptor waiting its turn or being closed stays counted against its
 * user (gr_peer.closing), so a user whose closes do not finish stops being
 * read (daemon/conn.c), not everyone.
 */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

typedef struct gr_closer gr_closer;

/* Threads that close: a few from the start, more while owners whose
 * closes hang hold those, up to the most (a close may wait for ever). */
#define GR_CLOSER_THREADS 2u
#define GR_CLOSER_THREADS_MAX 64u

/* A closer with its threads; 0 or a negative errno. */
int gr_closer_new(gr_closer **ret);

/*
 * Close fd on a closer thread, after owner's earlier ones, then count
 * *counter down by one (counter may be NULL). With no closer (NULL), or no
 * memory for the queue, fd is closed here and now.
 */
void gr_closer_close(gr_closer *cl, int fd, uint32_t owner, _Atomic uint64_t *counter);

/* Descriptors queued or being closed now. */
uint64_t gr_closer_pending(gr_closer *cl);

/*
 * Stop the threads once the queue is empty, waiting up to timeout_ms for
 * closes that hang; threads still in a close then go on alone, count
 * nothing down when their close ends, and the last of them frees the
 * closer. So once it returns, no counter passed to gr_closer_close is
 * touched again, and whatever holds them may be freed. Returns NULL.
 */
gr_closer *gr_closer_free(gr_closer *cl, unsigned timeout_ms);
