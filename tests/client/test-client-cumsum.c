/*
 * Prefix sums through libgpured and gpuredctl, against the real daemon
 * (CPU backend unless $GPURED_TEST_BACKEND says otherwise) and, for the
 * replies a daemon does not send, a scripted server.
 *
 *   test-client-cumsum SCENARIO GPURED GPUREDCTL
 *
 * Integers are checked exactly against a running 64-bit sum (wrapping
 * modulo 2^64), floats against a long double running sum within 1e-12 of
 * the running sum of magnitudes: the daemon's float order is its own
 * business (PROTOCOL.md defines it), not this test's.
 *
 * Scenarios: data (every dtype, sizes around the daemon's blocks and
 * chunks, specials), large (10 million elements, whose values stream back
 * while the elements still go out), pipeline (cumsums among other
 * requests, collected in any order), regions (writable out regions,
 * apart, shared with the input, in place), errors (what the library and
 * the daemon refuse, the handle usable after each), wire (malformed
 * replies end the connection), ctl (gpuredctl cumsum).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/cumsum-check.h"
#include "client/gpured.h"

const gpured_dtype all_dtypes[N_ALL_DTYPES] = { GPURED_I32, GPURED_I64, GPURED_U32,
					   GPURED_U64, GPURED_F32, GPURED_F64 };

/* The tiles of the float order (PROTOCOL.md, "cumsum") and the daemon's
 * default chunk: sizes around them. */
#define TILE 4096
#define CHUNK_BYTES (4u << 20)

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

bool contains(const char *s, const char *part)
{
	return s && strstr(s, part) != NULL;
}

/* ---- the daemon (daemon-harness.h) ----------------------------------- */

void start(void)
{
	daemon_start(&the_daemon, NULL);
}

/* SIGTERM: the daemon must exit 0. */
void stop(void)
{
	int status = daemon_stop(&the_daemon);

	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon status %d", status);
}

gpured_t *open_client(void)
{
	gpured_t *g = connect_or_die(&the_daemon);

	gpured_set_timeout(g, 60000);
	return g;
}

/* ---- data and the reference ------------------------------------------- */

static uint64_t seed = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	return check_rng(&seed);
}

/* n random elements of dt: integers over their whole range (so that 64-bit
 * sums wrap), floats of magnitudes 2^-20 to 2^20 of either sign; or, where
 * small, integers from -100 to 100 (0 to 200 unsigned), for floats sums a
 * double holds exactly. */
void *random_elements(gpured_dtype dt, size_t n, bool small)
{
	size_t esz = gpured_dtype_size(dt);
	uint8_t *p = malloc(n ? n * esz : 1);

	CHECK(p);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rnd();
		int64_t k = (int64_t)(x % 201) - (dt == GPURED_U32 || dt == GPURED_U64 ? 0 : 100);
		double f = small ? (double)k
				 : ldexp((double)(x >> 11) / 9007199254740992.0 - 0.5,
					 (int)(rnd() % 41) - 20);
		float f32 = (float)f;
		int32_t k32 = (int32_t)k;

		if (dt == GPURED_F32)
			memcpy(p + i * esz, &f32, 4);
		else if (dt == GPURED_F64)
			memcpy(p + i * esz, &f, 8);
		else if (small)
			memcpy(p + i * esz, esz == 4 ? (void *)&k32 : (void *)&k, esz);
		else
			memcpy(p + i * esz, &x, esz);
	}
	return p;
}

long double element(gpured_dtype dt, const void *data, size_t i)
{
	const uint8_t *p = (const uint8_t *)data + i * gpured_dtype_size(dt);

	switch (dt) {
	case GPURED_F32: { float v; memcpy(&v, p, 4); return v; }
	case GPURED_F64: { double v; memcpy(&v, p, 8); return v; }
	default: return 0;
	}
}

/* An integer element as the 64 bits it adds to a sum. */
uint64_t element_bits(gpured_dtype dt, const void *data, size_t i)
{
	const uint8_t *p = (const uint8_t *)data + i * gpured_dtype_size(dt);

	switch (dt) {
	case GPURED_I32: { int32_t v; memcpy(&v, p, 4); return (uint64_t)(int64_t)v; }
	case GPURED_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
	default: { uint64_t v; memcpy(&v, p, 8); return v; }
	}
}

