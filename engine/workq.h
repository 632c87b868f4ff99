/*
 * The CPU workers' queue: work waits in one FIFO per owner (a job's
 * owner, gr_job.owner: its user), and the workers serve the owner whose
 * work has had the least worker time, measured, so that a user whose
 * data take more time per byte (a wide range of exponents) gets no more
 * of the workers than one whose data are cheap, and another user's job
 * waits behind no more than about one of its pieces, not behind
 * everything it has queued. An owner that comes back after a pause starts
 * level with the least served owner that has work, with no credit for
 * the time it was away. The items are the caller's, linked through a
 * gr_workq_node at their start; every call is made under the caller's
 * lock.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct gr_workq_node {
	struct gr_workq_node *next;
} gr_workq_node;

/* Owners with work or a worker on it at once; more than this share
 * classes (one of them picked by the owner's number). */
#define GR_WORKQ_CLASSES 64u

typedef struct gr_workq_class {
	uint32_t owner;
	unsigned running;           /* workers on its work now */
	gr_workq_node *head, *tail; /* its FIFO */
	uint64_t used_ns;           /* worker time it has had, placed on coming back */
	uint64_t avg_ns;            /* its usual time an item taken */
} gr_workq_class;

typedef struct gr_workq {
	gr_workq_class cls[GR_WORKQ_CLASSES];
	unsigned nwaiting;          /* classes whose FIFO holds work */
} gr_workq;

void gr_workq_init(gr_workq *q);
/* owner's FIFO gets the item */
void gr_workq_push(gr_workq *q, uint32_t owner, gr_workq_node *item);
/* Where work waits, the class a worker serves next (its head is the item
 * to take, the class's running count one more until gr_workq_charge());
 * NULL when none waits. */
gr_workq_class *gr_workq_serve(gr_workq *q);
/* Take the class's FIFO's items up to and including last off it. */
void gr_workq_take(gr_workq *q, gr_workq_class *c, gr_workq_node *last);
/* A worker that gr_workq_serve() sent to c spent ns on its work. */
void gr_workq_charge(gr_workq *q, gr_workq_class *c, uint64_t ns);
static inline bool gr_workq_empty(const gr_workq *q)
{
	return q->nwaiting == 0;
}
