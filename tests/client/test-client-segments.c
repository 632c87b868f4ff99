/*
 * Segmented reduces against the real daemon (the harness:
 * daemon-harness.h): through the library and gpuredctl, every record
 * against its segment reduced alone.
 *
 *   test-client-segments segments GPURED GPUREDCTL
 *
 * By hand (the worked example of PROTOCOL.md), random segments of every op
 * and dtype, the errors of the library and of the daemon, requests
 * pipelined, in regions, as many segments as the daemon takes, and
 * gpuredctl --rows and --offsets.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"

/* Whether field k (of 8 bytes) of op's record holds a double. */
static bool record_field_is_float(gpured_op op, gpured_dtype dt, size_t k)
{
	if (op == GPURED_OP_MOMENTS && k >= 3)
		return true; /* mean, var */
	if ((op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX) && k == 1)
		return false; /* index */
	return gpured_result_kind(op, dt) == GPURED_KIND_F64;
}

/* Records a and b the same bits, field by field, but for NaNs of any
 * payload and, with tol, integer sumsq within tol relatively. */
static bool same_record(gpured_op op, gpured_dtype dt, const uint8_t *a, const uint8_t *b,
			double tol)
{
	for (size_t k = 0; k < gpured_segment_record_bytes(op) / 8; k++) {
		double x, y;

		if (memcmp(a + 8 * k, b + 8 * k, 8) == 0)
			continue;
		if (!record_field_is_float(op, dt, k))
			return false;
		memcpy(&x, a + 8 * k, 8);
		memcpy(&y, b + 8 * k, 8);
		if (!(isnan(x) && isnan(y)) && !(tol > 0 && fabs(x - y) <= tol * fabs(y)))
			return false;
	}
	return true;
}

/* What an empty segment's record holds (PROTOCOL.md, "Segments"). */
static void empty_record(gpured_op op, gpured_dtype dt, uint8_t *ret)
{
	gpured_number lo, hi, zero = { .u = 0 };

	switch (dt) {
	case GPURED_I32: lo.i = INT32_MAX; hi.i = INT32_MIN; break;
	case GPURED_I64: lo.i = INT64_MAX; hi.i = INT64_MIN; break;
	case GPURED_U32: lo.u = UINT32_MAX; hi.u = 0; break;
	case GPURED_U64: lo.u = UINT64_MAX; hi.u = 0; break;
	default: lo.f = INFINITY; hi.f = -INFINITY; break;
	}
	switch (op) {
	case GPURED_OP_SUM:
	case GPURED_OP_SUMSQ:
		memcpy(ret, &zero, 8);
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
		memcpy(ret, op == GPURED_OP_MIN ? &lo : &hi, 8);
		break;
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX: {
		gpured_arg_record r = { op == GPURED_OP_ARGMIN ? lo : hi, GPURED_SEGMENT_NO_INDEX };
		memcpy(ret, &r, sizeof(r));
		break;
	}
	case GPURED_OP_MOMENTS: {
		gpured_moments_record r = { zero, lo, hi, NAN, NAN };
		memcpy(ret, &r, sizeof(r));
		break;
	}
	}
}

/* The record of len elements at seg reduced alone (identity when empty). */
static void segment_alone(gpured_t *g, gpured_op op, gpured_dtype dt, const void *seg,
			  size_t len, uint64_t ddof, uint8_t *ret)
{
	if (len == 0) {
		empty_record(op, dt, ret);
	} else if (op == GPURED_OP_MOMENTS) {
		gpured_moments m;
		CHECK_MSG(gpured_reduce_moments(g, dt, seg, len, ddof < len ? ddof : 0, &m) == 0,
			  "%s", gpured_errmsg(g));
		gpured_moments_record r;
		memcpy(&r.sum, &m.sum.v, 8);
		memcpy(&r.min, &m.min.v, 8);
		memcpy(&r.max, &m.max.v, 8);
		r.mean = m.mean;
		r.var = ddof < len ? m.var : NAN;
		memcpy(ret, &r, sizeof(r));
	} else {
		gpured_value v;
		CHECK_MSG(gpured_reduce(g, op, dt, seg, len, &v) == 0, "%s", gpured_errmsg(g));
		memcpy(ret, &v.v, 8);
		if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX)
			memcpy(ret + 8, &v.index, 8);
	}
}

