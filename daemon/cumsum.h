/*
 * Prefix sums ("op": "cumsum", PROTOCOL.md "cumsum"): the inclusive
 * running sums of a request's elements, one per element, typed as sum's
 * result (int64, uint64, float64) and written 8 little-endian bytes each.
 *
 * Integer sums wrap modulo 2^64, so any order of additions gives the same
 * bits. Float sums follow one order, the same whatever the chunks, the
 * threads or the backend: the elements are cut into blocks of
 * GR_REDUCE_BLOCK, counted from the request's first element. Within a
 * block, s_i is the sum of the block's elements up to element i, added
 * left to right in double starting from the block's first element (each
 * converted to double exactly). R_b is the exact sum of every element
 * before block b, rounded once to double (reduce.h's exact partials;
 * -0.0 before the first block, the sum of nothing that leaves any s_i as
 * it is). Element i of block b gets fl(R_b + s_i).
 *
 * A chunk's job (backend.h, job->cumsum) runs in two phases:
 *   LOCAL, on a worker, writes s_i to the output and each block's exact
 *     partial (integers: the chunk's own running sums, and its total);
 *   the loop thread then takes the chunks in order (gr_cumsum_carry),
 *     which gives it the carry before each of the chunk's blocks;
 *   CARRY, on a worker again, adds the carries to the outputs, unless
 *     there is nothing to add (the first block, or only -0.0 before).
 * LOCAL of many chunks runs at once; only the carries, a few exact
 * additions a block, wait for the chunks before. A chunk submitted once
 * every chunk before it was taken knows its carry already: its job is
 * WHOLE, one pass that carries block by block itself, on the request's
 * running sum, which no one else touches until the loop thread takes
 * that chunk in its turn. Every way gives the same bits.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/reduce.h"

typedef enum gr_cumsum_phase {
	GR_CUMSUM_LOCAL,
	GR_CUMSUM_CARRY,
	GR_CUMSUM_WHOLE, /* LOCAL and CARRY in one pass: the carry was known */
} gr_cumsum_phase;

/* What one chunk's job needs, and gives back. */
typedef struct gr_cumsum_job {
	/* set by the submitter (gr_cumsum_job_new, gr_cumsum_carry) */
	gr_cumsum_phase phase;
	uint8_t *out;       /* the job's n prefix sums, 8-byte aligned */
	unsigned nblocks;   /* blocks of the job's elements (floats) */
	gr_partial *blocks; /* floats: each block's exact sum, from LOCAL */
	double *carries;    /* floats: R_b of each block, for CARRY */
	uint64_t carry;     /* integers: what CARRY and WHOLE add, modulo 2^64 */
	gr_partial *sum;    /* floats, WHOLE: the request's running exact sum */
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
	unsigned max_blocks;  /* of one chunk */
	uint64_t carried;     /* elements of the chunks taken so far */
	uint64_t made, taken; /* jobs handed out, and taken (gr_cumsum_carry) */
	uint64_t isum;        /* integers: their sum, modulo 2^64 */
	gr_partial sum;       /* floats: their exact sum */
	gr_partial *blocks;   /* njobs * max_blocks (floats) */
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
 * whose first is a multiple of GR_REDUCE_BLOCK in the request, so that
 * its blocks are the request's; their prefix sums go to out (which may be
 * the elements themselves, for 8-byte dtypes), in the host's byte order
 * (as reduce.c reads elements: little-endian hosts). WHOLE when every
 * chunk before it was taken (gr_cumsum_carry) already, else LOCAL.
 */
gr_cumsum_job *gr_cumsum_job_new(gr_cumsum *cs, unsigned i, size_t n, uint8_t *out);

/* On a backend's thread: run the job's phase over its n elements (data:
 * the input, read by LOCAL only, at any alignment). */
void gr_cumsum_run(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n);

/*
 * On the loop thread, chunk by chunk in order, once a chunk's job is
 * back: take its n elements into the running sum. After LOCAL, work out
 * the carries of its blocks and make the job its CARRY phase, and return
 * true; false when there is nothing to add (and after WHOLE): its
 * outputs are final.
 */
bool gr_cumsum_carry(gr_cumsum *cs, gr_cumsum_job *cj, size_t n);

/* The prefix sums of n elements in one go on the calling thread (the
 * order above; tests and references): 0, or -ENOMEM. */
int gr_cumsum_whole(gr_dtype dt, const void *data, size_t n, uint8_t *out);