/*
 * values (8 bytes each) against the prefix sums of data: integers exactly,
 * as a running 64-bit sum wraps; floats within 1e-12 of the running sum
 * of magnitudes of the long double running sum, specials as IEEE has them.
 */
void check_values(const char *what, gpured_dtype dt, const void *data, size_t n,
			 const void *values)
{
	const uint8_t *v = values;

	if (dt != GPURED_F32 && dt != GPURED_F64) {
		uint64_t s = 0;

		for (size_t i = 0; i < n; i++) {
			uint64_t got;

			s += element_bits(dt, data, i);
			memcpy(&got, v + 8 * i, 8);
			CHECK_MSG(got == s, "%s %s n=%zu: value %zu is %llu (%lld), not %llu (%lld)",
				  what, gpured_dtype_name(dt), n, i, (unsigned long long)got,
				  (long long)got, (unsigned long long)s, (long long)s);
		}
		return;
	}
	long double s = 0, m = 0;
	for (size_t i = 0; i < n; i++) {
		long double x = element(dt, data, i);
		double got;

		s += x;
		m += fabsl(x);
		memcpy(&got, v + 8 * i, 8);
		if (isnan(s) || isinf(s)) {
			CHECK_MSG(isnan(s) ? isnan(got) : got == (double)s,
				  "%s %s n=%zu: value %zu is %a, not %La", what, gpured_dtype_name(dt),
				  n, i, got, s);
			continue;
		}
		CHECK_MSG(fabsl((long double)got - s) <= 1e-12L * m,
			  "%s %s n=%zu: value %zu is %a, the prefix sum %La (error %Lg of %Lg)",
			  what, gpured_dtype_name(dt), n, i, got, s, fabsl((long double)got - s), m);
	}
}

void *values_buffer(size_t n)
{
	void *p = malloc(n ? n * 8 : 1);

	CHECK(p);
	memset(p, 0xa5, n ? n * 8 : 1);
	return p;
}

static void cumsum_and_check(gpured_t *g, gpured_dtype dt, const void *data, size_t n)
{
	void *out = values_buffer(n + 1);
	uint64_t guard;
	int r = gpured_cumsum(g, dt, data, n, out);

	CHECK_MSG(r == 0, "cumsum %s n=%zu: %s", gpured_dtype_name(dt), n, gpured_errmsg(g));
	check_values("cumsum", dt, data, n, out);
	memcpy(&guard, (uint8_t *)out + 8 * n, 8);
	CHECK_MSG(guard == 0xa5a5a5a5a5a5a5a5ull, "cumsum wrote past its n values");
	free(out);
}

/* ---- scenarios ------------------------------------------------------- */