/* Each of the nseg records against its segment reduced alone. */
static void check_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, const void *records,
			   const char *what)
{
	size_t rb = gpured_segment_record_bytes(op), esz = gpured_dtype_size(dt);
	/* integer sumsq adds in double in blocks that restart at chunks */
	double tol = op == GPURED_OP_SUMSQ && dt != GPURED_F32 && dt != GPURED_F64 ? 1e-12 : 0;
	uint8_t want[40];

	for (size_t i = 0; i < nseg; i++) {
		const uint8_t *got = (const uint8_t *)records + i * rb;

		segment_alone(g, op, dt, (const uint8_t *)data + offsets[i] * esz,
			      offsets[i + 1] - offsets[i], ddof, want);
		CHECK_MSG(same_record(op, dt, got, want, tol),
			  "%s: %s %s segment %zu [%llu, %llu) differs from the segment alone", what,
			  gpured_op_name(op), gpured_dtype_name(dt), i,
			  (unsigned long long)offsets[i], (unsigned long long)offsets[i + 1]);
	}
}

static void write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	CHECK(write(fd, p, len) == (ssize_t)len);
	close(fd);
}

/* The worked example and values computed by hand. */
static void segments_by_hand(gpured_t *g)
{
#define SEGS(op, dt, x, n, o, k, ddof, out)                                                    \
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_##op, GPURED_##dt, x, n, o, k, ddof, out,  \
					 sizeof(out)) == 0,                                      \
		  "%s", gpured_errmsg(g))
	int32_t x[5] = { 1, 2, 3, 4, 5 };
	uint64_t o[4] = { 0, 2, 2, 5 }, o026[3] = { 0, 2, 6 }, o002[3] = { 0, 0, 2 };
	uint64_t o022[3] = { 0, 2, 2 }, o033[3] = { 0, 3, 3 }, zeros[4] = { 0 };
	gpured_number s[3];

	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_SUM), 8);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_SUMSQ), 8);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_ARGMAX), 16);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_MOMENTS), 40);
	CHECK_EQ(gpured_segment_record_bytes((gpured_op)99), 0);
	SEGS(SUM, I32, x, 5, o, 3, 0, s);
	CHECK(s[0].i == 3 && s[1].i == 0 && s[2].i == 12);

	double f[6] = { 2.5, -1.0, 4.0, -1.0, 9.0, 9.0 };
	uint64_t fo[4] = { 0, 3, 3, 6 };
	gpured_arg_record a[3];
	gpured_moments_record m[3];
	SEGS(SUM, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 5.5 && s[1].f == 0.0 && !signbit(s[1].f) && s[2].f == 17.0);
	SEGS(SUMSQ, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 23.25 && s[1].f == 0.0 && s[2].f == 163.0);
	SEGS(MIN, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == -1.0 && s[1].f == INFINITY && s[2].f == -1.0);
	SEGS(MAX, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 4.0 && s[1].f == -INFINITY && s[2].f == 9.0);
	SEGS(ARGMIN, F64, f, 6, fo, 3, 0, a);
	CHECK(a[0].value.f == -1.0 && a[0].index == 1 && a[1].value.f == INFINITY &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX && a[2].value.f == -1.0 && a[2].index == 0);
	SEGS(ARGMAX, F64, f, 6, fo, 3, 0, a);
	CHECK(a[0].value.f == 4.0 && a[0].index == 2 && a[1].value.f == -INFINITY &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX && a[2].value.f == 9.0 && a[2].index == 1);
	/* S1 = 5.5, S2 = 23.25: var = (23.25 - 5.5^2 / 3) / 2 = 39.5 / 6;
	 * S1 = 17, S2 = 163: var = (163 - 17^2 / 3) / 2 = 200 / 6 */
	SEGS(MOMENTS, F64, f, 6, fo, 3, 1, m);
	CHECK(m[0].sum.f == 5.5 && m[0].min.f == -1.0 && m[0].max.f == 4.0 &&
	      m[0].mean == 5.5 / 3 && m[0].var == 39.5 / 6);
	CHECK(m[1].sum.f == 0.0 && m[1].min.f == INFINITY && m[1].max.f == -INFINITY &&
	      isnan(m[1].mean) && isnan(m[1].var));
	CHECK(m[2].sum.f == 17.0 && m[2].min.f == -1.0 && m[2].max.f == 9.0 &&
	      m[2].mean == 17.0 / 3 && m[2].var == 200.0 / 6);
	/* ddof 2: a segment of two elements or fewer has no variance; {4, -1,
	 * 9, 9}: (179 - 21^2 / 4) / 2 */
	SEGS(MOMENTS, F64, f, 6, o026, 2, 2, m);
	CHECK(m[0].mean == 0.75 && isnan(m[0].var) && m[1].mean == 5.25 && m[1].var == 34.375);

	/* Integer identities, of the result's kind */
	uint32_t u[2] = { 5, 7 };
	SEGS(MIN, U32, u, 2, o002, 2, 0, s);
	CHECK(s[0].u == UINT32_MAX && s[1].u == 5);
	SEGS(MAX, U32, u, 2, o022, 2, 0, s);
	CHECK(s[0].u == 7 && s[1].u == 0);
	int64_t i64[3] = { -4, 3, -9 };
	SEGS(ARGMIN, I64, i64, 3, o033, 2, 0, a);
	CHECK(a[0].value.i == -9 && a[0].index == 2 && a[1].value.i == INT64_MAX &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX);
	/* no elements at all, in one segment or three */
	SEGS(SUM, I64, NULL, 0, zeros, 1, 0, s);
	CHECK(s[0].i == 0);
	SEGS(MOMENTS, I32, NULL, 0, zeros, 3, 0, m);
	CHECK(m[2].sum.i == 0 && m[2].min.i == INT32_MAX && m[2].max.i == INT32_MIN &&
	      isnan(m[2].mean) && isnan(m[2].var));
	/* records may be dropped */
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 5, o, 3, 0, NULL, 0), 0);
#undef SEGS
}

