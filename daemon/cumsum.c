/*
 * Prefix sums (cumsum.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cumsum.h"

static unsigned blocks_of(size_t n)
{
	return (unsigned)((n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK);
}

gr_cumsum *gr_cumsum_new(gr_dtype dt, size_t chunk_elements, unsigned njobs)
{
	gr_cumsum *cs = calloc(1, sizeof(*cs) + njobs * sizeof(gr_cumsum_job));

	if (!cs)
		return NULL;
	cs->dt = dt;
	cs->njobs = njobs;
	cs->max_blocks = blocks_of(chunk_elements);
	gr_partial_identity(GR_OP_SUM, dt, &cs->sum);
	if (gr_dtype_is_float(dt) && cs->max_blocks > 0) {
		size_t nb = (size_t)njobs * cs->max_blocks;
		cs->blocks = malloc(nb * sizeof(*cs->blocks));
		cs->carries = malloc(nb * sizeof(*cs->carries));
		if (!cs->blocks || !cs->carries)
			return gr_cumsum_free(cs);
	}
	return cs;
}

gr_cumsum *gr_cumsum_free(gr_cumsum *cs)
{
	if (cs) {
		free(cs->blocks);
		free(cs->carries);
		free(cs);
	}
	return NULL;
}

uint64_t gr_cumsum_bytes(const gr_cumsum *cs)
{
	uint64_t b = sizeof(*cs) + cs->njobs * sizeof(gr_cumsum_job);

	if (cs->blocks)
		b += (uint64_t)cs->njobs * cs->max_blocks * (sizeof(gr_partial) + sizeof(double));
	return b;
}

gr_cumsum_job *gr_cumsum_job_new(gr_cumsum *cs, unsigned i, size_t n, uint8_t *out)
{
	unsigned slot = i % cs->njobs;
	gr_cumsum_job *cj = &cs->jobs[slot];
	/* every job handed out before was taken: the carry is known */
	bool whole = cs->taken == cs->made;

	cs->made++;
	cj->phase = whole ? GR_CUMSUM_WHOLE : GR_CUMSUM_LOCAL;
	cj->out = out;
	cj->nblocks = blocks_of(n);
	cj->blocks = cs->blocks ? cs->blocks + (size_t)slot * cs->max_blocks : NULL;
	cj->carries = cs->carries ? cs->carries + (size_t)slot * cs->max_blocks : NULL;
	cj->carry = whole ? cs->isum : 0;
	cj->sum = &cs->sum;
	cj->total = 0;
	cj->local_done = cj->final = cj->out_owned = false;
	return cj;
}

/* ---- the kernels ---- */

