/*
 * The real daemon, driven the way a user drives it: started on a temporary
 * socket with the CPU backend, then used through libgpured and gpuredctl
 * (the harness: daemon-harness.h).
 *
 *   test-client-daemon SCENARIO GPURED GPUREDCTL
 *
 * Scenarios: reduce (every op x dtype x size against a reference computed
 * here), chunks (sizes around the chunk and staging boundaries of a daemon
 * with small ones), pipeline (hundreds in flight, collected out of order),
 * regions (shared-memory regions through the library), connections
 * (many clients at once), ctl (gpuredctl), sigterm (a request in flight is
 * answered, then the daemon exits 0 and removes its socket), spin (a client
 * that spins for its replies, gpured_set_spin()). Segmented
 * reduces have a test of their own: test-client-segments.c.
 *
 * Here: the references and the scenarios of results (reduce, chunks,
 * regions, pipeline); the daemon among its clients and its signals
 * (spin, connections, ctl, sigterm) is client-daemon-clients.c's.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/test-client-daemon.h"

/* ---- references ------------------------------------------------------ */

static long double element(gpured_dtype dt, const void *data, size_t i)
{
	const uint8_t *p = data;

	switch (dt) {
	case GPURED_I32: { int32_t v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_I64: { int64_t v; memcpy(&v, p + i * 8, 8); return (long double)v; }
	case GPURED_U32: { uint32_t v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_U64: { uint64_t v; memcpy(&v, p + i * 8, 8); return (long double)v; }
	case GPURED_F32: { float v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_F64: { double v; memcpy(&v, p + i * 8, 8); return v; }
	/* the narrow dtypes have a test of their own: test-client-dtypes.c */
	case GPURED_F16:
	case GPURED_BF16:
	case GPURED_F8E4M3:
	case GPURED_F8E5M2:
	case GPURED_I8:
	case GPURED_U8:
	case GPURED_I16:
	case GPURED_U16:
		break;
	}
	CHECK_MSG(false, "element of %s: not a dtype of this test", gpured_dtype_name(dt));
	return 0;
}

expect reference(gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	expect e = { .v.kind = gpured_result_kind(op, dt), .v.count = n };
	bool is_float = dt == GPURED_F32 || dt == GPURED_F64;
	long double sum = 0, sumabs = 0, sumsq = 0, mn = 0, mx = 0;
	int64_t isum = 0, imn = INT64_MAX, imx = INT64_MIN;
	uint64_t usum = 0, umn = UINT64_MAX, umx = 0;
	size_t imin = 0, imax = 0; /* first indexes of mn and mx */

	for (size_t i = 0; i < n; i++) {
		long double x = element(dt, data, i);

		sum += x;
		sumabs += fabsl(x);
		sumsq += x * x;
		if (i == 0 || x < mn) {
			mn = x;
			imin = i;
		}
		if (i == 0 || x > mx) {
			mx = x;
			imax = i;
		}
		if (dt == GPURED_I32 || dt == GPURED_I64) {
			int64_t v = (int64_t)x;

			isum += v;
			imn = v < imn ? v : imn;
			imx = v > imx ? v : imx;
		} else if (dt == GPURED_U32 || dt == GPURED_U64) {
			uint64_t v = (uint64_t)x;

			usum += v;
			umn = v < umn ? v : umn;
			umx = v > umx ? v : umx;
		}
	}
	if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX) {
		e.v.index = op == GPURED_OP_ARGMIN ? imin : imax;
		op = op == GPURED_OP_ARGMIN ? GPURED_OP_MIN : GPURED_OP_MAX;
	}
	/* gpured_reduce() gives moments' sum; it has none of no elements */
	if (op == GPURED_OP_MOMENTS)
		op = n == 0 ? GPURED_OP_MIN : GPURED_OP_SUM;
	if ((op == GPURED_OP_MIN || op == GPURED_OP_MAX) && n == 0) {
		e.err = -ENODATA;
		return e;
	}
	switch (op) {
	case GPURED_OP_SUM:
		if (is_float) {
			e.v.v.f = (double)sum;
			/* Float32 pairwise rounding at worst; a double sum is
			 * far closer. */
			e.tol = (dt == GPURED_F32 ? 1e-6 : 1e-10) * (double)sumabs + 1e-300;
		} else if (e.v.kind == GPURED_KIND_I64) {
			e.v.v.i = isum;
		} else {
			e.v.v.u = usum;
		}
		break;
	case GPURED_OP_SUMSQ:
		e.v.v.f = (double)sumsq;
		e.tol = (dt == GPURED_F32 ? 1e-6 : 1e-10) * (double)sumsq + 1e-300;
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
		if (is_float)
			e.v.v.f = (double)(op == GPURED_OP_MIN ? mn : mx);
		else if (e.v.kind == GPURED_KIND_I64)
			e.v.v.i = op == GPURED_OP_MIN ? imn : imx;
		else
			e.v.v.u = op == GPURED_OP_MIN ? umn : umx;
		break;
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX:
	case GPURED_OP_MOMENTS:
		break; /* made min, max and sum above */
	}
	return e;
}

void check_result(const char *what, const expect *e, int r, const gpured_value *v,
		  gpured_t *g)
{
	if (e->err) {
		CHECK_MSG(r == e->err, "%s: got %d (%s), want %d", what, r, gpured_errmsg(g), e->err);
		return;
	}
	CHECK_MSG(r == 0, "%s: error %d: %s", what, r, gpured_errmsg(g));
	CHECK_MSG(v->kind == e->v.kind, "%s: kind %d, want %d", what, v->kind, e->v.kind);
	CHECK_MSG(v->count == e->v.count, "%s: count %llu, want %llu", what,
		  (unsigned long long)v->count, (unsigned long long)e->v.count);
	CHECK_MSG(v->index == e->v.index, "%s: index %llu, want %llu", what,
		  (unsigned long long)v->index, (unsigned long long)e->v.index);
	switch (v->kind) {
	case GPURED_KIND_I64:
		CHECK_MSG(v->v.i == e->v.v.i, "%s: %lld, want %lld", what, (long long)v->v.i,
			  (long long)e->v.v.i);
		break;
	case GPURED_KIND_U64:
		CHECK_MSG(v->v.u == e->v.v.u, "%s: %llu, want %llu", what,
			  (unsigned long long)v->v.u, (unsigned long long)e->v.v.u);
		break;
	case GPURED_KIND_F64:
		CHECK_MSG(fabs(v->v.f - e->v.v.f) <= e->tol, "%s: %.17g, want %.17g (tolerance %g)",
			  what, v->v.f, e->v.v.f, e->tol);
		break;
	}
}

void reduce_and_check(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	expect e = reference(op, dt, data, n);
	gpured_value v;
	char what[96];
	int r;

	snprintf(what, sizeof(what), "%s %s n=%zu", gpured_op_name(op), gpured_dtype_name(dt), n);
	r = gpured_reduce(g, op, dt, data, n, &v);
	check_result(what, &e, r, &v, g);
	if (e.err == -ENODATA)
		CHECK_MSG(gpured_errcode(g) && strcmp(gpured_errcode(g), "empty") == 0, "%s: code %s",
			  what, gpured_errcode(g) ? gpured_errcode(g) : "(none)");
}

/* ---- scenarios ------------------------------------------------------- */

static void test_reduce(void)
{
	static const size_t sizes[] = { 0, 1, 2, 31, 32, 33, 1000, 65537, 1000003 };
	rng r = { 0x9e3779b97f4a7c15ull };
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_ping(g), 0);
	for (int dt = 0; dt < 6; dt++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);

			for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
				reduce_and_check(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
			free(data);
		}
	}

	/* The shorthands. */
	float xf[4] = { 1.5f, -2.0f, 4.25f, 0.25f };
	int64_t xi[3] = { INT64_MAX, -1, -5 };
	double d;
	int64_t i;
	CHECK_EQ(gpured_sum_f32(g, xf, 4, &d), 0);
	CHECK(d == 4.0);
	CHECK_EQ(gpured_sum_i64(g, xi, 3, &i), 0);
	CHECK(i == INT64_MAX - 6);
	/* Extremes of every integer type, min and max exact. */
	int32_t e32[3] = { INT32_MIN, 0, INT32_MAX };
	uint64_t e64[3] = { 0, UINT64_MAX, 1 };
	gpured_value v;
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, GPURED_I32, e32, 3, &v), 0);
	CHECK(v.kind == GPURED_KIND_I64 && v.v.i == INT32_MIN);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, GPURED_I32, e32, 3, &v), 0);
	CHECK(v.v.i == -1);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MAX, GPURED_U64, e64, 3, &v), 0);
	CHECK(v.kind == GPURED_KIND_U64 && v.v.u == UINT64_MAX);

	/* The server's counters moved. */
	gpured_stats_t st;
	CHECK_EQ(gpured_stats(g, &st), 0);
	CHECK_MSG(st.requests >= 6 * 9 * 4, "stats requests %llu", (unsigned long long)st.requests);
	CHECK(st.connections >= 1);
	/* min and max of nothing, for every dtype, were errors. */
	CHECK_MSG(st.errors >= 12, "stats errors %llu", (unsigned long long)st.errors);
	CHECK(st.elements >= 1000003);
	CHECK(st.devices >= 1 && st.devices_healthy == st.devices);
	CHECK_MSG(strstr(st.backend, test_backend()), "backend '%s'", st.backend);
	char *s = NULL;
	CHECK_EQ(gpured_info_json(g, &s), 0);
	CHECK_MSG(strstr(s, "\"version\"") && strstr(s, "\"devices\"") && strstr(s, "\"limits\""), "%s", s);
	free(s);

	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_chunks(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", "--staging-bytes", "2097152", NULL };
	rng r = { 12345 };
	gpured_t *g;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);
		size_t chunk = 262144 / esz, staging = 2097152 / esz;
		size_t sizes[] = {
			chunk - 1, chunk, chunk + 1, 2 * chunk + 1,
			staging - 1, staging, staging + 1, 3 * staging + 5,
		};

		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);

			for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
				reduce_and_check(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
			free(data);
		}
	}

	/* Several requests larger than staging in flight at once. */
	enum { N = 6 };
	size_t n = 3 * 2097152 / 8 + 7;
	void *data[N];
	expect want[N];
	uint32_t ids[N];
	for (int i = 0; i < N; i++) {
		data[i] = random_array(&r, GPURED_F64, n);
		want[i] = reference(GPURED_OP_SUM, GPURED_F64, data[i], n);
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_F64, data[i], n, &ids[i]), 0);
	}
	for (int i = N - 1; i >= 0; i--) {
		gpured_value v;
		int rc = gpured_wait_id(g, ids[i], &v);

		check_result("big in flight", &want[i], rc, &v, g);
		free(data[i]);
	}
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* moments of the same elements in place (region rg at off) and over the
 * socket: every field the same bits; sum, min and max those of the ops. */