/* Every op and dtype on random segments, some empty, some longer than
 * the daemon's chunks, against each segment reduced alone. */
static void segments_random(gpured_t *g, rng *r)
{
	enum { K = 40 };
	uint64_t o[K + 1];

	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);

		o[0] = 0;
		for (size_t i = 0; i < K; i++) {
			size_t len = rng_next(r) % 10 == 0 ? 0 : (size_t)(rng_next(r) % 3000);

			if (i == 0 || i == 7 || i == 8 || i == K - 1)
				len = 0;
			if (i == 11)
				len = 262144 / esz + 3; /* past a chunk */
			if (i == 20)
				len = 2 * 262144 / esz + 1;
			o[i + 1] = o[i] + len;
		}
		size_t n = o[K];
		void *data = random_array(r, (gpured_dtype)dt, n);
		static uint8_t rec[K * 40];

		for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
			uint64_t ddof = op == GPURED_OP_MOMENTS ? 1 : 0;
			char what[64];

			snprintf(what, sizeof(what), "random n=%zu", n);
			memset(rec, 0xa5, sizeof(rec));
			CHECK_MSG(gpured_reduce_segments(g, (gpured_op)op, (gpured_dtype)dt, data, n, o,
							 K, ddof, rec, sizeof(rec)) == 0,
				  "%s: %s", what, gpured_errmsg(g));
			check_segments(g, (gpured_op)op, (gpured_dtype)dt, data, o, K, ddof, rec, what);
		}
		free(data);
	}
}

/* Errors: the library's own, before anything is sent; the daemon's, with
 * its message; and the connection goes on after each. */
