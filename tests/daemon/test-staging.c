/*
 * Staging slots: pieces for small requests packed into the open batch
 * slot (64-byte aligned, never overlapping, never past the slot), a fresh
 * slot once the batch span is used, the slot freed last taken first, the
 * reserve that chunks leave for batches, an idle batch slot that gives
 * way to a chunk, and waiters woken on release.
 * Staging memory: 2 MiB aligned, all of it usable, nothing else mapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/staging.h"
#include "tests/check.h"

#define SLOT 4096u
#define NSLOTS 8u

/* aligned as staging memory is (pieces are 64-byte aligned within it) */
static _Alignas(64) uint8_t mem[SLOT * NSLOTS];

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

/* With one or two slots the reserve is all that a chunk would find beside
 * the open batch slot: once no piece is left in that, the chunk gets it,
 * and a chunk that waited for the last piece is woken for it. */
static void check_idle_batch_gives_way(void)
{
	for (unsigned nslots = 1; nslots <= 2; nslots++) {
		gr_staging s;
		gr_slot *sl, *closed, *ch;
		CHECK_EQ(gr_staging_init(&s, mem, SLOT * nslots, SLOT), 0);
		/* a small request comes and goes: its batch slot stays open */
		CHECK(gr_staging_alloc_piece(&s, 100, &sl, &closed));
		gr_staging_release(&s, sl);
		CHECK(s.batch == sl);
		CHECK((ch = gr_staging_alloc_chunk(&s)));
		CHECK(!s.batch);
		gr_staging_release(&s, ch);

		/* a piece still in use: the chunk waits, and is woken when
		 * the piece is released */
		CHECK(gr_staging_alloc_piece(&s, 100, &sl, &closed));
		CHECK(!gr_staging_alloc_chunk(&s));
		gr_staging_waiter w = {.wake = wake};
		unsigned before = woken;
		gr_staging_wait(&s, &w);
		gr_staging_release(&s, sl);
		gr_staging_run_waiters(&s);
		CHECK_EQ(woken, before + 1);
		CHECK((ch = gr_staging_alloc_chunk(&s)));
		gr_staging_release(&s, ch);
		CHECK_EQ(s.nfree, nslots);
		gr_staging_deinit(&s);
	}
}

/* The process's virtual size in KiB, read without allocating. */
static long vm_kib(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY);
	CHECK(fd >= 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	CHECK(n > 0);
	buf[n] = 0;
	const char *v = strstr(buf, "VmSize:");
	CHECK(v);
	return strtol(v + 7, NULL, 10);
}

/* The mapping starts on a 2 MiB boundary, every byte of it can be
 * written, and what was mapped around it to align it is given back. */
static void check_map(void)
{
	const size_t huge = (size_t)2 << 20, page = (size_t)sysconf(_SC_PAGESIZE);
	size_t sizes[] = { 1, 4096, huge - 1, huge, 3 * huge + 12345 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		long before = vm_kib();
		uint8_t *p = gr_staging_map(n);
		long after = vm_kib();
		CHECK_MSG(p && ((uintptr_t)p & (huge - 1)) == 0, "size %zu: %p", n, (void *)p);
		CHECK_MSG(after - before == (long)(((n + page - 1) & ~(page - 1)) / 1024),
			  "size %zu: %ld KiB more mapped", n, after - before);
		memset(p, 0xa5, n);
		CHECK(p[0] == 0xa5 && p[n - 1] == 0xa5);
		gr_staging_unmap(p, n);
		CHECK_EQ(vm_kib(), before);
	}
	errno = 0;
	CHECK(gr_staging_map(0) == NULL && errno == EINVAL);
	gr_staging_unmap(NULL, 0);
}

int main(void)
{
	check_map();
	check_pieces();
	check_span_and_reuse();
	check_reserve_and_waiters();
	check_idle_batch_gives_way();
	printf("staging: ok\n");
	return 0;
}
