/*
 * Prefix sums ("op": "cumsum", PROTOCOL.md "cumsum"): the inclusive
 * running sums of a request's elements, one per element, typed as sum's
 * result (int64, uint64, float64) and written 8 little-endian bytes each.
 *
 * Integer sums wrap modulo 2^64, so any order of additions gives the same
 * bits. Float sums follow one order, the one the GPU's prefix sum kernel
 * keeps to (cuda/scan.h gives it step by step), so that a CPU and a GPU
 * give the same bits whatever the chunks, the threads or the backend.
 * In short, with every element converted to double and -0.0 standing for
 * a term left out: the elements are cut into tiles of GR_CUMSUM_TILE
 * (4096), counted from the request's first element; a tile into 256
 * "threads" of 16 consecutive elements, each with its own running sum
 * r_e and total R; the totals of each 32 threads scanned Kogge-Stone
 * (W), the 8 groups' totals added left to right, which gives each
 * thread the sum E_t of the tile before it and the tile its total A_j;
 * tile totals meet in a Fenwick tree, whose ranges give the carry X_j
 * into tile j; element e of thread t gets fl(fl(X_j + E_t) + r_e).
 *
 * A chunk's job (backend.h, job->cumsum) runs in two phases:
 *   LOCAL, on a worker, writes each thread's running sums r_e to the
 *     output and keeps each tile's total (integers: the chunk's own
 *     running sums, and its total);
 *   the loop thread then takes the chunks in order (gr_cumsum_carry),
 *     which feeds the tile totals to the tree and gives it the carry
 *     into each of the chunk's tiles;
 *   CARRY, on a worker again, works E_t out again from the totals R
 *     that the output holds (r_15 of each thread) and writes
 *     fl(fl(X_j + E_t) + r_e) over each r_e.
 * LOCAL of many chunks runs at once; only the carries, a few additions a
 * tile, wait for the chunks before. A chunk submitted once every chunk
 * before it was taken knows its carries already: its job is WHOLE, one
 * pass that carries tile by tile itself, on the request's tree, which no
 * one else touches until the loop thread takes that chunk in its turn
 * (but not a long float chunk where the engine splits LOCAL and CARRY
 * over several workers: gr_cumsum.split). Every way gives the same bits.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "math/reduce.h"

/* elements a tile; chunks are a whole number of tiles */
#define GR_CUMSUM_TILE 4096u
/* A float chunk of this many elements or more is worth its LOCAL and
 * CARRY phases (two passes, each split over workers) where the engine
 * has several workers, rather than WHOLE (one pass on one worker):
 * gr_cumsum.split */
#define GR_CUMSUM_SPLIT_MIN (8u * GR_REDUCE_BLOCK)

typedef enum gr_cumsum_phase {
	GR_CUMSUM_LOCAL,
	GR_CUMSUM_CARRY,
	GR_CUMSUM_WHOLE, /* LOCAL and CARRY in one pass: the carry was known */
} gr_cumsum_phase;

/* The tile totals so far, as the Fenwick tree keeps them: level[b] is the
 * sum of the last whole aligned range of 2^b tiles. */
typedef struct gr_cumsum_tree {
	uint64_t tiles; /* tiles taken in */
	double level[64];
} gr_cumsum_tree;

/* What one chunk's job needs, and gives back. */
typedef struct gr_cumsum_job {
	/* set by the submitter (gr_cumsum_job_new, gr_cumsum_carry) */
	gr_cumsum_phase phase;
	uint8_t *out;         /* the job's n prefix sums, 8-byte aligned */
	unsigned ntiles;      /* tiles of the job's elements (floats) */
	double *totals;       /* floats: each tile's total A_j, from LOCAL */
	double *carries;      /* floats: X_j of each tile, for CARRY */
	uint64_t carry;       /* integers: what CARRY and WHOLE add, modulo 2^64 */
	gr_cumsum_tree *tree; /* floats, WHOLE: the request's tree */
	/* set by LOCAL and WHOLE */
	uint64_t total; /* integers: the job's sum, modulo 2^64 */
	/* the loop thread's, cleared by gr_cumsum_job_new */
	bool local_done; /* LOCAL came back */
	bool final;      /* the outputs are final */
	bool out_owned;  /* out is the submitter's to free */
} gr_cumsum_job;

