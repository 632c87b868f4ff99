/*
 * The completion queue: how finished jobs get from backend threads back to
 * the loop thread. Any thread may post (gr_completion_post, declared in
 * backend.h); posting wakes the loop through a uv_async_t, whose sends
 * coalesce, so the callback drains everything queued so far, in order.
 *
 * While the loop is polling without sleeping (busy polling), it drains in
 * every iteration anyway, so posts skip the wake-up. The flag and the queue
 * are checked in opposite orders by the two sides (each stores, fences,
 * then loads the other's), so a post and the loop going to sleep cannot
 * miss each other.
 */
#pragma once

#include <stdbool.h>
#include <uv.h>

#include "engine/backend.h"

int gr_completion_new(uv_loop_t *loop, gr_completion **ret);

/*
 * While deferred (loop thread only), jobs the loop thread itself posts do
 * not wake the loop: the caller promises to drain before it goes back to
 * polling. Jobs posted by other threads always wake it. Ending the
 * deferral wakes the loop if jobs are still queued (posted by the
 * callbacks of the last drain).
 */
void gr_completion_defer(gr_completion *cq, bool defer);

/*
 * Loop thread only. After gr_completion_polling_start() posts do not wake
 * the loop, which promises to drain in each iteration until it calls
 * gr_completion_polling_stop(). Jobs already waiting then wake it.
 */
void gr_completion_polling_start(gr_completion *cq);
void gr_completion_polling_stop(gr_completion *cq);

/* Before each drain that finds jobs, store the time (uv_hrtime) in *now_ns,
 * so that their callbacks need not read the clock each. */
void gr_completion_set_clock(gr_completion *cq, uint64_t *now_ns);

/* Run the done callbacks of every job posted so far (loop thread only). */
void gr_completion_drain(gr_completion *cq);

/* Close the async handle; the queue is freed from its close callback.
 * Jobs still queued are dropped without their callbacks. */
void gr_completion_close(gr_completion *cq);
