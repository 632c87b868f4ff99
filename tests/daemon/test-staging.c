/*
 * Staging slots: pieces for small requests packed into the open batch
 * slot (64-byte aligned, never overlapping, never past the slot), a fresh
 * slot once the batch span is used, the slot freed last taken first, the
 * reserve that chunks leave for batches, and waiters woken on release.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/staging.h"
#include "tests/check.h"

#define SLOT 4096u
#define NSLOTS 8u

static uint8_t mem[SLOT * NSLOTS];

static gr_slot *slot_of(const gr_staging *s, const void *p)
{
	size_t off = (size_t)((const uint8_t *)p - mem);
	CHECK(off < sizeof(mem));
	return &s->slots[off / SLOT];
}

/* Pieces fill the whole slot when the span is the slot. */
static void check_pieces(void)
{
	gr_staging s;
	gr_slot *sl, *closed;
	CHECK_EQ(gr_staging_init(&s, mem, sizeof(mem), SLOT), 0);
	CHECK_EQ(s.nslots, NSLOTS);
	CHECK_EQ(s.batch_span, SLOT);

	uint8_t *a = gr_staging_alloc_piece(&s, 1, &sl, &closed);
	CHECK(a && !closed && ((uintptr_t)a & 63) == 0);
	gr_slot *first = sl;
	uint8_t *b = gr_staging_alloc_piece(&s, 100, &sl, &closed);
	CHECK(b == a + 64 && sl == first && !closed);
	/* 64 + 128 used: a piece of the rest fits exactly */
	uint8_t *c = gr_staging_alloc_piece(&s, SLOT - 192, &sl, &closed);
	CHECK(c == a + 192 && sl == first && !closed);
	/* the slot is full: the next piece closes it */
	uint8_t *d = gr_staging_alloc_piece(&s, 1, &sl, &closed);
	CHECK(d && sl != first && closed == first);
	CHECK(slot_of(&s, d) == sl);
	/* too big, or empty */
	CHECK(!gr_staging_alloc_piece(&s, SLOT + 1, &sl, &closed));
	CHECK(!gr_staging_alloc_piece(&s, 0, &sl, &closed));
	gr_staging_deinit(&s);
}

/*
 * With a span of a quarter slot, a slot takes a quarter's worth and the
 * next piece a fresh slot; a first piece larger than the span still fits.
 * Once a closed slot's pieces are released it is the next one taken.
 */
static void check_span_and_reuse(void)
{
	gr_staging s;
	gr_slot *sl, *closed;
	CHECK_EQ(gr_staging_init(&s, mem, sizeof(mem), SLOT), 0);
	s.batch_span = SLOT / 4;

	gr_slot *pieces_slot[16];
	uint8_t *p[16];
	for (unsigned i = 0; i < 16; i++) {
		p[i] = gr_staging_alloc_piece(&s, 256, &pieces_slot[i], &closed);
		CHECK(p[i]);
		/* four pieces of 256 to a 1024-byte span */
		CHECK_EQ(closed != NULL, i > 0 && i % 4 == 0);
		CHECK(pieces_slot[i] == pieces_slot[i - i % 4]);
		CHECK_EQ(pieces_slot[i]->used, 256 * (i % 4 + 1));
	}
	gr_slot *open = pieces_slot[15];
	/* release the first slot's pieces: it goes back on top */
	gr_slot *s0 = pieces_slot[0];
	for (unsigned i = 0; i < 4; i++)
		gr_staging_release(&s, pieces_slot[i]);
	CHECK(s.free_list == s0);
	/* the open slot is full to its span: the next piece takes s0 */
	uint8_t *q = gr_staging_alloc_piece(&s, 64, &sl, &closed);
	CHECK(q == s0->base && sl == s0 && closed == open);

	/* a piece larger than the span takes a slot of its own */
	uint8_t *big = gr_staging_alloc_piece(&s, 3000, &sl, &closed);
	CHECK(big && sl != s0 && closed == s0 && sl->used == 3008);
	gr_slot *bigslot = sl;
	/* and the next piece, however small, another */
	uint8_t *after = gr_staging_alloc_piece(&s, 1, &sl, &closed);
	CHECK(after && sl != bigslot && closed == bigslot);
	gr_staging_deinit(&s);
}

/* Chunks leave the reserve to batches; a release wakes the waiters once. */
static unsigned woken;
static void wake(gr_staging_waiter *w)
{
	(void)w;
	woken++;
}

static void check_reserve_and_waiters(void)
{
	gr_staging s;
	gr_slot *sl, *closed;
	CHECK_EQ(gr_staging_init(&s, mem, sizeof(mem), SLOT), 0);
	CHECK_EQ(s.reserve, 2);
	gr_slot *chunks[NSLOTS];
	unsigned n = 0;
	while ((chunks[n] = gr_staging_alloc_chunk(&s)))
		n++;
	CHECK_EQ(n, NSLOTS - 2);
	/* batches still get the reserve */
	CHECK(gr_staging_alloc_piece(&s, SLOT, &sl, &closed));
	CHECK(gr_staging_alloc_piece(&s, SLOT, &sl, &closed));
	CHECK(!gr_staging_alloc_piece(&s, SLOT, &sl, &closed));

	gr_staging_waiter w = {.wake = wake};
	gr_staging_wait(&s, &w);
	gr_staging_run_waiters(&s);
	CHECK_EQ(woken, 0);
	gr_staging_release(&s, chunks[0]);
	gr_staging_run_waiters(&s);
	CHECK_EQ(woken, 1);
	gr_staging_run_waiters(&s);
	CHECK_EQ(woken, 1);
	gr_staging_deinit(&s);
}

int main(void)
{
	check_pieces();
	check_span_and_reuse();
	check_reserve_and_waiters();
	printf("staging: ok\n");
	return 0;
}
