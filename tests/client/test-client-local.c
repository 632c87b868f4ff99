/*
 * Reductions in this process (gpured_local_reduce, _partial, _moments)
 * against the daemon's replies for the same elements, bit for bit: every
 * op and dtype, sizes at and around block edges, on 1 to 7 threads, and
 * hostile values (NaN, infinities, -0, cancellation, the widest range);
 * then the errors.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"

static unsigned long checked;

static void same_value(const gpured_value *a, const gpured_value *b, const char *what)
{
	CHECK_MSG(a->kind == b->kind && a->count == b->count && a->index == b->index &&
			  memcmp(&a->v, &b->v, 8) == 0,
		  "%s: local kind %d count %llu index %llu %016llx, daemon kind %d count %llu index "
		  "%llu %016llx",
		  what, a->kind, (unsigned long long)a->count, (unsigned long long)a->index,
		  (unsigned long long)a->v.u, b->kind, (unsigned long long)b->count,
		  (unsigned long long)b->index, (unsigned long long)b->v.u);
	checked++;
}

static bool same_partial(const gpured_partial *a, const gpured_partial *b)
{
	return a->op == b->op && a->dtype == b->dtype && a->count == b->count &&
	       a->scale == b->scale && a->specials == b->specials && a->nlimbs == b->nlimbs &&
	       memcmp(a->limbs, b->limbs, sizeof(a->limbs)) == 0;
}

/* Every op of dt over x[0..n) here, on threads, and by the daemon. */
static void compare(gpured_t *g, gpured_dtype dt, const void *x, size_t n, unsigned threads,
		    const char *data)
{
	char what[160];

	for (int op = GPURED_OP_SUM; op <= GPURED_OP_ARGMAX; op++) {
		gpured_value l, d;
		snprintf(what, sizeof(what), "%s %s n=%zu threads=%u %s", gpured_op_name(op),
			 gpured_dtype_name(dt), n, threads, data);
		int rl = gpured_local_reduce(op, dt, x, n, threads, &l);
		int rd = gpured_reduce(g, op, dt, x, n, &d);
		CHECK_MSG(rl == rd, "%s: local %d daemon %d", what, rl, rd);
		if (rl == 0)
			same_value(&l, &d, what);
		gpured_partial lp, dp;
		rl = gpured_local_partial(op, dt, x, n, threads, &lp);
		rd = gpured_reduce_partial(g, op, dt, x, n, &dp);
		CHECK_MSG(rl == rd, "%s partial: local %d daemon %d", what, rl, rd);
		if (rl == 0) {
			CHECK_MSG(same_partial(&lp, &dp), "%s partial differs", what);
			checked++;
		}
	}
	/* moments' parts: the extremes, and for floats the sums' partials */
	gpured_value lo, hi, dlo, dhi;
	gpured_partial s1, s2, d1, d2;
	int rp = gpured_local_moments_parts(dt, x, n, threads, &lo, &hi, &s1, &s2);
	CHECK_MSG(rp == (n ? 0 : -ENODATA), "moments parts %s n=%zu: %d", gpured_dtype_name(dt), n,
		  rp);
	if (rp == 0) {
		CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, dt, x, n, &dlo), 0);
		CHECK_EQ(gpured_reduce(g, GPURED_OP_MAX, dt, x, n, &dhi), 0);
		same_value(&lo, &dlo, "moments parts min");
		same_value(&hi, &dhi, "moments parts max");
		if (gpured_result_kind(GPURED_OP_SUM, dt) == GPURED_KIND_F64) {
			CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUM, dt, x, n, &d1), 0);
			CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUMSQ, dt, x, n, &d2), 0);
			CHECK_MSG(same_partial(&s1, &d1) && same_partial(&s2, &d2),
				  "moments parts %s n=%zu: sums' partials differ", gpured_dtype_name(dt),
				  n);
			checked++;
		}
	}
	gpured_moments lm, dm;
	uint64_t ddof = n > 1;
	snprintf(what, sizeof(what), "moments %s n=%zu threads=%u %s", gpured_dtype_name(dt), n,
		 threads, data);
	int rl = gpured_local_moments(dt, x, n, ddof, threads, &lm);
	int rd = gpured_reduce_moments(g, dt, x, n, ddof, &dm);
	CHECK_MSG(rl == rd, "%s: local %d daemon %d", what, rl, rd);
	if (rl == 0) {
		same_value(&lm.sum, &dm.sum, what);
		same_value(&lm.min, &dm.min, what);
		same_value(&lm.max, &dm.max, what);
		CHECK_MSG(lm.count == dm.count && memcmp(&lm.mean, &dm.mean, 8) == 0 &&
				  memcmp(&lm.var, &dm.var, 8) == 0,
			  "%s: mean or var differ", what);
	}
}