static void segments_errors(gpured_t *g)
{
	int32_t x[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	gpured_number s[4];
	gpured_value v;
	uint32_t id, id2;

	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0 }, 0, 0,
					s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "nseg >= 1") && !gpured_errcode(g), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 1, 10 }, 1,
					0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "offsets[0] is 1"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0, 4, 9 }, 2,
					0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "offsets[2] is 9") && strstr(gpured_errmsg(g), "10 elements"),
		  "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0, 10 }, 1,
					1, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "ddof"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_ARGMIN, GPURED_I32, x, 10, (uint64_t[]){ 0, 5, 10 },
					2, 0, s, 31), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "32 bytes"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_region_segments(g, 1, GPURED_OP_SUM, GPURED_I32, 0, 10,
					       (uint64_t[]){ 0, 11 }, 1, 0, s, sizeof(s)), -EINVAL);
	CHECK_EQ(gpured_outstanding(g), 0);

	/* The daemon's, with its code and message */
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10,
					(uint64_t[]){ 0, 5, 4, 10 }, 3, 0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(gpured_errcode(g) && strcmp(gpured_errcode(g), "invalid_params") == 0 &&
		  strstr(gpured_errmsg(g), "must not decrease"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_MOMENTS, GPURED_I32, x, 10, (uint64_t[]){ 0, 10 },
					1, 10, NULL, 0), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "'ddof' is 10"), "%s", gpured_errmsg(g));
	size_t big = ((size_t)1 << 21) + 1;
	uint64_t *zeros = calloc(big + 1, sizeof(*zeros));
	CHECK(zeros);
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, NULL, 0, zeros, big, 0, NULL, 0),
		 -E2BIG);
	CHECK_MSG(strcmp(gpured_errcode(g), "too_large") == 0 &&
		  strstr(gpured_errmsg(g), "over the limit of 2097152"), "%s", gpured_errmsg(g));
	free(zeros);
	gpured_region_t *rg;
	CHECK_EQ(gpured_region_new(g, 40, &rg), 0);
	CHECK_EQ(gpured_region_reduce_segments(g, rg, GPURED_OP_SUM, GPURED_I32, 4, 10,
					       (uint64_t[]){ 0, 10 }, 1, 0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "past the end"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_free(g, rg), 0);
	CHECK_EQ(gpured_ping(g), 0);

	/* Collecting: only segmented requests, only into room enough */
	CHECK_EQ(gpured_wait_id_segments(g, 4242, s, sizeof(s)), -ESRCH);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I32, x, 10, &id), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id, s, sizeof(s)), -EINVAL);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10,
					(uint64_t[]){ 0, 3, 6, 10 }, 3, 0, &id2), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id2, s, 16), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "24 bytes"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_outstanding(g), 2);
	CHECK_EQ(gpured_wait_id(g, id, &v), 0);
	CHECK(v.v.i == 45);
	CHECK_EQ(gpured_wait_id_segments(g, id2, s, sizeof(s)), 0);
	CHECK(s[0].i == 3 && s[1].i == 12 && s[2].i == 30);
	/* gpured_wait() takes them too, without the records */
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_MAX, GPURED_U32, x, 10,
					(uint64_t[]){ 0, 3, 10 }, 2, 0, &id), 0);
	CHECK_EQ(gpured_wait(g, &id2, &v), 0);
	CHECK(id2 == id && v.count == 10 && v.kind == GPURED_KIND_U64);
	CHECK_EQ(gpured_outstanding(g), 0);
}

/* Several segmented requests in flight, with plain ones between them,
 * collected out of order, each equal to the same request alone. */
static void segments_pipelined(gpured_t *g, rng *r)
{
	enum { N = 12, K = 25 };
	struct {
		gpured_op op;
		gpured_dtype dt;
		uint32_t id, plain_id;
		void *data;
		size_t n;
		uint64_t o[K + 1];
	} q[N];
	static uint8_t got[K * 40], want[K * 40];

	for (int i = 0; i < N; i++) {
		q[i].op = (gpured_op)(i % 7);
		q[i].dt = (gpured_dtype)(rng_next(r) % 6);
		q[i].o[0] = 0;
		for (int k = 0; k < K; k++)
			q[i].o[k + 1] = q[i].o[k] + (k % 5 == 3 ? 0 : rng_next(r) % (i % 4 == 0 ? 40000 : 500));
		q[i].n = q[i].o[K];
		q[i].data = random_array(r, q[i].dt, q[i].n);
		CHECK_EQ(gpured_submit_segments(g, q[i].op, q[i].dt, q[i].data, q[i].n, q[i].o, K,
						 0, &q[i].id), 0);
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, q[i].dt, q[i].data, q[i].n, &q[i].plain_id), 0);
	}
	CHECK_EQ(gpured_outstanding(g), 2 * N);
	for (int i = N - 1; i >= 0; i--) {
		size_t bytes = K * gpured_segment_record_bytes(q[i].op);
		gpured_value v;

		CHECK_MSG(gpured_wait_id_segments(g, q[i].id, got, sizeof(got)) == 0, "%s",
			  gpured_errmsg(g));
		CHECK_EQ(gpured_wait_id(g, q[i].plain_id, &v), 0);
		CHECK(v.count == q[i].n);
		CHECK_EQ(gpured_reduce_segments(g, q[i].op, q[i].dt, q[i].data, q[i].n, q[i].o, K, 0,
						want, sizeof(want)), 0);
		CHECK_MSG(memcmp(got, want, bytes) == 0, "pipelined %d: %s %s differs from alone", i,
			  gpured_op_name(q[i].op), gpured_dtype_name(q[i].dt));
		free(q[i].data);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
}

