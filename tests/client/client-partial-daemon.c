/*
 * test-client-partial daemon: the real daemon on random adversarial f32
 * and f64 arrays, each reduced whole and split at random points into
 * pieces reduced for partials (by data and by region, one by one and
 * pipelined) and combined in random order: the rounded combination must
 * equal the whole request bit for bit, and both a reference computed
 * here from an exact big-integer sum.
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/gpured.h"
#include "tests/check.h"
#include "tests/client/test-client-partial.h"

typedef struct daemon_proc {
	pid_t pid;
	char dir[64];
	char sock[96];
	char log[96];
} daemon_proc;

static daemon_proc the_daemon;

static void daemon_cleanup(void)
{
	if (the_daemon.pid > 0) {
		kill(the_daemon.pid, SIGKILL);
		waitpid(the_daemon.pid, NULL, 0);
		the_daemon.pid = 0;
	}
	if (the_daemon.dir[0]) {
		unlink(the_daemon.sock);
		unlink(the_daemon.log);
		rmdir(the_daemon.dir);
	}
}

static void daemon_start(daemon_proc *d, const char *gpured)
{
	const char *b = getenv("GPURED_TEST_BACKEND");

	snprintf(d->dir, sizeof(d->dir), "%s/gpured-partial-XXXXXX", tmp_base());
	CHECK(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/gpured.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/stderr.log", d->dir);
	d->pid = fork();
	CHECK(d->pid >= 0);
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(127);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		execl(gpured, gpured, "--socket", d->sock, "--backend", b && *b ? b : "cpu",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		gpured_t *g = NULL;
		int status;

		CHECK_MSG(waitpid(d->pid, &status, WNOHANG) == 0, "daemon exited (status %d); see %s",
			  status, d->log);
		if (gpured_connect(d->sock, &g) == 0) {
			gpured_close(g);
			return;
		}
		usleep(10000);
	}
	CHECK_MSG(false, "daemon did not accept on %s within 10 s", d->sock);
}

static uint64_t rnd(uint64_t *s)
{
	return check_rng(s);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/*
 * The reference: an exact sum on a grid of 72 words whose bit 0 weighs
 * 2^-2176 (terms are multiples of 2^-2148 below 2^2048, and there are
 * fewer than 2^30 of them), written out as a hexadecimal float and rounded
 * by strtod(), which glibc rounds correctly, to nearest, ties to even.
 */
#define RW 72
#define RBASE 2176

static void ref_add(uint64_t *a, unsigned __int128 m, int exp2, bool neg)
{
	int b = exp2 + RBASE;
	uint64_t x[4] = { 0 };

	CHECK(b >= 0 && b / 64 + 4 <= RW);
	unsigned s = (unsigned)b % 64, w = (unsigned)b / 64;
	x[0] = (uint64_t)(m << s);
	x[1] = (uint64_t)((m << s) >> 64);
	x[2] = s ? (uint64_t)(m >> (128 - s)) : 0;
	uint64_t c = 0;
	for (unsigned k = w; k < RW; k++) {
		uint64_t d = k - w < 4 ? x[k - w] : 0, o = a[k];

		if (!neg) {
			uint64_t t = o + d, c1 = t < o;
			a[k] = t + c;
			c = c1 | (a[k] < t);
		} else {
			uint64_t t = o - d, c1 = o < d;
			a[k] = t - c;
			c = c1 | (t < c);
		}
	}
}

/* A finite non-zero x as m x 2^e, m < 2^53 odd. */
static uint64_t decompose(double x, int *ret_e)
{
	int e;
	double f = frexp(fabs(x), &e); /* [0.5, 1) */
	uint64_t m = (uint64_t)ldexp(f, 53);

	e -= 53;
	while (!(m & 1)) {
		m >>= 1;
		e++;
	}
	*ret_e = e;
	return m;
}