static void test_every_dtype(void)
{
	static const size_t sizes[] = { 0, 1, 7, 32768, 32769, 65536 * 2 + 5, 5 * 32768 };
	static const unsigned threads[] = { 1, 2, 3, 7 };
	rng r = { 7 };

	daemon_start(&the_daemon, NULL);
	gpured_t *g = connect_or_die(&the_daemon);
	for (int dt = GPURED_I32; dt <= GPURED_U16; dt++)
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			void *x = random_array(&r, dt, sizes[s]);
			compare(g, dt, x, sizes[s], threads[(dt + s) % 4], "random");
			free(x);
		}
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_hostile(void)
{
	const size_t n = 4 * 32768 + 3;
	double *d = malloc(n * sizeof(*d));
	float *f = malloc(n * sizeof(*f));
	rng r = { 11 };

	daemon_start(&the_daemon, NULL);
	gpured_t *g = connect_or_die(&the_daemon);
	/* every exponent, signs at random, cancelling in pairs but for one */
	for (size_t i = 0; i < n; i++) {
		uint64_t b = rng_next(&r);
		double v = ldexp(1.0 + (double)(b >> 12) / 0x1p52, (int)(b % 2046) - 1022);
		d[i] = i % 2 ? -d[i - 1] : (b >> 11 & 1 ? v : -v);
		f[i] = i % 2 ? -f[i - 1] : (float)ldexp(1.0 + (double)(b >> 40) / 0x1p24,
							 (int)(b % 276) - 149);
	}
	d[n - 1] = 0x1p-1074;
	compare(g, GPURED_F64, d, n, 3, "every exponent");
	compare(g, GPURED_F32, f, n, 2, "every exponent");
	/* integers whose squares round in double, block by block: a block
	 * cut elsewhere gives other bits */
	int64_t *q = malloc(n * sizeof(*q));
	for (size_t i = 0; i < n; i++)
		q[i] = (int64_t)(rng_next(&r) >> 3) - (INT64_C(1) << 60);
	compare(g, GPURED_I64, q, n, 3, "wide integers");
	free(q);
	/* specials and zeros */
	for (size_t i = 0; i < n; i++)
		d[i] = -0.0;
	compare(g, GPURED_F64, d, n, 4, "all -0");
	d[40000] = INFINITY;
	d[90000] = -INFINITY;
	compare(g, GPURED_F64, d, n, 4, "+inf and -inf");
	d[70000] = NAN;
	compare(g, GPURED_F64, d, n, 4, "NaN");
	gpured_close(g);
	free(d);
	free(f);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_errors(void)
{
	gpured_value v;
	gpured_partial p;
	gpured_moments m;
	int x[2] = { 1, 2 };

	CHECK_EQ(gpured_local_reduce(GPURED_OP_MIN, GPURED_I32, x, 0, 1, &v), -ENODATA);
	CHECK_EQ(gpured_local_reduce(GPURED_OP_SUM, GPURED_I32, NULL, 0, 1, &v), 0);
	CHECK_EQ(v.v.i, 0);
	CHECK_EQ(gpured_local_reduce(GPURED_OP_SUM, GPURED_I32, NULL, 2, 1, &v), -EINVAL);
	CHECK_EQ(gpured_local_reduce(GPURED_OP_MOMENTS, GPURED_I32, x, 2, 1, &v), -EINVAL);
	CHECK_EQ(gpured_local_reduce((gpured_op)99, GPURED_I32, x, 2, 1, &v), -EINVAL);
	CHECK_EQ(gpured_local_reduce(GPURED_OP_SUM, (gpured_dtype)99, x, 2, 1, &v), -EINVAL);
	CHECK_EQ(gpured_local_partial(GPURED_OP_MAX, GPURED_F32, x, 2, 1, &p), -EINVAL);
	CHECK_EQ(gpured_local_partial(GPURED_OP_SUM, GPURED_I32, x, 2, 1, &p), -EINVAL);
	CHECK_EQ(gpured_local_moments(GPURED_I32, x, 2, 2, 1, &m), -EINVAL);
	CHECK_EQ(gpured_local_moments(GPURED_I32, x, 0, 0, 1, &m), -ENODATA);
	CHECK_EQ(gpured_local_moments(GPURED_I32, x, 2, 1, 1000, &m), 0);
	CHECK_MSG(m.count == 2 && m.mean == 1.5 && m.var == 0.5, "moments of 1, 2");
	checked += 12;
}

static void tell_checked(void)
{
	printf("%lu results checked\n", checked);
}

int main(int argc, char **argv)
{
	static const daemon_scenario scenarios[] = {
		{ "every-dtype", test_every_dtype },
		{ "hostile", test_hostile },
		{ "errors", test_errors },
	};

	atexit(tell_checked);
	return daemon_harness_main(argc, argv, scenarios, sizeof(scenarios) / sizeof(scenarios[0]));
}
