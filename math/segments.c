/*
 * Segmented reduces (segments.h).
 */
#include <endian.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "math/moments.h"
#include "math/segments.h"

size_t gr_segs_record_bytes(gr_op op)
{
	if (gr_op_has_index(op))
		return 16;
	return op == GR_OP_MOMENTS ? 40 : 8;
}

gr_segs *gr_segs_new(uint64_t *offsets, uint64_t nseg, gr_op op, uint64_t ddof, unsigned njobs)
{
	size_t rb = gr_segs_record_bytes(op);
	gr_segs *s = calloc(1, sizeof(*s) + njobs * sizeof(gr_segjob));

	if (!s || nseg > SIZE_MAX / rb) {
		free(s);
		free(offsets);
		return NULL;
	}
	s->records = malloc(nseg ? (size_t)nseg * rb : 1);
	if (!s->records) {
		free(s);
		free(offsets);
		return NULL;
	}
	s->offsets = offsets;
	s->nseg = nseg;
	s->record_bytes = rb;
	s->ddof = ddof;
	s->carry_seg = GR_SEG_NONE;
	s->njobs = njobs;
	return s;
}

gr_segs *gr_segs_free(gr_segs *s)
{
	if (s) {
		free(s->offsets);
		free(s->records);
		free(s);
	}
	return NULL;
}

uint64_t gr_segs_bytes(const gr_segs *s)
{
	return sizeof(*s) + s->njobs * sizeof(gr_segjob) + (s->nseg + 1) * 8 +
	       s->nseg * s->record_bytes;
}

gr_segjob *gr_segs_job(gr_segs *s, unsigned i, uint64_t first)
{
	gr_segjob *sj = &s->jobs[i % s->njobs];

	sj->offsets = s->offsets;
	sj->nseg = s->nseg;
	sj->first = first;
	sj->records = s->records;
	sj->ddof = s->ddof;
	sj->head_seg = sj->tail_seg = GR_SEG_NONE;
	sj->head_open = false;
	return sj;
}

/* ---- records ---- */

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint64_t value_bits(const gr_value *v)
{
	uint64_t u;

	memcpy(&u, &v->u, 8);
	return u;
}

/* What min (max) of an empty segment gives: the op's identity, the
 * dtype's largest (smallest) value, +inf (-inf) for floats. */
static uint64_t empty_extreme(gr_dtype dt, bool is_max)
{
	double f;

	switch (dt) {
	case GR_DT_I8:
		return (uint64_t)(is_max ? (int64_t)INT8_MIN : (int64_t)INT8_MAX);
	case GR_DT_I16:
		return (uint64_t)(is_max ? (int64_t)INT16_MIN : (int64_t)INT16_MAX);
	case GR_DT_U8:
		return is_max ? 0 : UINT8_MAX;
	case GR_DT_U16:
		return is_max ? 0 : UINT16_MAX;
	case GR_DT_I32:
		return (uint64_t)(is_max ? (int64_t)INT32_MIN : (int64_t)INT32_MAX);
	case GR_DT_I64:
		return (uint64_t)(is_max ? INT64_MIN : INT64_MAX);
	case GR_DT_U32:
		return is_max ? 0 : UINT32_MAX;
	case GR_DT_U64:
		return is_max ? 0 : UINT64_MAX;
	default:
		f = is_max ? -INFINITY : INFINITY;
		uint64_t u;
		memcpy(&u, &f, 8);
		return u;
	}
}

static uint64_t f64_bits(double f)
{
	uint64_t u;

	memcpy(&u, &f, 8);
	return u;
}

void gr_segs_record(gr_op op, gr_dtype dt, uint64_t ddof, const gr_partial *p, uint8_t *rec)
{
	gr_value v;

	if (op == GR_OP_MOMENTS) {
		gr_moments m;
		if (p->count == 0) {
			gr_partial_finish(op, dt, p, &v); /* the sum of nothing */
			put64(rec, value_bits(&v));
			put64(rec + 8, empty_extreme(dt, false));
			put64(rec + 16, empty_extreme(dt, true));
			put64(rec + 24, f64_bits(NAN));
			put64(rec + 32, f64_bits(NAN));
			return;
		}
		bool var_nan = ddof >= p->count;
		gr_moments_finish(dt, p, var_nan ? 0 : ddof, &m);
		put64(rec, value_bits(&m.sum));
		put64(rec + 8, value_bits(&m.min));
		put64(rec + 16, value_bits(&m.max));
		put64(rec + 24, f64_bits(m.mean));
		put64(rec + 32, f64_bits(var_nan ? NAN : m.var));
		return;
	}
	if (gr_partial_finish(op, dt, p, &v) == GR_OK) {
		put64(rec, value_bits(&v));
		if (gr_op_has_index(op))
			put64(rec + 8, p->index);
		return;
	}
	/* min, max, argmin, argmax of nothing */
	put64(rec, empty_extreme(dt, op == GR_OP_MAX || op == GR_OP_ARGMAX));
	if (gr_op_has_index(op))
		put64(rec + 8, GR_SEG_NONE);
}

/* ---- the jobs ---- */

/* The first i in [0, n) with v[i] >= x, or n. */
static uint64_t lower_bound(const uint64_t *v, uint64_t n, uint64_t x)
{
	uint64_t lo = 0;

	while (n > 0) {
		uint64_t half = n / 2;
		if (v[lo + half] < x) {
			lo += half + 1;
			n -= half + 1;
		} else {
			n = half;
		}
	}
	return lo;
}