static void test_data(void)
{
	gpured_t *g;

	start();
	g = open_client();
	for (size_t d = 0; d < sizeof(all_dtypes) / sizeof(all_dtypes[0]); d++) {
		gpured_dtype dt = all_dtypes[d];
		size_t esz = gpured_dtype_size(dt);
		const size_t sizes[] = { 0, 1, 2, 7, TILE - 1, TILE, TILE + 1, 11 * TILE + 5, 32769,
					 300001, CHUNK_BYTES / esz, CHUNK_BYTES / esz + 3 };

		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			for (int kind = 0; kind < 2; kind++) {
				void *x = random_elements(dt, sizes[k], kind == 1);

				cumsum_and_check(g, dt, x, sizes[k]);
				free(x);
			}
		}
		/* no data at all */
		CHECK_EQ(gpured_cumsum(g, dt, NULL, 0, NULL), 0);
	}

	/* integers that wrap, and i32 and u32 that must not */
	int64_t big[] = { INT64_MAX, 1, INT64_MIN, -1, INT64_MAX, INT64_MAX };
	uint64_t ubig[] = { UINT64_MAX, 2, 1ull << 63, 1ull << 63 };
	int32_t neg[] = { INT32_MIN, INT32_MIN, INT32_MIN };
	uint32_t upos[] = { UINT32_MAX, UINT32_MAX, UINT32_MAX };
	int64_t v[6];
	cumsum_and_check(g, GPURED_I64, big, 6);
	cumsum_and_check(g, GPURED_U64, ubig, 4);
	CHECK_EQ(gpured_cumsum(g, GPURED_I32, neg, 3, v), 0);
	CHECK(v[2] == 3 * (int64_t)INT32_MIN);
	CHECK_EQ(gpured_cumsum(g, GPURED_U32, upos, 3, v), 0);
	CHECK((uint64_t)v[2] == 3 * (uint64_t)UINT32_MAX);

	/* specials: NaN from there on; inf until -inf comes */
	double sp[] = { 1, INFINITY, 2, -INFINITY, 3 }, got[5];
	float nan1[] = { 1, NAN, 2 };
	CHECK_EQ(gpured_cumsum(g, GPURED_F64, sp, 5, got), 0);
	CHECK(got[0] == 1 && got[1] == INFINITY && got[2] == INFINITY && isnan(got[3]) &&
	      isnan(got[4]));
	CHECK_EQ(gpured_cumsum(g, GPURED_F32, nan1, 3, got), 0);
	CHECK(got[0] == 1 && isnan(got[1]) && isnan(got[2]));
	double negz[] = { -0.0, -0.0 };
	CHECK_EQ(gpured_cumsum(g, GPURED_F64, negz, 2, got), 0);
	CHECK(got[1] == 0 && signbit(got[1]));

	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	stop();
}

static void test_large(void)
{
	const size_t n = 10 * 1000 * 1000;
	gpured_t *g;

	start();
	g = open_client();
	/* 40 MB of i32 out, 80 MB of values back; then 80 MB each way */
	void *x = random_elements(GPURED_I32, n, false);
	cumsum_and_check(g, GPURED_I32, x, n);
	free(x);
	x = random_elements(GPURED_F64, n, false);
	cumsum_and_check(g, GPURED_F64, x, n);
	free(x);
	/* the connection goes on as before */
	int64_t s;
	CHECK_EQ(gpured_sum_i64(g, (int64_t[]){ 1, 2, 3 }, 3, &s), 0);
	CHECK_EQ(s, 6);
	gpured_close(g);
	stop();
}

static void test_pipeline(void)
{
	enum { K = 12 };
	void *xs[K];
	size_t ns[K];
	gpured_dtype dts[K];
	uint32_t ids[K], sum_id, big_id, drop_id;
	gpured_value val;
	gpured_t *g;

	start();
	g = open_client();
	for (int i = 0; i < K; i++) {
		dts[i] = all_dtypes[i % 6];
		/* some of one chunk, some of several (their values stream) */
		ns[i] = i % 3 == 0 ? 1500001 : (size_t)(rnd() % 5000);
		xs[i] = random_elements(dts[i], ns[i], i % 2 == 1);
		CHECK_EQ(gpured_submit_cumsum(g, dts[i], xs[i], ns[i], &ids[i]), 0);
		if (i == 5)
			CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, (int64_t[]){ 4, 5 }, 2,
					       &sum_id),
				 0);
	}
	void *big = random_elements(GPURED_F32, 1 << 20, false);
	CHECK_EQ(gpured_submit_cumsum(g, GPURED_F32, big, 1 << 20, &big_id), 0);
	CHECK_EQ(gpured_submit_cumsum(g, GPURED_I64, big, 1000, &drop_id), 0);
	CHECK_EQ(gpured_outstanding(g), K + 3);

	/* not a cumsum, too little room, unknown: refused, still outstanding */
	CHECK_EQ(gpured_wait_id_cumsum(g, sum_id, NULL, 0), -EINVAL);
	void *small = values_buffer(ns[0]);
	CHECK_EQ(gpured_wait_id_cumsum(g, ids[0], small, ns[0] - 1), -EINVAL);
	CHECK(contains(gpured_errmsg(g), "do not fit"));
	free(small);
	CHECK_EQ(gpured_wait_id_cumsum(g, 0xfffffff0u, NULL, 0), -ESRCH);
	CHECK_EQ(gpured_outstanding(g), K + 3);

	/* newest first */
	void *out = values_buffer(1 << 20);
	CHECK_EQ(gpured_wait_id_cumsum(g, big_id, out, 1 << 20), 0);
	check_values("pipelined", GPURED_F32, big, 1 << 20, out);
	free(out);
	for (int i = K - 1; i >= 0; i--) {
		out = values_buffer(ns[i]);
		CHECK_MSG(gpured_wait_id_cumsum(g, ids[i], out, ns[i]) == 0, "%s", gpured_errmsg(g));
		check_values("pipelined", dts[i], xs[i], ns[i], out);
		free(out);
		free(xs[i]);
	}
	/* gpured_wait() takes the rest: the sum, and a cumsum's count */
	for (int k = 0; k < 2; k++) {
		uint32_t id;

		CHECK_EQ(gpured_wait(g, &id, &val), 0);
		CHECK(id == sum_id || id == drop_id);
		if (id == sum_id)
			CHECK(val.kind == GPURED_KIND_I64 && val.v.i == 9);
		else
			CHECK(val.count == 1000);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
	/* values dropped by passing no array */
	CHECK_EQ(gpured_submit_cumsum(g, GPURED_U32, big, 10, &drop_id), 0);
	CHECK_EQ(gpured_wait_id_cumsum(g, drop_id, NULL, 0), 0);
	free(big);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	stop();
}

