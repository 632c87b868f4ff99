#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench-data.h"
#include "bench/bench-region.h"
#include "proto/message.h"
#include "proto/mp.h"

static bool value_ok(const bench_data *d, const gr_value *v, uint64_t count);

bool bench_data_reply_ok(gr_op op, const bench_data *d, const gr_obj *result)
{
	gr_moments m;
	gr_value v;
	uint64_t count;

	if (op == GR_OP_MOMENTS)
		return gr_msg_parse_moments_result(result, d->expect.kind, &m) == 0 &&
		       value_ok(d, &m.sum, m.count);
	return gr_msg_parse_reduce_result(result, d->expect.kind, &v, &count) == 0 &&
	       value_ok(d, &v, count);
}

static bool value_ok(const bench_data *d, const gr_value *v, uint64_t count)
{
	if (count != d->n || v->kind != d->expect.kind)
		return false;
	switch (v->kind) {
	case GR_KIND_I64:
		return v->i == d->expect.i;
	case GR_KIND_U64:
		return v->u == d->expect.u;
	case GR_KIND_F64:
		return fabs(v->f - d->expect.f) <= d->tolerance;
	}
	return false;
}

/* The repeating part of the array: -1 0 1 ... (0 1 2 ... unsigned). */
static int bench_periodic(size_t i, bool is_unsigned)
{
	return (int)(i % 3) - (is_unsigned ? 0 : 1);
}

/* The value of element i of n: small integers, one distinct minimum and
 * one distinct maximum, so that every result is exact. */
static int bench_elem(size_t i, size_t n, bool is_unsigned)
{
	if (n > 2 && i == n / 3)
		return is_unsigned ? 0 : -2;
	if (n > 2 && i == 2 * n / 3)
		return 3;
	return bench_periodic(i, is_unsigned);
}

/* A small integer v's bits as a narrow float (its f32's fields moved:
 * exact, v being small). */
static unsigned bench_narrow_float(gr_dtype dt, int v)
{
	float f = (float)v;
	uint32_t b;
	memcpy(&b, &f, 4);
	if (!v)
		return 0;
	unsigned sign = b >> 31, e = b >> 23 & 0xff, m = b & 0x7fffff;
	switch (dt) {
	case GR_DT_F16:
		return sign << 15 | (e - 112) << 10 | m >> 13;
	case GR_DT_BF16:
		return b >> 16;
	case GR_DT_F8E4M3:
		return sign << 7 | (e - 120) << 3 | m >> 20;
	default: /* GR_DT_F8E5M2: an f16's top byte */
		return (sign << 15 | (e - 112) << 10 | m >> 13) >> 8;
	}
}

/* Element i of a T array at p takes the value v. */
static void bench_store(void *p, size_t i, gr_dtype dt, int v)
{
	switch (dt) {
	case GR_DT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
	case GR_DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case GR_DT_I16: ((int16_t *)p)[i] = (int16_t)v; break;
	case GR_DT_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case GR_DT_F16:
	case GR_DT_BF16: ((uint16_t *)p)[i] = (uint16_t)bench_narrow_float(dt, v); break;
	case GR_DT_F8E4M3:
	case GR_DT_F8E5M2: ((uint8_t *)p)[i] = (uint8_t)bench_narrow_float(dt, v); break;
	case GR_DT_I32: ((int32_t *)p)[i] = v; break;
	case GR_DT_I64: ((int64_t *)p)[i] = v; break;
	case GR_DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case GR_DT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case GR_DT_F32: ((float *)p)[i] = (float)v; break;
	case GR_DT_F64: ((double *)p)[i] = v; break;
	default: break;
	}
}

/* Elements [a, b) of the periodic part, as pieces of the block. */
static void bench_segs_run(bench_data *d, const uint8_t *block, size_t block_elems,
			   size_t esz, size_t a, size_t b)
{
	while (a < b) {
		size_t off = a % block_elems, len = block_elems - off;

		if (len > b - a)
			len = b - a;
		d->segs[d->nsegs++] = (struct iovec){ (void *)(block + off * esz), len * esz };
		a += len;
	}
}

/*
 * The payload of a large array, out of one block of the periodic pattern
 * (a multiple of its period, so element i is the block's i mod its
 * length) and two cells for the elements that break the period.
 */
static int bench_data_repeat(const bench_opts *o, bench_data *d, bool is_unsigned)
{
	size_t esz = gr_dtype_size(o->dtype), n = o->elements;
	size_t block_elems = (size_t)(o->send_buffer / esz) / 3 * 3;
	size_t odd[2] = { n / 3, 2 * n / 3 };
	uint8_t *p, *cells;

	p = malloc((block_elems + 2) * esz);
	/* each run of the period: a piece per block boundary it crosses,
	 * and one more; and the two cells */
	d->segs = calloc(2 * (n / block_elems + 3), sizeof(*d->segs));
	if (!p || !d->segs) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < block_elems; i++)
		bench_store(p, i, o->dtype, bench_periodic(i, is_unsigned));
	cells = p + block_elems * esz;
	for (unsigned j = 0; j < 2; j++)
		bench_store(cells, j, o->dtype, bench_elem(odd[j], n, is_unsigned));
	bench_segs_run(d, p, block_elems, esz, 0, odd[0]);
	d->segs[d->nsegs++] = (struct iovec){ cells, esz };
	bench_segs_run(d, p, block_elems, esz, odd[0] + 1, odd[1]);
	d->segs[d->nsegs++] = (struct iovec){ cells + esz, esz };
	bench_segs_run(d, p, block_elems, esz, odd[1] + 1, n);
	d->data = p;
	return 0;
}