static void check_moments(gpured_t *g, gpured_region_t *rg, gpured_dtype dt, const void *data,
			  size_t n, size_t off, const char *what)
{
	gpured_moments a, b;
	gpured_value v;
	uint64_t ddof = n > 1 ? 1 : 0;

	CHECK_MSG(gpured_region_reduce_moments(g, rg, dt, off, n, ddof, &a) == 0, "%s: %s", what,
		  gpured_errmsg(g));
	CHECK_MSG(gpured_reduce_moments(g, dt, data, n, ddof, &b) == 0, "%s: %s", what,
		  gpured_errmsg(g));
	CHECK_MSG(memcmp(&a.mean, &b.mean, sizeof(double)) == 0 &&
		  memcmp(&a.var, &b.var, sizeof(double)) == 0 && a.count == n && b.count == n,
		  "%s: moments in place and over the socket differ", what);
	const struct {
		gpured_op op;
		const gpured_value *got;
	} ops[] = { { GPURED_OP_SUM, &a.sum }, { GPURED_OP_MIN, &a.min }, { GPURED_OP_MAX, &a.max } };
	for (size_t i = 0; i < 3; i++) {
		CHECK_EQ(gpured_reduce(g, ops[i].op, dt, data, n, &v), 0);
		CHECK_MSG(v.kind == ops[i].got->kind && memcmp(&v.v, &ops[i].got->v, sizeof(v.v)) == 0 &&
			  ops[i].got->count == n,
			  "%s: moments' %s differs from the op's", what, gpured_op_name(ops[i].op));
	}
	/* the mean, by hand, as a sanity check of the field order */
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += dt == GPURED_F64 ? ((const double *)data)[i] : dt == GPURED_F32 ? ((const float *)data)[i]
		     : dt == GPURED_I32 ? ((const int32_t *)data)[i] : dt == GPURED_U32 ? ((const uint32_t *)data)[i]
		     : dt == GPURED_I64 ? (double)((const int64_t *)data)[i] : (double)((const uint64_t *)data)[i];
	CHECK_MSG(!isfinite(sum) || fabs(a.mean - sum / (double)n) <= 1e-6 * fabs(sum / (double)n) + 1e-300 ||
		  !(a.mean == a.mean), "%s: mean %g, about %g", what, a.mean, sum / (double)n);
}