static double reference(gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	uint64_t a[RW] = { 0 };
	bool nan = false, pinf = false, ninf = false, allneg0 = n > 0;

	for (size_t i = 0; i < n; i++) {
		double x;

		if (dt == GPURED_F32) {
			float f;
			memcpy(&f, (const uint8_t *)data + 4 * i, 4);
			x = f;
		} else {
			memcpy(&x, (const uint8_t *)data + 8 * i, 8);
		}
		if (isnan(x)) {
			nan = true;
			allneg0 = false;
		} else if (isinf(x)) {
			if (op == GPURED_OP_SUMSQ || x > 0)
				pinf = true;
			else
				ninf = true;
			allneg0 = false;
		} else {
			if (!(x == 0 && signbit(x)))
				allneg0 = false;
			if (x == 0)
				continue;
			int e;
			uint64_t m = decompose(x, &e);
			if (op == GPURED_OP_SUM)
				ref_add(a, m, e, x < 0);
			else
				ref_add(a, (unsigned __int128)m * m, 2 * e, false);
		}
	}
	if (nan || (pinf && ninf))
		return NAN;
	if (pinf)
		return INFINITY;
	if (ninf)
		return -INFINITY;

	bool neg = a[RW - 1] >> 63;
	if (neg) {
		uint64_t c = 1;
		for (unsigned k = 0; k < RW; k++) {
			a[k] = ~a[k] + c;
			c = c && a[k] == 0;
		}
	}
	int top = RW - 1;
	while (top >= 0 && !a[top])
		top--;
	if (top < 0)
		return op == GPURED_OP_SUM && allneg0 ? -0.0 : 0.0;
	char hex[RW * 16 + 32], *p = hex;
	p += sprintf(p, "%s0x%" PRIx64, neg ? "-" : "", a[top]);
	for (int k = top - 1; k >= 0; k--)
		p += sprintf(p, "%016" PRIx64, a[k]);
	sprintf(p, "p-%d", RBASE);
	return strtod(hex, NULL);
}

/* ---- adversarial arrays ---- */

enum {
	GEN_WIDE,      /* magnitudes across the whole exponent range */
	GEN_CANCEL,    /* x and -x pairs, and a few others */
	GEN_TIE,       /* an exact sum that is a rounding tie (or just off one) */
	GEN_NEGZERO,   /* -0 only (sometimes one +0) */
	GEN_INF,       /* +-inf among finite values */
	GEN_NAN,       /* a NaN among others */
	GEN_SUBNORMAL, /* subnormals and the least normals */
	GEN_HUGE,      /* near the largest value: intermediate overflow */
	GEN_RUNS,      /* runs of identical values */
	GEN_N,
};