int bench_data_fill(const bench_opts *o, bench_data *d)
{
	size_t esz = gr_dtype_size(o->dtype), n = o->elements;
	bool is_unsigned = gr_result_kind(GR_OP_SUM, o->dtype) == GR_KIND_U64;
	/* |x| <= 3 and n < 2^32: the sums fit in 64 bits. */
	int64_t sum = 0, sumsq = 0, mn = INT64_MAX, mx = INT64_MIN;
	gr_buf hb;
	uint8_t *p;
	int r;

	d->memfd = -1;
	if (o->region) {
		if ((r = bench_region_memfd(n * esz, &d->memfd, &d->data)) < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			bench_store(d->data, i, o->dtype, bench_elem(i, n, is_unsigned));
		d->nsegs = 0;
	} else if (o->send_buffer && n * esz > o->send_buffer) {
		if ((r = bench_data_repeat(o, d, is_unsigned)) < 0)
			return r;
	} else {
		/* at most --send-buffer bytes, unless that is 0 */
		p = malloc(n ? n * esz : 1);
		d->segs = calloc(1, sizeof(*d->segs));
		if (!p || !d->segs) {
			free(p);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++)
			bench_store(p, i, o->dtype, bench_elem(i, n, is_unsigned));
		d->data = p;
		d->segs[0] = (struct iovec){ p, n * esz };
		d->nsegs = n ? 1 : 0;
	}
	/* Three of every period, then the two replaced elements corrected. */
	for (size_t i = 0; i < n && i < 3; i++) {
		int64_t x = bench_periodic(i, is_unsigned), k = (int64_t)((n - i + 2) / 3);

		sum += k * x;
		sumsq += k * x * x;
		if (x < mn)
			mn = x;
		if (x > mx)
			mx = x;
	}
	if (n > 2) {
		size_t sp[2] = { n / 3, 2 * n / 3 };

		for (unsigned j = 0; j < 2; j++) {
			int64_t was = bench_periodic(sp[j], is_unsigned);
			int64_t x = bench_elem(sp[j], n, is_unsigned);

			sum += x - was;
			sumsq += x * x - was * was;
			if (x < mn)
				mn = x;
			if (x > mx)
				mx = x;
		}
	}
	d->n = n;
	d->nbytes = n * esz;
	d->expect.kind = gr_result_kind(o->op, o->dtype);
	/* argmin and argmax: their value is checked, not the index; moments:
	 * its sum, not its other fields */
	int64_t e = o->op == GR_OP_SUM || o->op == GR_OP_MOMENTS ? sum : o->op == GR_OP_SUMSQ ? sumsq :
		    o->op == GR_OP_MIN || o->op == GR_OP_ARGMIN ? mn : mx;
	if (o->op != GR_OP_SUM && o->op != GR_OP_SUMSQ && n == 0)
		e = 0; /* the server answers "empty": counted as errors */
	switch (d->expect.kind) {
	case GR_KIND_I64:
		d->expect.i = (int64_t)e;
		break;
	case GR_KIND_U64:
		d->expect.u = (uint64_t)e;
		break;
	case GR_KIND_F64:
		d->expect.f = (double)e;
		break;
	}
	/* Partial sums of these values stay below 2^24 in magnitude when n
	 * does, so even float32 accumulation is exact; past that, allow the
	 * rounding of a float32 pairwise sum. */
	d->tolerance = n <= (1u << 24) ? 0 : 1e-6 * (double)(sumsq > 0 ? sumsq : 1);

	/* The header template, whose msgid conn_submit() (bench-conn.c)
	 * rewrites in place:
	 * [0x94, 0x00, 0xce, msgid as 4 bytes big-endian, ...]. */
	gr_buf_init(&hb);
	d->wire_bytes = o->region ? 0 : d->nbytes;
	if (o->region)
		r = bench_region_request(&hb, o->op, o->dtype, n, &d->region_id_at);
	else
		r = gr_msg_write_reduce_header(&hb, 0x10000, o->op, o->dtype, (uint32_t)d->nbytes);
	if (r >= 0 && (hb.len > HDR_MAX || hb.len < 7 ||
		       memcmp(hb.data, "\x94\x00\xce\x00\x01\x00\x00", 7) != 0))
		r = -EPROTO;
	if (r >= 0) {
		memcpy(d->hdr, hb.data, hb.len);
		d->hdr_len = hb.len;
	}
	gr_buf_deinit(&hb);
	return r;
}