/* Shared-memory regions through the library: every op and dtype at odd
 * sizes and offsets, equal bit for bit to the same elements sent as data;
 * pipelined; the errors; and many regions made and freed. */
static void test_regions(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", "--staging-bytes", "2097152", NULL };
	static const size_t sizes[] = { 1, 33, 65537, 300001 };
	rng r = { 4242 };
	gpured_t *g;
	gpured_region_t *rg;
	gpured_value a, b;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_region_new(g, 8 * 300001 + 64, &rg), 0);
	CHECK(gpured_region_size(rg) == 8 * 300001 + 64);
	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);
			size_t off = (k * 7 + (size_t)dt) % 17;
			memcpy((char *)gpured_region_data(rg) + off, data, sizes[k] * esz);
			for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
				expect e = reference((gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
				char what[96];
				snprintf(what, sizeof(what), "region %s %s n=%zu @%zu", gpured_op_name(op),
					 gpured_dtype_name(dt), sizes[k], off);
				int ra = gpured_region_reduce(g, rg, (gpured_op)op, (gpured_dtype)dt, off,
							      sizes[k], &a);
				check_result(what, &e, ra, &a, g);
				CHECK_EQ(gpured_reduce(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k], &b), 0);
				CHECK_MSG(memcmp(&a.v, &b.v, sizeof(a.v)) == 0 && a.count == b.count &&
					  a.index == b.index,
					  "%s: in place and over the socket differ", what);
			}
			char what[96];
			snprintf(what, sizeof(what), "moments %s n=%zu @%zu", gpured_dtype_name(dt),
				 sizes[k], off);
			check_moments(g, rg, (gpured_dtype)dt, data, sizes[k], off, what);
			free(data);
		}
	}

	/* Pipelined, collected out of order. */
	int32_t *x = gpured_region_data(rg);
	for (int i = 0; i < 1000; i++)
		x[i] = i;
	uint32_t ids[100];
	for (int i = 0; i < 100; i++)
		CHECK_EQ(gpured_region_submit(g, rg, GPURED_OP_SUM, GPURED_I32, 4 * (size_t)i, 10, &ids[i]), 0);
	for (int i = 99; i >= 0; i--) {
		CHECK_EQ(gpured_wait_id(g, ids[i], &a), 0);
		CHECK_MSG(a.v.i == 10 * i + 45, "pipelined %d: %lld", i, (long long)a.v.i);
	}

	/* moments pipelined: [i, i + 10) has mean i + 4.5, variance 55/6 (ddof 1) */
	for (int i = 0; i < 100; i++)
		CHECK_EQ(gpured_submit_region_moments(g, gpured_region_id(rg), GPURED_I32, 4 * (size_t)i,
						      10, 1, &ids[i]), 0);
	CHECK_EQ(gpured_wait_id_moments(g, 12345, NULL), -ESRCH);
	for (int i = 99; i >= 0; i--) {
		gpured_moments m;
		CHECK_EQ(gpured_wait_id_moments(g, ids[i], &m), 0);
		CHECK_MSG(m.mean == i + 4.5 && m.var == 55.0 / 6.0 && m.sum.v.i == 10 * i + 45 &&
			  m.min.v.i == i && m.max.v.i == i + 9 && m.count == 10,
			  "moments pipelined %d: %g %g", i, m.mean, m.var);
	}
	CHECK_EQ(gpured_region_reduce_moments(g, rg, GPURED_I32, 0, 10, 10, NULL), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "ddof"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_reduce_moments(g, rg, GPURED_I32, 0, 0, 0, NULL), -ENODATA);
	CHECK_EQ(gpured_reduce_moments(g, GPURED_I32, x, 0, 0, NULL), -ENODATA);
	CHECK_EQ(gpured_reduce_moments(g, GPURED_I32, x, 3, 3, NULL), -EINVAL);

	/* Errors leave the connection usable. */
	CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_SUM, GPURED_F64, 8, 300009, &a), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "past the end"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_region(g, gpured_region_id(rg) + 99, GPURED_OP_SUM, GPURED_I32, 0, 1, &a), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "unknown region"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_MIN, GPURED_I32, 0, 0, &a), -ENODATA);
	int pipefd[2];
	CHECK_EQ(pipe(pipefd), 0);
	uint64_t id;
	CHECK_EQ(gpured_map_fd(g, pipefd[0], 4096, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "a pipe"), "%s", gpured_errmsg(g));
	close(pipefd[0]);
	close(pipefd[1]);
	CHECK_EQ(gpured_ping(g), 0);

	/* A snapshot for monitors: the region, the devices, the histogram;
	 * what two of them differ by is what happened between them. */
	static gpured_snapshot_t s1, s2;
	CHECK_EQ(gpured_snapshot(g, &s1), 0);
	CHECK_EQ(s1.regions, 1);
	CHECK_EQ(s1.mapped_bytes, 8 * 300001 + 64);
	CHECK(s1.version[0] && s1.uptime_s > 0 && s1.requests > 0 && s1.errors >= 4);
	CHECK(s1.bytes_socket > 0 && s1.bytes_shm > 0 && s1.bytes_device == 0);
	CHECK(s1.ndevices >= 1 && strcmp(s1.devices[0].kind, "cpu") == 0 && s1.devices[0].healthy);
	CHECK(s1.devices[0].name[0] && s1.devices[0].jobs > 0 && s1.devices[0].regions == 0);
	CHECK(s1.nbuckets > 1 && s1.count > 0 && s1.sum_us > 0);
	for (unsigned i = 1; i < s1.nbuckets; i++)
		CHECK(s1.le_us[i] > s1.le_us[i - 1] && s1.counts[i] >= s1.counts[i - 1]);
	CHECK(s1.counts[s1.nbuckets - 1] <= s1.count);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_SUM, GPURED_I32, 0, 1000, &a), 0);
	CHECK_EQ(gpured_snapshot(g, &s2), 0);
	/* ten reductions, and the snapshot's own two requests */
	CHECK_EQ(s2.count - s1.count, 10);
	CHECK_EQ(s2.requests - s1.requests, 10 + 2);
	CHECK_EQ(s2.bytes_shm - s1.bytes_shm, 10 * 4000);
	CHECK_EQ(s2.devices[0].jobs - s1.devices[0].jobs, 10);
	CHECK(s2.uptime_s > s1.uptime_s);

	CHECK_EQ(gpured_region_free(g, rg), 0);
	CHECK_EQ(gpured_snapshot(g, &s2), 0);
	CHECK_EQ(s2.regions, 0);
	CHECK_EQ(s2.mapped_bytes, 0);
	CHECK_EQ(gpured_unmap(g, id + 1000), -EINVAL);

	/* Made and freed many times over, on one connection and on many. */
	for (int round = 0; round < 5; round++) {
		gpured_t *h = connect_or_die(&the_daemon);
		for (int i = 0; i < 20; i++) {
			CHECK_EQ(gpured_region_new(h, 4096, &rg), 0);
			memset(gpured_region_data(rg), 1, 4096);
			CHECK_EQ(gpured_region_reduce(h, rg, GPURED_OP_SUM, GPURED_U32, 0, 1024, &a), 0);
			CHECK(a.v.u == 1024ull * 0x01010101u);
			CHECK_EQ(gpured_region_free(h, rg), 0);
		}
		gpured_close(h);
	}
	gpured_stats_t st;
	CHECK_EQ(gpured_stats(g, &st), 0);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

