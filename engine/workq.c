/*
 * The CPU workers' queue, served by the time each owner's work has had
 * (workq.h). A class counts the time its items took once they are done,
 * and meanwhile, for each worker on its work, its items' usual time, so
 * that one owner's pieces do not take every free worker before the first
 * of them is counted.
 */
#include <string.h>

#include "engine/workq.h"

void gr_workq_init(gr_workq *q)
{
	memset(q, 0, sizeof(*q));
}

static bool class_free(const gr_workq_class *c)
{
	return !c->head && !c->running;
}

/* What c has had, with what its workers are doing now at its usual time
 * an item. */
static uint64_t class_key(const gr_workq_class *c)
{
	return c->used_ns + (uint64_t)c->running * c->avg_ns;
}

/* The least time had by the classes that hold work (those that only run
 * some too, with any), UINT64_MAX when none does. */
static uint64_t least_used(const gr_workq *q, bool running_too)
{
	uint64_t least = UINT64_MAX;
	for (unsigned i = 0; i < GR_WORKQ_CLASSES; i++) {
		const gr_workq_class *c = &q->cls[i];
		if ((c->head || (running_too && c->running)) && c->used_ns < least)
			least = c->used_ns;
	}
	return least;
}

/* owner's class: its own, else a free one taken for it (level with the
 * least served owner there is), else one shared */
static gr_workq_class *class_of(gr_workq *q, uint32_t owner)
{
	gr_workq_class *spare = NULL;
	for (unsigned i = 0; i < GR_WORKQ_CLASSES; i++) {
		gr_workq_class *c = &q->cls[i];
		if (!class_free(c) && c->owner == owner)
			return c;
		if (!spare && class_free(c))
			spare = c;
	}
	if (!spare)
		return &q->cls[owner % GR_WORKQ_CLASSES];
	uint64_t least = least_used(q, true);
	spare->owner = owner;
	spare->used_ns = least == UINT64_MAX ? 0 : least;
	spare->avg_ns = 0;
	return spare;
}

void gr_workq_push(gr_workq *q, uint32_t owner, gr_workq_node *item)
{
	gr_workq_class *c = class_of(q, owner);

	item->next = NULL;
	if (c->head) {
		c->tail->next = item;
		c->tail = item;
		return;
	}
	/* back after a pause: no credit for the time away */
	uint64_t least = least_used(q, false);
	if (least != UINT64_MAX && c->used_ns < least)
		c->used_ns = least;
	c->head = c->tail = item;
	q->nwaiting++;
}

gr_workq_class *gr_workq_serve(gr_workq *q)
{
	gr_workq_class *best = NULL;
	uint64_t best_key = 0;
	for (unsigned i = 0; i < GR_WORKQ_CLASSES; i++) {
		gr_workq_class *c = &q->cls[i];
		if (!c->head)
			continue;
		uint64_t key = class_key(c);
		if (!best || key < best_key) {
			best = c;
			best_key = key;
		}
	}
	if (best)
		best->running++;
	return best;
}

void gr_workq_take(gr_workq *q, gr_workq_class *c, gr_workq_node *last)
{
	c->head = last->next;
	last->next = NULL;
	if (!c->head) {
		c->tail = NULL;
		q->nwaiting--;
	}
}

void gr_workq_charge(gr_workq *q, gr_workq_class *c, uint64_t ns)
{
	(void)q;
	c->running--;
	c->used_ns += ns;
	/* its usual time an item, over about the last four */
	c->avg_ns = c->avg_ns ? c->avg_ns - c->avg_ns / 4 + ns / 4 : ns;
}
