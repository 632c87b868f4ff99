/*
 * Staging: the backend's memory (pinned, for a GPU) carved into slots of
 * chunk_bytes. Small requests share a "batch slot": each takes a piece of
 * it, so a batch of them lies in one slot and moves to a GPU with one copy.
 * A large request takes whole slots, one per chunk in flight. A slot goes
 * back to the free list when its last piece is released.
 *
 * When memory runs out the caller waits: gr_staging_wait() queues a waiter
 * that is woken (from gr_staging_run_waiters, on the loop thread, outside
 * any completion callback) once a slot is free again.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gr_slot {
	uint8_t *base;
	size_t used;      /* bytes handed out (batch slot) */
	unsigned refs;    /* pieces not yet released, +1 while it is the open batch slot */
	unsigned index;
	struct gr_slot *next_free;
} gr_slot;

typedef struct gr_staging_waiter {
	void (*wake)(struct gr_staging_waiter *w);
	struct gr_staging_waiter *next, *prev;
	bool queued;
} gr_staging_waiter;

typedef struct gr_staging {
	gr_slot *slots;
	unsigned nslots;
	size_t slot_bytes;
	/* Bytes of a batch slot that pieces fill before the next piece takes
	 * a fresh slot (slot_bytes unless lowered after init; a first piece may
	 * be larger). The slot freed last is taken first, so the few slots
	 * that small requests cycle through stay warm in the CPU's cache. */
	size_t batch_span;
	gr_slot *free_list;
	unsigned nfree;
	unsigned reserve;  /* free slots chunk allocations leave for batches */
	gr_slot *batch;    /* the open batch slot, or NULL */
	gr_staging_waiter waiters; /* list head */
	bool wake_pending;
} gr_staging;

/*
 * Memory for staging: an anonymous mapping whose start is aligned to 2 MiB
 * and which the kernel is asked to back with 2 MiB pages (MADV_HUGEPAGE;
 * where transparent huge pages are off it stays in 4 KiB pages). The loop
 * thread copies each small request into a few KiB of it, and in 4 KiB
 * pages it would take a TLB miss every few requests. Both backends take
 * their staging from here (the CUDA backend then registers it with every
 * device). Returns the memory, or NULL with errno set; it is freed with
 * gr_staging_unmap(mem, bytes).
 */
uint8_t *gr_staging_map(size_t bytes);
void gr_staging_unmap(uint8_t *mem, size_t bytes);

int gr_staging_init(gr_staging *s, uint8_t *mem, size_t bytes, size_t slot_bytes);
void gr_staging_deinit(gr_staging *s);

/* A piece of n bytes (1 <= n <= slot_bytes), 64-byte aligned, in the open
 * batch slot; NULL when no slot is free. *ret_slot gets the slot to
 * release. *ret_new_batch is set when this closed the previous batch slot
 * (its batch should go out now). */
void *gr_staging_alloc_piece(gr_staging *s, size_t n, gr_slot **ret_slot, gr_slot **ret_closed);

/* A whole slot for one chunk; NULL when none is free beyond the reserve.
 * An open batch slot with no piece in use is closed for it first. */
gr_slot *gr_staging_alloc_chunk(gr_staging *s);

void gr_staging_release(gr_staging *s, gr_slot *slot);

void gr_staging_wait(gr_staging *s, gr_staging_waiter *w);
void gr_staging_unwait(gr_staging *s, gr_staging_waiter *w);
/* Wake every waiter if memory was released since the last call. */
void gr_staging_run_waiters(gr_staging *s);