/* In a region at odd offsets: the same bytes as over the socket. */
static void segments_regions(gpured_t *g, rng *r)
{
	enum { K = 30 };
	static const gpured_dtype dts[] = { GPURED_I32, GPURED_U64, GPURED_F32, GPURED_F64 };
	static uint8_t a[K * 40], b[K * 40];
	uint64_t o[K + 1] = { 0 };
	gpured_region_t *rg;
	uint32_t ids[7];

	for (int k = 0; k < K; k++)
		o[k + 1] = o[k] + (k % 6 == 2 ? 0 : rng_next(r) % 9000);
	size_t n = o[K];
	CHECK_EQ(gpured_region_new(g, n * 8 + 64, &rg), 0);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		size_t off = 3 * d + 5;
		void *data = random_array(r, dts[d], n);

		memcpy((uint8_t *)gpured_region_data(rg) + off, data, n * gpured_dtype_size(dts[d]));
		for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
			size_t bytes = K * gpured_segment_record_bytes((gpured_op)op);

			CHECK_MSG(gpured_region_reduce_segments(g, rg, (gpured_op)op, dts[d], off, n, o, K,
								0, a, sizeof(a)) == 0,
				  "%s", gpured_errmsg(g));
			CHECK_EQ(gpured_reduce_segments(g, (gpured_op)op, dts[d], data, n, o, K, 0, b,
							sizeof(b)), 0);
			CHECK_MSG(memcmp(a, b, bytes) == 0, "region %s %s @%zu differs from the socket",
				  gpured_op_name((gpured_op)op), gpured_dtype_name(dts[d]), off);
			if (dts[d] == GPURED_F64)
				check_segments(g, (gpured_op)op, dts[d], data, o, K, 0, a, "region");
		}
		/* pipelined, by id and by the region object */
		for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
			CHECK_EQ(op % 2 ? gpured_region_submit_segments(g, rg, (gpured_op)op, dts[d], off,
									  n, o, K, 0, &ids[op])
					: gpured_submit_region_segments(g, gpured_region_id(rg), (gpured_op)op,
									dts[d], off, n, o, K, 0, &ids[op]),
				 0);
		for (int op = GPURED_OP_MOMENTS; op >= 0; op--) {
			CHECK_EQ(gpured_wait_id_segments(g, ids[op], a, sizeof(a)), 0);
			CHECK_EQ(gpured_reduce_segments(g, (gpured_op)op, dts[d], data, n, o, K, 0, b,
							sizeof(b)), 0);
			CHECK(memcmp(a, b, K * gpured_segment_record_bytes((gpured_op)op)) == 0);
		}
		free(data);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
	CHECK_EQ(gpured_region_free(g, rg), 0);
}

/* As many segments as the daemon takes: replies far larger than any
 * other (16 MiB of max records, 80 MiB of moments). */
static void segments_many(gpured_t *g, rng *r)
{
	size_t k = (size_t)1 << 21;
	uint64_t *o = malloc((k + 1) * sizeof(*o));
	int64_t *mx = malloc(k * sizeof(*mx));
	gpured_moments_record *m = malloc(k * sizeof(*m));

	CHECK(o && mx && m);
	o[0] = 0;
	for (size_t i = 0; i < k; i++)
		o[i + 1] = o[i] + rng_next(r) % 4;
	size_t n = o[k];
	int32_t *x = malloc(n * sizeof(*x));
	CHECK(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (int32_t)(rng_next(r) % 2001) - 1000;
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_MAX, GPURED_I32, x, n, o, k, 0, mx,
					 k * sizeof(*mx)) == 0, "%s", gpured_errmsg(g));
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_MOMENTS, GPURED_I32, x, n, o, k, 0, m,
					 k * sizeof(*m)) == 0, "%s", gpured_errmsg(g));
	for (size_t i = 0; i < k; i++) {
		int64_t want = INT32_MIN, sum = 0;

		for (uint64_t j = o[i]; j < o[i + 1]; j++) {
			want = x[j] > want ? x[j] : want;
			sum += x[j];
		}
		CHECK_MSG(mx[i] == want && m[i].max.i == want && m[i].sum.i == sum,
			  "segment %zu: max %lld, moments' max %lld and sum %lld; want %lld and %lld", i,
			  (long long)mx[i], (long long)m[i].max.i, (long long)m[i].sum.i,
			  (long long)want, (long long)sum);
	}
	free(x);
	free(m);
	free(mx);
	free(o);
}

