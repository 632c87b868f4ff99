/*
 * Direct replies: the answers to small requests, written to the socket by
 * the backend thread that finished them rather than by the loop thread.
 *
 * The loop thread still parses such a request, batches it and, once its
 * job's done() runs, counts and frees it; only building the reply and the
 * send() move, which is what answering costs the loop most. The backend
 * calls gr_direct_early (the gr_early_ops of backend.h) for each finished
 * job that carries a gr_direct, and the replies for one connection in a
 * run go out in one send().
 *
 * A gr_direct is the part of a connection that both sides touch. Replies
 * may go out in any order (the protocol allows it), so the sides only
 * have to keep each other's messages whole:
 *
 * - A backend thread sends only while the loop has nothing of its own
 *   under way on the socket and nothing is held back, so the stream is at
 *   a message boundary. What send() does not take, and everything while
 *   the loop is writing, is appended to held, and the job's done() tells
 *   the loop to write it (gr_direct_check).
 * - Before each write the loop takes held in front of its own bytes (it
 *   goes first: it may begin with the rest of a message) and counts as
 *   writing until all it took is written (gr_direct_take and
 *   gr_direct_written).
 *
 * The loop sets closed (gr_direct_close) before it closes the descriptor,
 * and a thread checks it and sends under the same lock, so no thread ever
 * writes to a descriptor that was closed and perhaps reused. References
 * are the loop thread's alone: the connection holds one, and so does each
 * job that may be answered directly until its done() runs, which is after
 * the thread's last look at the object.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "engine/backend.h"
#include "proto/mp.h"

typedef struct gr_direct gr_direct;

/* The hooks to hand the backend (gr_backend_config.early). */
extern const gr_early_ops gr_direct_early;

/* A direct side for the connected socket fd; NULL when out of memory. */
gr_direct *gr_direct_new(int fd);
gr_direct *gr_direct_ref(gr_direct *d);
gr_direct *gr_direct_unref(gr_direct *d);

/* No thread writes to the descriptor from now on. */
void gr_direct_close(gr_direct *d);

/* Before the loop writes wbuf: held goes in front of it, and the loop
 * counts as writing. 0, or -ENOMEM. */
int gr_direct_take(gr_direct *d, gr_buf *wbuf);
/* The loop has written all it took. True when more was held meanwhile:
 * the loop still counts as writing and must take and write that too. */
bool gr_direct_written(gr_direct *d);

/* Bytes held for the loop to write (a snapshot, for limits). */
size_t gr_direct_held(const gr_direct *d);

enum {
	GR_DIRECT_HELD = 1 << 0,   /* held has bytes: the loop should write */
	GR_DIRECT_BROKEN = 1 << 1, /* a send failed, or a reply was lost: close */
};
/* What the loop must do after a directly answered job (GR_DIRECT_*). */
unsigned gr_direct_check(const gr_direct *d);