static double wide(uint64_t *s, gpured_dtype dt)
{
	uint64_t r = rnd(s);

	if (dt == GPURED_F32) {
		uint32_t u = (uint32_t)(r & 0x807fffffu) | (uint32_t)below(s, 255) << 23;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = (r & 0x800fffffffffffffull) | below(s, 2047) << 52;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

static double subnormal(uint64_t *s, gpured_dtype dt)
{
	uint64_t r = rnd(s);

	if (dt == GPURED_F32) {
		uint32_t u = (uint32_t)(r & 0x807fffffu) | (uint32_t)below(s, 2) << 23;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = (r & 0x800fffffffffffffull) | below(s, 2) << 52;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* A random normal value of magnitude about 2^e. */
static double around(uint64_t *s, gpured_dtype dt, int e)
{
	double m = 1.0 + (double)(rnd(s) >> 11) * 0x1p-53;

	if (dt == GPURED_F32)
		return (float)ldexp(m, e);
	return ldexp(m, e);
}

static void shuffle(uint64_t *s, double *x, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = below(s, i);
		double t = x[i - 1];
		x[i - 1] = x[j];
		x[j] = t;
	}
}

/* n values of kind gen, as doubles representable in dt. */
static void generate(uint64_t *s, gpured_dtype dt, int gen, double *x, size_t n)
{
	bool f32 = dt == GPURED_F32;
	int emax = f32 ? 127 : 1023;
	size_t i = 0;

	switch (gen) {
	case GEN_WIDE:
		for (; i < n; i++)
			x[i] = below(s, 4) ? wide(s, dt) : around(s, dt, (int)below(s, 40) - 20);
		break;
	case GEN_CANCEL:
		for (; i + 1 < n; i += 2) {
			x[i] = below(s, 2) ? wide(s, dt) : around(s, dt, (int)below(s, 60) - 30);
			x[i + 1] = -x[i];
		}
		for (; i < n; i++)
			x[i] = around(s, dt, (int)below(s, 200) - 100);
		/* sometimes exactly zero */
		if (below(s, 3) == 0 && n % 2)
			x[n - 1] = 0.0;
		break;
	case GEN_TIE: {
		/* a + half an ulp of a (as a double) + pairs that cancel,
		 * and now and then a last bit that breaks the tie */
		int e = f32 ? (int)below(s, 100) - 50 : (int)below(s, 1800) - 900;
		double a = around(s, dt, e);
		if (below(s, 2))
			a = -a;
		if (n == 0)
			break;
		x[i++] = a;
		/* an f32 has a double's last bit even: one more element
		 * makes it odd, so that the tie rounds away from a */
		if (i < n && f32 && below(s, 2))
			x[i++] = copysign(ldexp(1.0, ilogb(a) - 52), a);
		if (i < n)
			x[i++] = (below(s, 2) ? 1 : -1) * ldexp(1.0, ilogb(a) - 53);
		if (i < n && below(s, 3) == 0)
			x[i++] = (below(s, 2) ? 1 : -1) * ldexp(1.0, ilogb(a) - (f32 ? 80 : 100));
		for (; i + 1 < n; i += 2) {
			x[i] = wide(s, dt);
			if (!isfinite(x[i]))
				x[i] = 1.0;
			x[i + 1] = -x[i];
		}
		for (; i < n; i++)
			x[i] = 0.0;
		break;
	}
	case GEN_NEGZERO:
		for (; i < n; i++)
			x[i] = -0.0;
		if (n && below(s, 4) == 0)
			x[below(s, n)] = 0.0;
		break;
	case GEN_INF:
		for (; i < n; i++)
			x[i] = wide(s, dt);
		for (unsigned k = 0, m = 1 + (unsigned)below(s, 3); n && k < m; k++)
			x[below(s, n)] = below(s, 2) ? INFINITY : -INFINITY;
		break;
	case GEN_NAN:
		for (; i < n; i++)
			x[i] = below(s, 8) ? wide(s, dt) : below(s, 2) ? INFINITY : -INFINITY;
		if (n)
			x[below(s, n)] = NAN;
		break;
	case GEN_SUBNORMAL:
		for (; i < n; i++)
			x[i] = subnormal(s, dt);
		break;
	case GEN_HUGE:
		/* (max/4, 1, -max/4, 2^-40) repeated, and values near the
		 * largest, mostly of one sign: finite or past the range */
		for (; i < n; i++) {
			switch (below(s, 5)) {
			case 0: x[i] = ldexp(1.0, emax - 1) * (i % 2 ? -1 : 1); break;
			case 1: x[i] = 1.0; break;
			case 2: x[i] = 0x1p-40; break;
			default:
				x[i] = (f32 ? (double)FLT_MAX : DBL_MAX) * (below(s, 6) ? 1 : -1);
				if (below(s, 2))
					x[i] = around(s, dt, emax - 1) * (below(s, 4) ? 1 : -1);
			}
		}
		break;
	case GEN_RUNS: {
		double v = wide(s, dt);
		for (; i < n; i++) {
			if (below(s, 50) == 0)
				v = below(s, 2) ? around(s, dt, (int)below(s, 20)) : wide(s, dt);
			x[i] = isfinite(v) ? v : 0.5;
		}
		break;
	}
	}
	if (gen != GEN_NEGZERO && gen != GEN_RUNS)
		shuffle(s, x, n);
}

static void store(gpured_dtype dt, const double *x, size_t n, void *out)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == GPURED_F32) {
			float f = (float)x[i];
			memcpy((uint8_t *)out + 4 * i, &f, 4);
		} else {
			memcpy((uint8_t *)out + 8 * i, &x[i], 8);
		}
	}
}