void gr_segs_reduce(gr_segjob *sj, gr_op op, gr_dtype dt, const void *data, size_t n,
		    gr_partial *head)
{
	const uint64_t *off = sj->offsets;
	const uint64_t k = sj->nseg, first = sj->first, end = first + n;
	const size_t size = gr_dtype_size(dt), rb = gr_segs_record_bytes(op);
	const uint8_t *at = data; /* element first */
	/* the job after the request's last element writes the empty
	 * segments that begin at its end */
	const bool last = end == off[k];
	gr_partial tmp;

	sj->head_seg = sj->tail_seg = GR_SEG_NONE;
	sj->head_open = false;
	/* the first segment that begins at or after first */
	uint64_t s = lower_bound(off, k + 1, first);
	if (s > k || off[s] > first) {
		/* segment s - 1 began before this job: its piece is the head */
		uint64_t stop = s <= k && off[s] < end ? off[s] : end;
		gr_reduce(op, dt, at, (size_t)(stop - first), head);
		sj->head_seg = s - 1;
		sj->head_open = s > k || off[s] > end;
		if (sj->head_open)
			return;
	} else {
		gr_partial_identity(op, dt, head);
	}
	for (; s < k && (off[s] < end || (last && off[s] == end)); s++) {
		uint64_t a = off[s], b = off[s + 1];
		if (b > end) {
			gr_reduce(op, dt, at + (a - first) * size, (size_t)(end - a), &sj->tail);
			sj->tail_seg = s;
			return;
		}
		gr_reduce(op, dt, at + (a - first) * size, (size_t)(b - a), &tmp);
		gr_segs_record(op, dt, sj->ddof, &tmp, sj->records + s * rb);
	}
}

bool gr_segs_whole(const gr_segjob *sj, uint64_t n, uint64_t *ret_s0, uint64_t *ret_s1)
{
	const uint64_t *off = sj->offsets;
	const uint64_t k = sj->nseg, first = sj->first, end = first + n;

	if (n == 0 || end < first || end > off[k])
		return false;
	const uint64_t s0 = lower_bound(off, k + 1, first);
	if (s0 > k || off[s0] != first)
		return false;
	/* end <= off[k], so s1 <= k */
	const uint64_t s1 = end == off[k] ? k : lower_bound(off, k + 1, end);
	if (off[s1] != end)
		return false;
	*ret_s0 = s0;
	*ret_s1 = s1;
	return true;
}

uint64_t gr_segs_cut(const uint64_t *offsets, uint64_t k, uint64_t first, uint64_t want)
{
	/* the first offset past want, and the one before it */
	const uint64_t s = lower_bound(offsets, k + 1, want + 1);
	return s > 0 && offsets[s - 1] > first ? offsets[s - 1] : want;
}

void gr_segs_merge(gr_segjob *sj, gr_partial *head, gr_op op, gr_dtype dt,
		   const gr_segjob *parts, const gr_partial *heads, unsigned n)
{
	const size_t rb = gr_segs_record_bytes(op);
	uint64_t cseg = GR_SEG_NONE; /* the segment carried from part to part */
	bool before = false;         /* ... which began before the job */
	gr_partial carry;

	sj->head_seg = sj->tail_seg = GR_SEG_NONE;
	sj->head_open = false;
	for (unsigned i = 0; i < n; i++) {
		const gr_segjob *p = &parts[i];
		if (p->head_seg != GR_SEG_NONE) {
			if (cseg == p->head_seg) {
				gr_partial_combine(op, dt, &carry, &heads[i]);
			} else {
				/* only the first part begins inside a segment that
				 * no earlier part carries */
				carry = heads[i];
				cseg = p->head_seg;
				before = true;
			}
			if (p->head_open)
				continue;
			if (before) {
				*head = carry;
				sj->head_seg = cseg;
			} else {
				gr_segs_record(op, dt, sj->ddof, &carry, sj->records + cseg * rb);
			}
			cseg = GR_SEG_NONE;
			before = false;
		}
		if (p->tail_seg != GR_SEG_NONE) {
			carry = p->tail;
			cseg = p->tail_seg;
			before = false;
		}
	}
	if (cseg != GR_SEG_NONE && before) {
		*head = carry;
		sj->head_seg = cseg;
		sj->head_open = true;
	} else if (cseg != GR_SEG_NONE) {
		sj->tail = carry;
		sj->tail_seg = cseg;
	}
	if (sj->head_seg == GR_SEG_NONE)
		gr_partial_identity(op, dt, head);
}

void gr_segs_join(gr_segs *s, gr_op op, gr_dtype dt, const gr_segjob *sj,
		  const gr_partial *head)
{
	if (sj->head_seg != GR_SEG_NONE) {
		/* the head goes on with the segment the last chunk left open */
		if (s->carry_seg == sj->head_seg)
			gr_partial_combine(op, dt, &s->carry, head);
		else
			s->carry = *head; /* not reached: every head continues a tail */
		s->carry_seg = sj->head_seg;
		if (sj->head_open)
			return;
		gr_segs_record(op, dt, s->ddof, &s->carry, s->records + s->carry_seg * s->record_bytes);
		s->carry_seg = GR_SEG_NONE;
	}
	if (sj->tail_seg != GR_SEG_NONE) {
		s->carry = sj->tail;
		s->carry_seg = sj->tail_seg;
	}
}

void gr_segs_all_empty(gr_segs *s, gr_op op, gr_dtype dt)
{
	gr_partial id;

	gr_partial_identity(op, dt, &id);
	for (uint64_t i = 0; i < s->nseg; i++)
		gr_segs_record(op, dt, s->ddof, &id, s->records + i * s->record_bytes);
}