/* A writable region of bytes, filled with fill. */
gpured_region_t *writable(gpured_t *g, size_t bytes, int fill)
{
	gpured_region_t *r;

	CHECK_MSG(gpured_region_new_flags(g, bytes, GPURED_REGION_WRITABLE, &r) == 0, "%s",
		  gpured_errmsg(g));
	CHECK(gpured_region_writable(r) == 1);
	memset(gpured_region_data(r), fill, bytes);
	return r;
}

static bool all_bytes(const void *p, size_t n, int c)
{
	for (size_t i = 0; i < n; i++)
		if (((const uint8_t *)p)[i] != (uint8_t)c)
			return false;
	return true;
}

static void test_regions(void)
{
	gpured_t *g;

	start();
	g = open_client();
	for (size_t d = 0; d < sizeof(all_dtypes) / sizeof(all_dtypes[0]); d++) {
		gpured_dtype dt = all_dtypes[d];
		size_t esz = gpured_dtype_size(dt);
		const size_t sizes[] = { 1, 9 * TILE + 3, 300001 };

		for (size_t k = 0; k < 3; k++) {
			size_t n = sizes[k], off = 1 + rnd() % 15, outoff = 8 * (rnd() % 3);
			void *x = random_elements(dt, n, k % 2 == 1);
			gpured_region_t *in, *out, *both;
			uint8_t *o;

			/* a read-only input at an odd offset, into another region */
			CHECK_EQ(gpured_region_new(g, off + n * esz, &in), 0);
			CHECK(gpured_region_writable(in) == 0);
			memcpy((uint8_t *)gpured_region_data(in) + off, x, n * esz);
			out = writable(g, outoff + 8 * n + 16, 0xdd);
			CHECK_MSG(gpured_region_cumsum(g, in, dt, off, n, out, outoff) == 0, "%s",
				  gpured_errmsg(g));
			o = gpured_region_data(out);
			check_values("region", dt, x, n, o + outoff);
			CHECK(all_bytes(o, outoff, 0xdd) && all_bytes(o + outoff + 8 * n, 16, 0xdd));

			/* by ids, pipelined twice */
			uint32_t a, b;
			memset(o, 0xdd, outoff + 8 * n + 16);
			CHECK_EQ(gpured_submit_cumsum_region(g, gpured_region_id(in), dt, off, n,
							     gpured_region_id(out), outoff, &a),
				 0);
			CHECK_EQ(gpured_region_submit_cumsum(g, in, dt, off, n, out, outoff, &b), 0);
			CHECK_EQ(gpured_wait_id(g, b, NULL), 0);
			gpured_value v;
			CHECK_EQ(gpured_wait_id(g, a, &v), 0);
			CHECK(v.count == n);
			check_values("region by id", dt, x, n, o + outoff);

			/* one writable region for both: values first, elements after */
			size_t inoff = 8 * n + 8;
			both = writable(g, inoff + 3 + n * esz, 0xee);
			uint8_t *p = gpured_region_data(both);
			memcpy(p + inoff + 3, x, n * esz);
			CHECK_EQ(gpured_cumsum_region(g, gpured_region_id(both), dt, inoff + 3, n,
						      gpured_region_id(both), 0),
				 0);
			check_values("shared region", dt, x, n, p);
			CHECK(memcmp(p + inoff + 3, x, n * esz) == 0);
			CHECK(all_bytes(p + 8 * n, 11, 0xee));
			if (esz == 8) {
				/* in place, as numpy's cumsum(a, out=a) */
				memcpy(p + 16, x, n * 8);
				CHECK_EQ(gpured_region_cumsum(g, both, dt, 16, n, both, 16), 0);
				check_values("in place", dt, x, n, p + 16);
			}
			CHECK_EQ(gpured_region_free(g, both), 0);
			CHECK_EQ(gpured_region_free(g, out), 0);
			CHECK_EQ(gpured_region_free(g, in), 0);
			free(x);
		}
	}

	/* a memfd of our own, mapped writable by hand */
	int fd = memfd_create("cumsum-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	uint64_t id;
	CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && posix_fallocate(fd, 0, 4096) == 0 &&
	      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	int64_t *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK_EQ(gpured_map_fd_flags(g, fd, 4096, GPURED_REGION_WRITABLE, &id), 0);
	for (int i = 0; i < 256; i++)
		m[i] = i;
	CHECK_EQ(gpured_cumsum_region(g, id, GPURED_I64, 0, 256, id, 0), 0);
	CHECK(m[255] == 255 * 256 / 2 && m[3] == 6);
	CHECK_EQ(gpured_unmap(g, id), 0);
	munmap(m, 4096);
	close(fd);

	/* of no elements: nothing written, count 0 */
	gpured_region_t *r = writable(g, 64, 0x11);
	CHECK_EQ(gpured_region_cumsum(g, r, GPURED_F32, 64, 0, r, 64), 0);
	CHECK(all_bytes(gpured_region_data(r), 64, 0x11));
	CHECK_EQ(gpured_region_free(g, r), 0);
	gpured_close(g);
	stop();
}

/* r is err, with the daemon's code (NULL: the library's own refusal) and a
 * message that names part; the handle stays usable. */
static void check_refused(gpured_t *g, const char *what, int r, int err, const char *code,
			  const char *part)
{
	const char *got = gpured_errcode(g);

	CHECK_MSG(r == err, "%s: %d (%s)", what, r, gpured_errmsg(g));
	CHECK_MSG(code ? got && strcmp(got, code) == 0 : !got, "%s: code %s", what,
		  got ? got : "(none)");
	CHECK_MSG(contains(gpured_errmsg(g), part), "%s: message '%s'", what, gpured_errmsg(g));
	CHECK_EQ(gpured_ping(g), 0);
}

#define CHECK_REFUSED(g, call, err, code, part) check_refused(g, #call, (call), err, code, part)

static void test_errors(void)
{
	const size_t n = 1000;
	int32_t x[1000];
	int64_t out[1000];
	gpured_region_t *in, *ro, *w;
	uint32_t id;
	gpured_t *g;

	for (size_t i = 0; i < n; i++)
		x[i] = (int32_t)i;
	start();
	g = open_client();

	/* refused before anything is sent */
	CHECK_REFUSED(g, gpured_cumsum(g, (gpured_dtype)99, x, n, out), -EINVAL, NULL, "dtype");
	CHECK_REFUSED(g, gpured_cumsum(g, GPURED_I32, NULL, n, out), -EINVAL, NULL, "no data");
	CHECK_REFUSED(g, gpured_cumsum(g, GPURED_I32, x, n, NULL), -EINVAL, NULL, "no room");
	CHECK_REFUSED(g, gpured_cumsum(g, GPURED_I32, x, GPURED_CUMSUM_MAX + 1, out), -E2BIG,
		      NULL, "do not fit in one reply");
	CHECK_REFUSED(g, gpured_submit_cumsum(g, GPURED_U64, x, (size_t)1 << 40, &id), -E2BIG,
		      NULL, "a region takes any number");
	CHECK_REFUSED(g, gpured_region_new_flags(g, 64, 2, &w), -EINVAL, NULL, "unknown region flags");
	CHECK_EQ(gpured_outstanding(g), 0);

	CHECK_EQ(gpured_region_new(g, sizeof(x), &in), 0);
	memcpy(gpured_region_data(in), x, sizeof(x));
	CHECK_EQ(gpured_region_new(g, 8 * n, &ro), 0);
	w = writable(g, 8 * n + 8, 0);
	uint64_t iid = gpured_region_id(in), wid = gpured_region_id(w);

	/* a read-only out region: the library says so, and so does the daemon */
	CHECK_REFUSED(g, gpured_region_cumsum(g, in, GPURED_I32, 0, n, ro, 0), -EINVAL, NULL,
		      "GPURED_REGION_WRITABLE");
	CHECK_REFUSED(g, gpured_cumsum_region(g, iid, GPURED_I32, 0, n, gpured_region_id(ro), 0),
		      -EINVAL, "invalid_params", "read-only");
	/* the daemon's other refusals */
	CHECK_REFUSED(g, gpured_cumsum_region(g, iid, GPURED_I32, 0, n, wid, 16), -EINVAL,
		      "invalid_params", "too small");
	CHECK_REFUSED(g, gpured_region_cumsum(g, in, GPURED_I32, 0, n + 1, w, 0), -EINVAL,
		      "invalid_params", "reach past the end");
	CHECK_REFUSED(g, gpured_cumsum_region(g, iid, GPURED_I32, 0, n, wid, 4), -EINVAL,
		      "invalid_params", "multiple of 8");
	CHECK_REFUSED(g, gpured_cumsum_region(g, iid, GPURED_I32, 0, n, 999999, 0), -EINVAL,
		      "invalid_params", "unknown out_region");
	CHECK_REFUSED(g, gpured_region_cumsum(g, w, GPURED_I32, 0, n, w, 8), -EINVAL,
		      "invalid_params", "overlap");
	CHECK_REFUSED(g, gpured_region_cumsum(g, w, GPURED_F64, 8, n, w, 0), -EINVAL,
		      "invalid_params", "overlap");
	/* a region cumsum is collected by gpured_wait_id(), not as data */
	CHECK_EQ(gpured_region_submit_cumsum(g, in, GPURED_I32, 0, n, w, 0, &id), 0);
	CHECK_REFUSED(g, gpured_wait_id_cumsum(g, id, out, n), -EINVAL, NULL,
		      "not a cumsum of data");
	CHECK_EQ(gpured_wait_id(g, id, NULL), 0);
	check_values("after errors", GPURED_I32, x, n, gpured_region_data(w));

	/* writable, with a descriptor open for reading only */
	int fd = memfd_create("cumsum-ro", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	char path[64];
	uint64_t rid;
	CHECK(fd >= 0 && ftruncate(fd, 4096) == 0 && posix_fallocate(fd, 0, 4096) == 0 &&
	      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int rofd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(rofd >= 0);
	CHECK_REFUSED(g, gpured_map_fd_flags(g, rofd, 4096, GPURED_REGION_WRITABLE, &rid), -EINVAL,
		      "invalid_params", "reading only");
	CHECK_REFUSED(g, gpured_map_fd_flags(g, fd, 4096, 4, &rid), -EINVAL, NULL, "flags");
	close(rofd);
	close(fd);

	CHECK_EQ(gpured_region_free(g, w), 0);
	CHECK_EQ(gpured_region_free(g, ro), 0);
	CHECK_EQ(gpured_region_free(g, in), 0);
	gpured_close(g);
	stop();
}

int main(int argc, char **argv)
{
	static const daemon_scenario scenarios[] = {
		{ "data", test_data },	     { "large", test_large },	{ "pipeline", test_pipeline },
		{ "regions", test_regions }, { "errors", test_errors }, { "wire", test_wire },
		{ "ctl", test_ctl },
	};

	return daemon_harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