static inline double load_f(gr_dtype dt, const uint8_t *p)
{
	if (dt == GR_DT_F32) {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	double d;
	memcpy(&d, p, 8);
	return d;
}

static inline uint64_t load_i(gr_dtype dt, const uint8_t *p)
{
	switch (dt) {
	case GR_DT_I32: {
		int32_t v;
		memcpy(&v, p, 4);
		return (uint64_t)(int64_t)v;
	}
	case GR_DT_U32: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	}
}

static bool is_neg_zero(double r)
{
	return r == 0 && signbit(r);
}

/*
 * One block's prefix sums: s_i added left to right from its first
 * element, and out[i] = fl(r + s_i), or s_i itself where r is -0.0. in
 * may be out (8-byte elements in place). f32 elements are widened into
 * out first, in a pass that vectorizes: a conversion inside the chain of
 * additions would lengthen it (x86's cvtss2sd also waits for the last
 * write of its register, here the last output).
 */
static void block_prefix(gr_dtype dt, const uint8_t *in, size_t n, double r, double *out)
{
	const uint8_t *x = in;

	if (dt == GR_DT_F32) {
		for (size_t i = 0; i < n; i++)
			out[i] = load_f(GR_DT_F32, in + 4 * i);
		x = (const uint8_t *)out;
	}
	double s = load_f(GR_DT_F64, x);
	if (is_neg_zero(r)) {
		out[0] = s;
		for (size_t i = 1; i < n; i++) {
			s += load_f(GR_DT_F64, x + 8 * i);
			out[i] = s;
		}
		return;
	}
	out[0] = r + s;
	for (size_t i = 1; i < n; i++) {
		s += load_f(GR_DT_F64, x + 8 * i);
		out[i] = r + s;
	}
}

static void local_float(gr_cumsum_job *cj, gr_dtype dt, const uint8_t *in, size_t n)
{
	size_t size = gr_dtype_size(dt);
	double *out = (double *)(void *)cj->out;

	for (unsigned b = 0; b < cj->nblocks; b++) {
		size_t first = (size_t)b * GR_REDUCE_BLOCK;
		size_t k = n - first < GR_REDUCE_BLOCK ? n - first : GR_REDUCE_BLOCK;
		/* the block's sum first: out may be the input itself (a
		 * region's 8-byte elements, in place) */
		gr_reduce_block(GR_OP_SUM, dt, in + first * size, k, &cj->blocks[b]);
		block_prefix(dt, in + first * size, k, -0.0, out + first);
	}
}

/* The carry before a block: the exact sum so far rounded once, -0.0 for
 * the sum of nothing. */
static double carry_of(gr_dtype dt, const gr_partial *sum)
{
	gr_value v;

	if (sum->count == 0)
		return -0.0;
	gr_partial_finish(GR_OP_SUM, dt, sum, &v);
	return v.f;
}

/* WHOLE: block by block, the carry from the running exact sum, the
 * block's sum into it (before out, which may be in, is written), then
 * fl(R_b + s_i) in the same pass as s_i. */
static void whole_float(gr_cumsum_job *cj, gr_dtype dt, const uint8_t *in, size_t n)
{
	size_t size = gr_dtype_size(dt);
	double *out = (double *)(void *)cj->out;
	gr_partial block;

	for (unsigned b = 0; b < cj->nblocks; b++) {
		size_t first = (size_t)b * GR_REDUCE_BLOCK;
		size_t k = n - first < GR_REDUCE_BLOCK ? n - first : GR_REDUCE_BLOCK;
		double r = carry_of(dt, cj->sum);
		gr_reduce_block(GR_OP_SUM, dt, in + first * size, k, &block);
		gr_partial_combine(GR_OP_SUM, dt, cj->sum, &block);
		block_prefix(dt, in + first * size, k, r, out + first);
	}
}

/* Integers wrap modulo 2^64: running sums from the carry (0 for LOCAL),
 * and the job's total. */
#define LOCAL_INT(name, dt)                                                                        \
	static uint64_t name(const uint8_t *in, size_t n, uint64_t carry, uint64_t *out)           \
	{                                                                                          \
		const size_t size = gr_dtype_size(dt);                                             \
		uint64_t s = carry;                                                                \
		for (size_t i = 0; i < n; i++) {                                                   \
			s += load_i(dt, in + size * i);                                            \
			out[i] = s;                                                                \
		}                                                                                  \
		return s - carry;                                                                  \
	}
LOCAL_INT(local_i32, GR_DT_I32)
LOCAL_INT(local_u32, GR_DT_U32)
LOCAL_INT(local_64, GR_DT_U64)

static void carry_float(gr_cumsum_job *cj, size_t n)
{
	double *out = (double *)(void *)cj->out;

	for (unsigned b = 0; b < cj->nblocks; b++) {
		size_t first = (size_t)b * GR_REDUCE_BLOCK;
		size_t k = n - first < GR_REDUCE_BLOCK ? n - first : GR_REDUCE_BLOCK;
		double r = cj->carries[b];
		/* -0.0 + x is x: leave the block as it is */
		if (is_neg_zero(r))
			continue;
		for (size_t i = first; i < first + k; i++)
			out[i] = r + out[i];
	}
}

static void carry_int(gr_cumsum_job *cj, size_t n)
{
	uint64_t *out = (uint64_t *)(void *)cj->out;
	uint64_t c = cj->carry;

	for (size_t i = 0; i < n; i++)
		out[i] += c;
}

void gr_cumsum_run(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n)
{
	uint64_t *out = (uint64_t *)(void *)cj->out;

	if (n == 0)
		return;
	if (cj->phase == GR_CUMSUM_CARRY) {
		if (gr_dtype_is_float(dt))
			carry_float(cj, n);
		else
			carry_int(cj, n);
		return;
	}
	if (gr_dtype_is_float(dt)) {
		if (cj->phase == GR_CUMSUM_WHOLE)
			whole_float(cj, dt, data, n);
		else
			local_float(cj, dt, data, n);
		return;
	}
	/* LOCAL's carry is 0 */
	if (dt == GR_DT_I32)
		cj->total = local_i32(data, n, cj->carry, out);
	else if (dt == GR_DT_U32)
		cj->total = local_u32(data, n, cj->carry, out);
	else
		cj->total = local_64(data, n, cj->carry, out);
}

bool gr_cumsum_carry(gr_cumsum *cs, gr_cumsum_job *cj, size_t n)
{
	bool add = false;

	cs->carried += n;
	cs->taken++;
	if (cj->phase == GR_CUMSUM_WHOLE) {
		/* it carried itself, and took its blocks into cs->sum */
		cs->isum += cj->total;
		return false;
	}
	cj->phase = GR_CUMSUM_CARRY;
	if (!gr_dtype_is_float(cs->dt)) {
		cj->carry = cs->isum;
		cs->isum += cj->total;
		return cj->carry != 0;
	}
	for (unsigned b = 0; b < cj->nblocks; b++) {
		double r = carry_of(cs->dt, &cs->sum);
		cj->carries[b] = r;
		add |= !is_neg_zero(r);
		gr_partial_combine(GR_OP_SUM, cs->dt, &cs->sum, &cj->blocks[b]);
	}
	return add;
}

int gr_cumsum_whole(gr_dtype dt, const void *data, size_t n, uint8_t *out)
{
	gr_cumsum *cs;

	if (n == 0)
		return 0;
	cs = gr_cumsum_new(dt, n, 1);
	if (!cs)
		return -ENOMEM;
	gr_cumsum_job *cj = gr_cumsum_job_new(cs, 0, n, out);
	gr_cumsum_run(cj, dt, data, n);
	if (gr_cumsum_carry(cs, cj, n))
		gr_cumsum_run(cj, dt, data, n);
	gr_cumsum_free(cs);
	return 0;
}