typedef struct job {
	uint32_t id;
	expect want;
	bool collected;
} job;

static void test_pipeline(void)
{
	enum { N = 600 };
	rng r = { 777 };
	job *jobs = calloc(N, sizeof(*jobs));
	gpured_t *g;
	void *scratch;

	CHECK(jobs);
	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);

	/* The data buffer is reused at once: submit returns only when the
	 * request is written. */
	for (int i = 0; i < N; i++) {
		gpured_op op = (gpured_op)(rng_next(&r) % 4);
		gpured_dtype dt = (gpured_dtype)(rng_next(&r) % 6);
		size_t n = (size_t)(rng_next(&r) % 5000);

		if (i % 50 == 0)
			n = 200000 + (size_t)(rng_next(&r) % 1000);
		scratch = random_array(&r, dt, n);
		jobs[i].want = reference(op, dt, scratch, n);
		CHECK_EQ(gpured_submit(g, op, dt, scratch, n, &jobs[i].id), 0);
		memset(scratch, 0xa5, n * gpured_dtype_size(dt));
		free(scratch);
	}
	CHECK_EQ(gpured_outstanding(g), N);

	/* A third by id, newest first. */
	for (int i = N / 3 - 1; i >= 0; i--) {
		gpured_value v;
		int rc = gpured_wait_id(g, jobs[i].id, &v);

		check_result("pipelined by id", &jobs[i].want, rc, &v, g);
		jobs[i].collected = true;
	}
	/* The rest in whatever order they complete. */
	for (int k = N / 3; k < N; k++) {
		gpured_value v;
		uint32_t id;
		int rc = gpured_wait(g, &id, &v), i;

		CHECK_MSG(id != 0, "connection failed: %s", gpured_errmsg(g));
		for (i = 0; i < N && jobs[i].id != id; i++)
			;
		CHECK_MSG(i < N && !jobs[i].collected, "unexpected id %u", id);
		check_result("pipelined any order", &jobs[i].want, rc, &v, g);
		jobs[i].collected = true;
	}
	uint32_t id;
	gpured_value v;
	CHECK_EQ(gpured_wait(g, &id, &v), -ECHILD);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	free(jobs);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

int main(int argc, char **argv)
{
	static const daemon_scenario scenarios[] = {
		{ "reduce", test_reduce },
		{ "chunks", test_chunks },
		{ "pipeline", test_pipeline },
		{ "regions", test_regions },
		{ "connections", test_connections },
		{ "ctl", test_ctl },
		{ "sigterm", test_sigterm },
		{ "spin", test_spin },
	};

	return daemon_harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