static bool partial_equal(const gpured_partial *a, const gpured_partial *b)
{
	return a->op == b->op && a->dtype == b->dtype && a->count == b->count &&
	       a->scale == b->scale && a->specials == b->specials && a->nlimbs == b->nlimbs &&
	       memcmp(a->limbs, b->limbs, sizeof(a->limbs)) == 0;
}

typedef struct counts {
	unsigned arrays, pieces, by_region, pipelined, ties, negzero, nan, inf, overflow;
} counts;

/*
 * One array: whole, and in pieces reduced for partials (by data or from
 * region rg at byte offset base, one by one or pipelined), combined in
 * random order.
 */
static void one_array(gpured_t *g, gpured_region_t *rg, uint64_t *s, gpured_op op,
		      gpured_dtype dt, const void *data, size_t n, counts *cnt, const char *what)
{
	size_t esz = gpured_dtype_size(dt);
	gpured_value whole;
	gpured_partial pw, acc, acc2, parts[20];
	size_t cuts[21];
	unsigned k = 1 + (unsigned)below(s, 20), mode = (unsigned)below(s, 4);
	size_t base = 0;
	int r;

	r = gpured_reduce(g, op, dt, data, n, &whole);
	CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
	double want = reference(op, dt, data, n);
	CHECK_MSG(same(whole.v.f, want), "%s n=%zu: daemon %a, exact reference %a", what, n,
		  whole.v.f, want);
	r = gpured_reduce_partial(g, op, dt, data, n, &pw);
	CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
	CHECK(pw.count == n && pw.op == op && pw.dtype == dt);

	/* k pieces: k - 1 cuts anywhere, empty pieces allowed */
	cuts[0] = 0;
	cuts[k] = n;
	for (unsigned i = 1; i < k; i++)
		cuts[i] = below(s, n + 1);
	for (unsigned i = 1; i < k; i++)
		for (unsigned j = i; j > 1 && cuts[j - 1] > cuts[j]; j--) {
			size_t t = cuts[j];
			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}

	if (rg && (mode & 1)) {
		base = below(s, 8);
		if (base + n * esz > gpured_region_size(rg))
			base = 0;
		CHECK(n * esz <= gpured_region_size(rg));
		if (n)
			memcpy((uint8_t *)gpured_region_data(rg) + base, data, n * esz);
		cnt->by_region++;
	}
	bool by_region = rg && (mode & 1), pipelined = mode & 2;
	if (pipelined) {
		uint32_t ids[20], extra = 0;

		for (unsigned i = 0; i < k; i++) {
			size_t m = cuts[i + 1] - cuts[i];

			if (by_region)
				r = gpured_region_submit_partial(g, rg, op, dt, base + cuts[i] * esz, m,
								 &ids[i]);
			else
				r = gpured_submit_partial(g, op, dt, (const uint8_t *)data + cuts[i] * esz,
							  m, &ids[i]);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
			/* a request without a partial in between, for gpured_wait() */
			if (i == k / 2)
				CHECK_EQ(gpured_submit(g, op, dt, data, n, &extra), 0);
		}
		/* collected in the order they come; the other one stays */
		bool got[20] = { false };
		for (unsigned i = 0; i < k; i++) {
			uint32_t id = 0;
			gpured_partial p;
			unsigned j;

			r = gpured_wait_partial(g, &id, &p);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
			for (j = 0; j < k && ids[j] != id; j++)
				;
			CHECK_MSG(j < k && !got[j], "%s: wait_partial gave id %u", what, id);
			got[j] = true;
			parts[j] = p;
		}
		uint32_t id = 0;
		CHECK_EQ(gpured_wait_partial(g, &id, &acc), -ECHILD);
		gpured_value v;
		CHECK_EQ(gpured_outstanding(g), 1);
		CHECK_EQ(gpured_wait(g, &id, &v), 0);
		CHECK(id == extra && same(v.v.f, whole.v.f));
		cnt->pipelined++;
	} else {
		for (unsigned i = 0; i < k; i++) {
			size_t m = cuts[i + 1] - cuts[i];

			if (by_region)
				r = gpured_region_reduce_partial(g, rg, op, dt, base + cuts[i] * esz, m,
								 &parts[i]);
			else
				r = gpured_reduce_partial(g, op, dt, (const uint8_t *)data + cuts[i] * esz,
							  m, &parts[i]);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
		}
	}
	for (unsigned i = 0; i < k; i++)
		CHECK(parts[i].count == cuts[i + 1] - cuts[i]);

	/* in a random order, and in the reverse of it */
	unsigned order[20];
	for (unsigned i = 0; i < k; i++)
		order[i] = i;
	for (unsigned i = k; i > 1; i--) {
		unsigned j = (unsigned)below(s, i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	CHECK_EQ(gpured_partial_init(&acc, op, dt), 0);
	CHECK_EQ(gpured_partial_init(&acc2, op, dt), 0);
	for (unsigned i = 0; i < k; i++) {
		CHECK_EQ(gpured_partial_combine(&acc, &parts[order[i]]), 0);
		CHECK_EQ(gpured_partial_combine(&acc2, &parts[order[k - 1 - i]]), 0);
	}
	double got;
	CHECK_EQ(gpured_partial_round(&acc, &got), 0);
	CHECK_MSG(same(got, whole.v.f), "%s n=%zu in %u pieces (mode %u): combined %a, whole %a",
		  what, n, k, mode, got, whole.v.f);
	CHECK_MSG(partial_equal(&acc, &pw) && partial_equal(&acc2, &pw),
		  "%s n=%zu in %u pieces: the combined partial differs from the whole's", what, n, k);
	CHECK_EQ(gpured_partial_round(&pw, &got), 0);
	CHECK(same(got, whole.v.f));

	cnt->arrays++;
	cnt->pieces += k;
	if (isnan(want))
		cnt->nan++;
	else if (isinf(want))
		cnt->inf++;
	else if (want == 0 && signbit(want))
		cnt->negzero++;
}

void test_daemon(const char *gpured)
{
	static const gpured_op ops[] = { GPURED_OP_SUM, GPURED_OP_SUMSQ };
	static const gpured_dtype dts[] = { GPURED_F32, GPURED_F64 };
	static const char *const gens[] = { "wide", "cancel", "tie", "-0", "inf", "nan",
					    "subnormal", "huge", "runs" };
	const size_t big = 600000; /* past a 4 MiB chunk as f64 */
	uint64_t seed = 0x5eed1234abcdull;
	counts cnt = { 0 };
	gpured_region_t *rg = NULL;
	gpured_t *g = NULL;
	double *x = malloc(big * sizeof(double));
	uint8_t *buf = malloc(big * sizeof(double));

	CHECK(x && buf);
	atexit(daemon_cleanup);
	daemon_start(&the_daemon, gpured);
	CHECK_EQ(gpured_connect(the_daemon.sock, &g), 0);
	CHECK_EQ(gpured_region_new(g, big * sizeof(double) + 8, &rg), 0);

	/* Partials only of float sums and sumsq: nothing sent otherwise. */
	{
		gpured_partial p;
		uint32_t id;
		int64_t ones[2] = { 1, 1 };
		gpured_value v;

		CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_MIN, GPURED_F64, x, 0, &p), -EINVAL);
		CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_I64, ones, 2, &p), -EINVAL);
		CHECK_EQ(gpured_submit_region_partial(g, gpured_region_id(rg), GPURED_OP_MAX, GPURED_F32,
						      0, 1, &id), -EINVAL);
		CHECK_EQ(gpured_outstanding(g), 0);
		/* a plain request is not collected as a partial, and stays */
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, ones, 2, &id), 0);
		CHECK_EQ(gpured_wait_id_partial(g, id, &p), -EINVAL);
		uint32_t none = 7;
		CHECK_EQ(gpured_wait_partial(g, &none, &p), -ECHILD);
		CHECK(none == 0);
		CHECK_EQ(gpured_wait_id(g, id, &v), 0);
		CHECK(v.v.i == 2);
		CHECK_EQ(gpured_wait_id_partial(g, id, &p), -ESRCH);
		/* the daemon's errors come back as for any request */
		CHECK_EQ(gpured_reduce_region_partial(g, 999, GPURED_OP_SUM, GPURED_F32, 0, 1, &p),
			 -EINVAL);
		CHECK_EQ(gpured_reduce_region_partial(g, gpured_region_id(rg), GPURED_OP_SUM,
						      GPURED_F64, 8, big + 1, &p), -EINVAL);
		CHECK_EQ(gpured_ping(g), 0);
		/* and a partial request collected by gpured_wait_id() is its value */
		double three[3] = { 1.0, 0x1p-53, 0x1p-53 };
		CHECK_EQ(gpured_submit_partial(g, GPURED_OP_SUM, GPURED_F64, three, 3, &id), 0);
		CHECK_EQ(gpured_wait_id(g, id, &v), 0);
		CHECK(v.v.f == 1.0 + 0x1p-52 && v.count == 3);
	}

	/* The issue's own cases: (max/4, 1, -max/4, 2^-40) x 50 is
	 * 50.000000000045475; an array and its negation sum to 0. */
	for (size_t i = 0; i < 200; i += 4) {
		x[i] = DBL_MAX / 4;
		x[i + 1] = 1;
		x[i + 2] = -DBL_MAX / 4;
		x[i + 3] = 0x1p-40;
	}
	store(GPURED_F64, x, 200, buf);
	one_array(g, rg, &seed, GPURED_OP_SUM, GPURED_F64, buf, 200, &cnt, "issue f64");
	CHECK(reference(GPURED_OP_SUM, GPURED_F64, buf, 200) == 50.0 + 50 * 0x1p-40);

	for (size_t a = 0; a < 2 * 9 * 2 * 12; a++) {
		gpured_op op = ops[a % 2];
		gpured_dtype dt = dts[(a / 2) % 2];
		int gen = (int)((a / 4) % GEN_N);
		size_t n;
		char what[64];

		switch (below(&seed, 8)) {
		case 0: n = below(&seed, 4); break;
		case 1: n = below(&seed, 40); break;
		case 2: n = 32768 + below(&seed, 3) - 1; break;
		default: n = below(&seed, 3000); break;
		}
		if (a % 97 == 5)
			n = big - below(&seed, 1000);
		generate(&seed, dt, gen, x, n);
		store(dt, x, n, buf);
		snprintf(what, sizeof(what), "%s %s %s #%zu", gpured_op_name(op),
			 gpured_dtype_name(dt), gens[gen], a);
		one_array(g, rg, &seed, op, dt, buf, n, &cnt, what);
		if (gen == GEN_TIE)
			cnt.ties++;
	}
	printf("%u arrays in %u pieces (%u from a region, %u pipelined): %u tie cases, "
	       "%u -0, %u NaN, %u infinite results\n",
	       cnt.arrays, cnt.pieces, cnt.by_region, cnt.pipelined, cnt.ties, cnt.negzero, cnt.nan,
	       cnt.inf);
	CHECK(cnt.negzero > 0 && cnt.nan > 0 && cnt.inf > 0 && cnt.by_region > 0 && cnt.pipelined > 0);

	CHECK_EQ(gpured_region_free(g, rg), 0);
	gpured_close(g);
	free(x);
	free(buf);
	kill(the_daemon.pid, SIGTERM);
	int status;
	CHECK(waitpid(the_daemon.pid, &status, 0) == the_daemon.pid);
	the_daemon.pid = 0;
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon status %d", status);
}