/* A request's prefix sums: what the loop thread keeps. */
typedef struct gr_cumsum {
	gr_dtype dt;
	unsigned njobs;       /* chunks in flight at most */
	unsigned max_tiles;   /* of one chunk */
	uint64_t carried;     /* elements of the chunks taken so far */
	uint64_t made, taken; /* jobs handed out, and taken (gr_cumsum_carry) */
	/* set by the submitter: the engine splits a phase over its workers,
	 * so a float chunk of GR_CUMSUM_SPLIT_MIN elements or more runs
	 * LOCAL and CARRY even where its carry is known */
	bool split;
	uint64_t isum;        /* integers: their sum, modulo 2^64 */
	gr_cumsum_tree tree;  /* floats: their tiles' totals */
	double *totals;       /* njobs * max_tiles (floats) */
	double *carries;      /* the same */
	gr_cumsum_job jobs[];
} gr_cumsum;

/*
 * A request's prefix sums over dtype dt, in chunks of at most
 * chunk_elements, njobs of them in flight at most. NULL when out of memory.
 */
gr_cumsum *gr_cumsum_new(gr_dtype dt, size_t chunk_elements, unsigned njobs);
gr_cumsum *gr_cumsum_free(gr_cumsum *cs);
/* Bytes it holds (to charge them). */
uint64_t gr_cumsum_bytes(const gr_cumsum *cs);

/*
 * The job of the chunk in slot i: n elements (at most the chunk size)
 * whose first is a multiple of GR_CUMSUM_TILE in the request, so that
 * its tiles are the request's; their prefix sums go to out (which may be
 * the elements themselves, for 8-byte dtypes), in the host's byte order
 * (as reduce.c reads elements: little-endian hosts). WHOLE when every
 * chunk before it was taken (gr_cumsum_carry) already, unless cs->split
 * and the chunk is a float one of GR_CUMSUM_SPLIT_MIN elements or more;
 * else LOCAL.
 */
gr_cumsum_job *gr_cumsum_job_new(gr_cumsum *cs, unsigned i, size_t n, uint8_t *out);

/* On a backend's thread: run the job's phase over its n elements (data:
 * the input, read by LOCAL only, at any alignment). */
void gr_cumsum_run(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n);

/* Whether the job's phase may run a range of its tiles at a time, on
 * several threads at once (gr_cumsum_run_tiles): LOCAL and CARRY of
 * floats, whose tiles are independent of each other. */
bool gr_cumsum_splits(const gr_cumsum_job *cj, gr_dtype dt);

/* gr_cumsum_run() of the job's tiles [j0, j1) alone (j1 <= its tiles;
 * data and n the whole job's), where gr_cumsum_splits() says so: every
 * range run once, in any order or at once, gives gr_cumsum_run()'s bits. */
void gr_cumsum_run_tiles(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n, unsigned j0,
			 unsigned j1);

/*
 * On the loop thread, chunk by chunk in order, once a chunk's job is
 * back: take its n elements into the running sum (floats: its tiles into
 * the tree). After LOCAL, work out the carries of its tiles and make the
 * job its CARRY phase, and return true; false when there is nothing to
 * add (integers after a carry of 0, and anything after WHOLE): its
 * outputs are final.
 */
bool gr_cumsum_carry(gr_cumsum *cs, gr_cumsum_job *cj, size_t n);

/* The prefix sums of n elements in one go on the calling thread (the
 * order above; tests and references): 0, or -ENOMEM. */
int gr_cumsum_whole(gr_dtype dt, const void *data, size_t n, uint8_t *out);