/* gpuredctl --rows and --offsets */
static void segments_ctl(void)
{
	char *out = NULL, *err = NULL, opath[160], a1[192];
	const char *sock = the_daemon.sock;
	int rc;

	snprintf(opath, sizeof(opath), "%s/offsets", the_daemon.dir);
	snprintf(a1, sizeof(a1), "%s", opath);
	write_file(opath, (uint64_t[]){ 0, 2, 2, 5 }, 32);

	rc = CTL("1 2 3 4 5", sock, "sum", "-t", "i32", "--rows", "2");
	CHECK_MSG(rc == 0 && strcmp(out, "3\n7\n5\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("1 2 3 4 5 6", sock, "moments", "--rows", "3", "--ddof", "1");
	CHECK_MSG(rc == 0 && strcmp(out, "3 6 1 3 2 1\n3 15 4 6 5 1\n") == 0, "rc %d out '%s' err '%s'",
		  rc, out, err);
	rc = CTL("1.5 -2 7", sock, "--json", "sumsq", "--rows", "2");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":6.25,\"count\":2}\n{\"value\":49,\"count\":1}\n") == 0,
		  "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("", sock, "sum", "--rows", "4");
	CHECK_MSG(rc == 0 && strcmp(out, "") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	{
		const char *a[] = { "argmin", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "5 4 3 2 1", 9, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "4 1\ninf -1\n1 2\n") == 0, "rc %d out '%s' err '%s'", rc,
			  out, err);
	}
	{
		const char *a[] = { "--json", "argmax", "-t", "u32", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "5 4 3 2 1", 9, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":5,\"index\":0,\"count\":2}\n"
					 "{\"value\":0,\"index\":null,\"count\":0}\n"
					 "{\"value\":3,\"index\":0,\"count\":3}\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	{
		/* packed input, through a region */
		int64_t raw[5] = { -1, 2, -3, 4, -5 };
		const char *a[] = { "min", "--raw", "-t", "i64", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "-1\n9223372036854775807\n-5\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	{
		const char *a[] = { "moments", "-t", "f64", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "1 3 0.5 0.5 2", 13, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "2 4 1 3 2 1\n0 0 inf -inf nan nan\n3 3 0.5 2 1 0.5\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}

	/* Bad offsets are the input's errors (exit 2), told before sending */
	{
		const char *a[] = { "sum", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "the last offset is 5, not the 4 elements"), "rc %d err '%s'",
			  rc, err);
		write_file(opath, (uint64_t[]){ 0, 3, 2, 4 }, 32);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "offset 2 is 2, below"), "rc %d err '%s'", rc, err);
		write_file(opath, (uint64_t[]){ 0, 4 }, 12);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "12 bytes"), "rc %d err '%s'", rc, err);
		unlink(opath);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "cannot open"), "rc %d err '%s'", rc, err);
	}
	rc = CTL("1 2", sock, "sum", "--rows", "0");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--rows", "-1");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--rows", "1", "--offsets", "/nonexistent");
	CHECK_MSG(rc == 2 && strstr(err, "exclude"), "rc %d err '%s'", rc, err);
	rc = CTL("", sock, "ping", "--rows", "2");
	CHECK_MSG(rc == 2 && strstr(err, "reductions only"), "rc %d err '%s'", rc, err);
	/* the daemon's errors (exit 1) */
	rc = CTL("1 2 3", sock, "moments", "--rows", "2", "--ddof", "3");
	CHECK_MSG(rc == 1 && strstr(err, "ddof") && strstr(err, "invalid_params"), "rc %d err '%s'", rc,
		  err);
	free(out);
	free(err);
}

static void test_segments(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", NULL };
	rng r = { 0x5e65e65e };
	gpured_t *g;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	segments_by_hand(g);
	segments_random(g, &r);
	segments_errors(g);
	segments_pipelined(g, &r);
	segments_regions(g, &r);
	segments_many(g, &r);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	segments_ctl();
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

int main(int argc, char **argv)
{
	static const daemon_scenario scenarios[] = {
		{ "segments", test_segments },
	};

	return daemon_harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
