#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine/staging.h"

#define PIECE_ALIGN 64u
#define HUGE_PAGE ((size_t)2 << 20)

uint8_t *gr_staging_map(size_t bytes)
{
	if (bytes == 0 || bytes > SIZE_MAX - HUGE_PAGE) {
		errno = EINVAL;
		return NULL;
	}
	/* map a huge page more, then give back what lies before the first
	 * 2 MiB boundary and past the end */
	size_t map = bytes + HUGE_PAGE;
	uint8_t *m = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	uint8_t *p = (uint8_t *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *end = p + ((bytes + page - 1) & ~(page - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	if (m + map > end)
		munmap(end, (size_t)(m + map - end));
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

void gr_staging_unmap(uint8_t *mem, size_t bytes)
{
	if (mem)
		munmap(mem, bytes);
}

int gr_staging_init(gr_staging *s, uint8_t *mem, size_t bytes, size_t slot_bytes)
{
	*s = (gr_staging){.slot_bytes = slot_bytes, .batch_span = slot_bytes};
	s->waiters.next = s->waiters.prev = &s->waiters;
	if (slot_bytes == 0 || bytes / slot_bytes < 1)
		return -EINVAL;
	s->nslots = (unsigned)(bytes / slot_bytes);
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	if (!s->slots)
		return -ENOMEM;
	for (unsigned i = s->nslots; i-- > 0;) {
		gr_slot *sl = &s->slots[i];
		sl->base = mem + (size_t)i * slot_bytes;
		sl->index = i;
		sl->next_free = s->free_list;
		s->free_list = sl;
	}
	s->nfree = s->nslots;
	/* Keep a quarter of the slots (at least one, if there are two) for
	 * small requests, so large ones cannot starve them. */
	s->reserve = s->nslots >= 2 ? (s->nslots + 3) / 4 : 0;
	return 0;
}

void gr_staging_deinit(gr_staging *s)
{
	free(s->slots);
	s->slots = NULL;
}

static gr_slot *slot_take(gr_staging *s)
{
	gr_slot *sl = s->free_list;
	if (!sl)
		return NULL;
	s->free_list = sl->next_free;
	s->nfree--;
	sl->next_free = NULL;
	sl->used = 0;
	sl->refs = 1;
	return sl;
}

void *gr_staging_alloc_piece(gr_staging *s, size_t n, gr_slot **ret_slot, gr_slot **ret_closed)
{
	size_t need = (n + PIECE_ALIGN - 1) & ~(size_t)(PIECE_ALIGN - 1);

	*ret_closed = NULL;
	if (need == 0 || need > s->slot_bytes)
		return NULL;
	/* batch_span <= slot_bytes: past the span is also past the slot */
	if (s->batch && s->batch->used && s->batch->used + need > s->batch_span) {
		gr_slot *old = s->batch;
		gr_slot *sl = slot_take(s);
		if (!sl)
			return NULL;
		*ret_closed = old;
		s->batch = sl;
		gr_staging_release(s, old); /* drop the open reference */
	} else if (!s->batch) {
		if (!(s->batch = slot_take(s)))
			return NULL;
	}
	gr_slot *sl = s->batch;
	void *p = sl->base + sl->used;
	sl->used += need;
	sl->refs++;
	*ret_slot = sl;
	return p;
}

gr_slot *gr_staging_alloc_chunk(gr_staging *s)
{
	/* An open batch slot with no piece in it holds a slot that no small
	 * request uses now: it gives way to the chunk. Otherwise, with one or
	 * two slots, where the reserve is all that is left beside it, a large
	 * request after a small one would wait for ever. */
	if (s->nfree <= s->reserve && s->batch && s->batch->refs == 1) {
		gr_slot *idle = s->batch;
		s->batch = NULL;
		gr_staging_release(s, idle);
	}
	if (s->nfree <= s->reserve)
		return NULL;
	return slot_take(s);
}

void gr_staging_release(gr_staging *s, gr_slot *sl)
{
	if (--sl->refs > 0) {
		/* the open batch slot's last piece: a chunk waiting may take
		 * the slot now (gr_staging_alloc_chunk) */
		if (sl == s->batch && sl->refs == 1 && s->waiters.next != &s->waiters)
			s->wake_pending = true;
		return;
	}
	sl->next_free = s->free_list;
	s->free_list = sl;
	s->nfree++;
	s->wake_pending = true;
}

void gr_staging_wait(gr_staging *s, gr_staging_waiter *w)
{
	if (w->queued)
		return;
	w->prev = s->waiters.prev;
	w->next = &s->waiters;
	w->prev->next = w;
	s->waiters.prev = w;
	w->queued = true;
}

void gr_staging_unwait(gr_staging *s, gr_staging_waiter *w)
{
	if (!w->queued)
		return;
	w->prev->next = w->next;
	w->next->prev = w->prev;
	w->next = w->prev = NULL;
	w->queued = false;
}

void gr_staging_run_waiters(gr_staging *s)
{
	if (!s->wake_pending)
		return;
	s->wake_pending = false;

	/* Detach the list first: a woken waiter that still finds no memory
	 * queues itself again, and must not be woken twice in this pass. */
	gr_staging_waiter head = s->waiters;
	if (head.next == &s->waiters)
		return;
	head.next->prev = &head;
	head.prev->next = &head;
	s->waiters.next = s->waiters.prev = &s->waiters;
	while (head.next != &head) {
		gr_staging_waiter *w = head.next;
		w->prev->next = w->next;
		w->next->prev = w->prev;
		w->queued = false;
		w->wake(w);
	}
}
