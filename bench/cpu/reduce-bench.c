/*
 * How fast gr_reduce() runs on one core, next to a plain read of the same
 * buffer measured in the same run (the ratio is what carries from one
 * machine to another); then the exact float sums next to a plain sum in
 * double lanes (what the CPU backend did before they were exact), on one
 * thread and on two (each reduces half the blocks; the partials are then
 * combined), and moments (sum, sum of squares, min and max, exact) beside
 * them.
 *
 *   reduce-bench [log2 n = 24] [repetitions = 10]
 *   reduce-bench --exact [samples = 51 [kind [lg]]]
 *
 * Prints GB/s (10^9 bytes per second of input) of the best repetition.
 * --exact measures the exact float sums against the plain one alone, one
 * thread, in cache (2^12, 2^16 and 2^20 elements) and from memory (2^24),
 * on several kinds of data (or one kind, at one size lg): each sample
 * times the exact sum and then the plain one on the same buffer, so that
 * both see the same load on a busy machine, and the medians of the
 * samples are printed with the ratios' quartiles; moments (its exact
 * sums, min and max) the same way, and last the floor of any sum with a
 * counter per exponent ("store", bench_store_floor()).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "math/reduce.h"

typedef uint64_t bench_v4du __attribute__((vector_size(32)));
typedef double bench_v4df __attribute__((vector_size(32)));

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The floor: read every byte once and do as little as possible with it,
 * in registers as wide as gr_reduce() gets. */
#define BENCH_READ(NAME, ATTR)                                                                     \
	ATTR static uint64_t NAME(const void *data, size_t bytes)                                  \
	{                                                                                          \
		const unsigned char *p = data;                                                     \
		bench_v4du a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                 \
		for (size_t i = 0; i + 128 <= bytes; i += 128) {                                   \
			bench_v4du x0, x1, x2, x3;                                                 \
			memcpy(&x0, p + i, 32);                                                    \
			memcpy(&x1, p + i + 32, 32);                                               \
			memcpy(&x2, p + i + 64, 32);                                               \
			memcpy(&x3, p + i + 96, 32);                                               \
			a0 += x0;                                                                  \
			a1 += x1;                                                                  \
			a2 += x2;                                                                  \
			a3 += x3;                                                                  \
		}                                                                                  \
		bench_v4du a = a0 + a1 + a2 + a3;                                                  \
		return a[0] + a[1] + a[2] + a[3];                                                  \
	}

BENCH_READ(bench_read_base, )
#if defined(__x86_64__) && defined(__GNUC__)
BENCH_READ(bench_read_avx2, __attribute__((target("avx2"))))
#endif

static uint64_t bench_read(const void *data, size_t bytes)
{
#if defined(__x86_64__) && defined(__GNUC__)
	const char *e = getenv("GPURED_REDUCE_ISA");
	if (!(e && strcmp(e, "baseline") == 0) && __builtin_cpu_supports("avx2"))
		return bench_read_avx2(data, bytes);
#endif
	return bench_read_base(data, bytes);
}

/* The plain sum: 16 double lanes, f32 converted exactly, added in order. */
#define BENCH_PLAIN(NAME, ATTR, T)                                                                 \
	ATTR static double NAME(const void *data, size_t n)                                        \
	{                                                                                          \
		const unsigned char *p = data;                                                     \
		bench_v4df a[4] = {{0}};                                                           \
		size_t i = 0;                                                                      \
		for (; i + 16 <= n; i += 16)                                                       \
			_Pragma("GCC unroll 4") for (unsigned v = 0; v < 4; v++)                   \
			{                                                                          \
				bench_v4df x;                                                      \
				if (sizeof(T) == 8) {                                              \
					memcpy(&x, p + (i + 4 * v) * 8, sizeof(x));                \
				} else {                                                           \
					float t[4];                                                \
					memcpy(t, p + (i + 4 * v) * 4, sizeof(t));                 \
					x = (bench_v4df){t[0], t[1], t[2], t[3]};                  \
				}                                                                  \
				a[v] += x;                                                         \
			}                                                                          \
		bench_v4df s = a[0] + a[1] + a[2] + a[3];                                          \
		double r = s[0] + s[1] + s[2] + s[3];                                              \
		for (; i < n; i++) {                                                               \
			T t;                                                                       \
			memcpy(&t, p + i * sizeof(T), sizeof(T));                                  \
			r += t;                                                                    \
		}                                                                                  \
		return r;                                                                          \
	}

BENCH_PLAIN(bench_plain_f32_base, , float)
BENCH_PLAIN(bench_plain_f64_base, , double)
#if defined(__x86_64__) && defined(__GNUC__)
BENCH_PLAIN(bench_plain_f32_avx2, __attribute__((target("avx2"))), float)
BENCH_PLAIN(bench_plain_f64_avx2, __attribute__((target("avx2"))), double)
#endif

static double bench_plain(gr_dtype dt, const void *data, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
	const char *e = getenv("GPURED_REDUCE_ISA");
	if (!(e && strcmp(e, "baseline") == 0) && __builtin_cpu_supports("avx2"))
		return dt == GR_DT_F32 ? bench_plain_f32_avx2(data, n)
		                       : bench_plain_f64_avx2(data, n);
#endif
	return dt == GR_DT_F32 ? bench_plain_f32_base(data, n) : bench_plain_f64_base(data, n);
}

/*
 * The floor of any exact sum that keeps one counter per exponent field
 * and touches it for each element (the deposit of math/xsum.c, Neal's
 * large superaccumulator): one store an element to its exponent's
 * counter and nothing else: no load of the counter, no add, no carries,
 * no specials, so no such sum can read faster. Floats of
 * dt as their bits: f32 fields 0 to 255, f64 0 to 2047.
 */
static uint64_t bench_counters[2048];

static double bench_store_floor(gr_dtype dt, const void *data, size_t n)
{
	const unsigned char *p = data;
	if (dt == GR_DT_F32) {
		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			memcpy(&u, p + 4 * i, 4);
			bench_counters[(u >> 23) & 0xff] = u;
		}
	} else {
		for (size_t i = 0; i < n; i++) {
			uint64_t u;
			memcpy(&u, p + 8 * i, 8);
			bench_counters[(u >> 52) & 0x7ff] = u;
		}
	}
	return (double)bench_counters[1023];
}

/* One thread's share of a two-thread run: its half of the blocks. */
typedef struct bench_half {
	pthread_t thread;
	pthread_barrier_t *start, *done;
	const unsigned char *data;
	size_t n;
	gr_op op; /* GR_OP_N: the plain sum */
	gr_dtype dt;
	int reps;
	gr_partial part;
	double plain;
} bench_half;

static void *bench_half_run(void *arg)
{
	bench_half *h = arg;
	for (int r = 0; r < h->reps; r++) {
		pthread_barrier_wait(h->start);
		if (h->op == GR_OP_N)
			h->plain = bench_plain(h->dt, h->data, h->n);
		else
			gr_reduce(h->op, h->dt, h->data, h->n, &h->part);
		pthread_barrier_wait(h->done);
	}
	return NULL;
}

static volatile uint64_t bench_sink;

/* The answer, rounded as the daemon rounds it (moments: mean and var too). */
static void bench_finish(gr_op op, gr_dtype dt, const gr_partial *p)
{
	gr_value v;
	if (op == GR_OP_MOMENTS) {
		gr_moments m;
		gr_moments_finish(dt, p, 0, &m);
		memcpy((void *)&bench_sink, &m.var, sizeof(m.var));
		return;
	}
	gr_partial_finish(op, dt, p, &v);
	bench_sink = v.u;
}

/* Best time of reps runs of op (GR_OP_N: the plain sum) on threads threads. */
static double bench_time(gr_op op, gr_dtype dt, const unsigned char *buf, size_t n, int reps,
                         unsigned threads)
{
	double best = 1e30;
	if (threads == 1) {
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			if (op == GR_OP_N) {
				double s = bench_plain(dt, buf, n);
				memcpy((void *)&bench_sink, &s, sizeof(s));
			} else {
				gr_partial p;
				gr_reduce(op, dt, buf, n, &p);
				bench_finish(op, dt, &p);
			}
			double t = now() - t0;
			best = t < best ? t : best;
		}
		return best;
	}
	pthread_barrier_t start, done;
	pthread_barrier_init(&start, NULL, 3);
	pthread_barrier_init(&done, NULL, 3);
	/* the first half ends on a block boundary */
	size_t blocks = (n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK;
	size_t first = (blocks + 1) / 2 * GR_REDUCE_BLOCK;
	first = first < n ? first : n;
	bench_half h[2] = {
	    {.data = buf, .n = first},
	    {.data = buf + first * gr_dtype_size(dt), .n = n - first},
	};
	for (unsigned i = 0; i < 2; i++) {
		h[i].start = &start;
		h[i].done = &done;
		h[i].op = op;
		h[i].dt = dt;
		h[i].reps = reps;
		pthread_create(&h[i].thread, NULL, bench_half_run, &h[i]);
	}
	for (int r = 0; r < reps; r++) {
		double t0 = now();
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		if (op != GR_OP_N) {
			gr_partial_combine(op, dt, &h[0].part, &h[1].part);
			bench_finish(op, dt, &h[0].part);
		}
		double t = now() - t0;
		best = t < best ? t : best;
	}
	for (unsigned i = 0; i < 2; i++)
		pthread_join(h[i].thread, NULL);
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
	return best;
}

/* ---- --exact: medians of interleaved samples ---- */

static uint64_t bench_rng(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* A uniform double in (0, 1). */
static double bench_unit(uint64_t *s)
{
	return ((double)(bench_rng(s) >> 11) + 0.5) / 9007199254740992.0;
}

enum { BENCH_NORMAL, BENCH_UNIFORM, BENCH_WIDE, BENCH_BINADES60, BENCH_EVERY, BENCH_KINDS };
static const char *const bench_kind_names[] = {"normal", "uniform", "wide", "binades60",
                                               "every"};

/*
 * n elements of dt: normal (Gaussian, mean 0, sd 1), uniform (rand() /
 * RAND_MAX - 0.5, the data of the table above) or, with full mantissas
 * and either sign: wide (exponents uniform over 2^-300 to 2^300, or 2^-60
 * to 2^60 for f32, about twice the range a float can hold around 1),
 * binades60 (over 2^-30 to 2^30) or every (every exponent field a finite
 * value of dt can have, subnormals included, uniformly; for f64 up to
 * 2^997, so that no sum of 2^24 of them overflows).
 */
static void bench_fill(unsigned char *p, size_t n, gr_dtype dt, int kind)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	srand(1);
	for (size_t i = 0; i < n; i++) {
		double x;
		if (kind == BENCH_NORMAL) {
			double r = sqrt(-2 * log(bench_unit(&s)));
			x = r * cos(6.283185307179586 * bench_unit(&s));
		} else if (kind == BENCH_UNIFORM) {
			x = (double)rand() / RAND_MAX - 0.5;
		} else if (kind != BENCH_EVERY) {
			int range = kind == BENCH_BINADES60 ? 30 : dt == GR_DT_F32 ? 60 : 300;
			uint64_t r = bench_rng(&s);
			x = ldexp(1 + bench_unit(&s), (int)(r % (2 * range + 1)) - range);
			x = r >> 63 ? -x : x;
		} else if (dt == GR_DT_F32) {
			/* exponent fields 0 (subnormals) to 254 */
			uint64_t r = bench_rng(&s);
			uint32_t b = (uint32_t)(r >> 63) << 31 | (uint32_t)(r % 255) << 23 |
			             (uint32_t)(bench_rng(&s) >> 41);
			memcpy(p + 4 * i, &b, 4);
			continue;
		} else {
			/* exponent fields 0 (subnormals) to 2020 */
			uint64_t r = bench_rng(&s);
			uint64_t b = (r >> 63) << 63 | (r % 2021) << 52 | bench_rng(&s) >> 12;
			memcpy(p + 8 * i, &b, 8);
			continue;
		}
		if (dt == GR_DT_F32) {
			float f = (float)x;
			memcpy(p + 4 * i, &f, 4);
		} else {
			memcpy(p + 8 * i, &x, 8);
		}
	}
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Not ops of gr_reduce(): the plain sum and the counters' floor. */
#define BENCH_PLAIN_SUM GR_OP_N
#define BENCH_STORE ((gr_op)(GR_OP_N + 1))

/* Seconds for calls runs of op (or BENCH_PLAIN_SUM, BENCH_STORE) over n
 * elements. */
static double bench_batch(gr_op op, gr_dtype dt, const unsigned char *buf, size_t n, int calls)
{
	double t0 = now();
	for (int c = 0; c < calls; c++) {
		if (op == BENCH_PLAIN_SUM || op == BENCH_STORE) {
			double s = op == BENCH_STORE ? bench_store_floor(dt, buf, n)
			                             : bench_plain(dt, buf, n);
			memcpy((void *)&bench_sink, &s, sizeof(s));
		} else {
			gr_partial p;
			gr_reduce(op, dt, buf, n, &p);
			bench_finish(op, dt, &p);
		}
	}
	return now() - t0;
}

/* kind: one kind of data alone (NULL: all); lg_only: one size alone (0: all) */
static int bench_exact(int samples, const char *kind_only, unsigned lg_only)
{
	static const unsigned lgs[] = {12, 16, 20, 24};
	static const struct {
		gr_op op;
		gr_dtype dt;
	} ops[] = {
	    {GR_OP_SUM, GR_DT_F64},
	    {GR_OP_SUMSQ, GR_DT_F64},
	    {GR_OP_SUM, GR_DT_F32},
	    {GR_OP_SUMSQ, GR_DT_F32},
	    {GR_OP_MOMENTS, GR_DT_F64},
	    {GR_OP_MOMENTS, GR_DT_F32},
	    {BENCH_STORE, GR_DT_F64},
	    {BENCH_STORE, GR_DT_F32},
	};
	const size_t nmax = (size_t)1 << 24;
	unsigned char *buf = NULL;
	double *te = malloc(samples * sizeof(double)), *tp = malloc(samples * sizeof(double));
	double *ratio = malloc(samples * sizeof(double));

	if (!te || !tp || !ratio || posix_memalign((void **)&buf, 64, nmax * 8)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	/* a second of work first, so that the clock has settled */
	memset(buf, 0, nmax * 8);
	for (double t0 = now(); now() - t0 < 1;)
		bench_sink += bench_read(buf, ((size_t)1 << 20) * 8);
	printf("exact vs plain, one thread, %d samples: medians (GB/s), ratio exact/plain "
	       "median [quartiles]\n",
	       samples);
	printf("%-7s %3s %-9s %5s %8s %8s %6s %13s\n", "op", "dt", "data", "n", "exact", "plain",
	       "ratio", "");
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (int kind = 0; kind < BENCH_KINDS; kind++)
			for (size_t l = 0; l < sizeof(lgs) / sizeof(lgs[0]); l++) {
				if (kind_only && strcmp(kind_only, bench_kind_names[kind]) != 0)
					break;
				if (lg_only && lgs[l] != lg_only)
					continue;
				gr_op op = ops[o].op;
				gr_dtype dt = ops[o].dt;
				size_t n = (size_t)1 << lgs[l], nb = n * gr_dtype_size(dt);
				/* about 2^18 elements a sample */
				int calls = n >= (1u << 18) ? 1 : (int)((1u << 18) / n);
				bench_fill(buf, n, dt, kind);
				for (int r = 0; r < samples; r++) {
					te[r] = bench_batch(op, dt, buf, n, calls);
					tp[r] = bench_batch(BENCH_PLAIN_SUM, dt, buf, n, calls);
					ratio[r] = tp[r] / te[r];
				}
				qsort(te, samples, sizeof(double), bench_cmp);
				qsort(tp, samples, sizeof(double), bench_cmp);
				qsort(ratio, samples, sizeof(double), bench_cmp);
				printf("%-7s %3s %-9s  2^%-2u %8.2f %8.2f %6.2f  [%.2f-%.2f]\n",
				       op == BENCH_STORE ? "store" : gr_op_name(op), gr_dtype_name(dt),
				       bench_kind_names[kind], lgs[l],
				       nb * calls / te[samples / 2] / 1e9,
				       nb * calls / tp[samples / 2] / 1e9, ratio[samples / 2],
				       ratio[samples / 4], ratio[samples - 1 - samples / 4]);
				fflush(stdout);
			}
	free(buf);
	free(ratio);
	free(tp);
	free(te);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--exact") == 0) {
		int samples = argc > 2 ? atoi(argv[2]) : 51;
		if (samples < 1) {
			fprintf(stderr, "usage: reduce-bench --exact [samples [kind|all [lg]]]\n");
			return 2;
		}
		return bench_exact(samples,
		                   argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL,
		                   argc > 4 ? (unsigned)atoi(argv[4]) : 0);
	}

	unsigned lg = argc > 1 ? (unsigned)atoi(argv[1]) : 24;
	int reps = argc > 2 ? atoi(argv[2]) : 10;
	size_t n = (size_t)1 << lg;
	size_t bytes = n * 8;
	unsigned char *buf = NULL;

	if (lg > 30 || reps < 1 || posix_memalign((void **)&buf, 64, bytes)) {
		fprintf(stderr, "usage: reduce-bench [log2 n <= 30] [repetitions]\n");
		return 2;
	}
	srand(1);
	for (size_t i = 0; i < n * 2; i++) {
		float f = (float)rand() / (float)RAND_MAX - 0.5f;
		memcpy(buf + i * 4, &f, 4);
	}

	static const struct {
		const char *what;
		gr_op op;
		gr_dtype dt;
	} cases[] = {
	    {"read", GR_OP_N, GR_DT_F32},          {"sum f32", GR_OP_SUM, GR_DT_F32},
	    {"min f32", GR_OP_MIN, GR_DT_F32},     {"max f32", GR_OP_MAX, GR_DT_F32},
	    {"sumsq f32", GR_OP_SUMSQ, GR_DT_F32}, {"read", GR_OP_N, GR_DT_F64},
	    {"sum f64", GR_OP_SUM, GR_DT_F64},     {"min f64", GR_OP_MIN, GR_DT_F64},
	    {"sumsq f64", GR_OP_SUMSQ, GR_DT_F64}, {"sum i32", GR_OP_SUM, GR_DT_I32},
	    {"min i32", GR_OP_MIN, GR_DT_I32},     {"sum u64", GR_OP_SUM, GR_DT_U64},
	    {"min u64", GR_OP_MIN, GR_DT_U64},     {"sumsq i64", GR_OP_SUMSQ, GR_DT_I64},
	    {"argmin f32", GR_OP_ARGMIN, GR_DT_F32}, {"argmax f64", GR_OP_ARGMAX, GR_DT_F64},
	    {"argmin i32", GR_OP_ARGMIN, GR_DT_I32}, {"argmax u64", GR_OP_ARGMAX, GR_DT_U64},
	    {"moments", GR_OP_MOMENTS, GR_DT_F32},   {"moments", GR_OP_MOMENTS, GR_DT_F64},
	    {"moments", GR_OP_MOMENTS, GR_DT_I32},   {"moments", GR_OP_MOMENTS, GR_DT_U32},
	    {"moments", GR_OP_MOMENTS, GR_DT_I64},   {"moments", GR_OP_MOMENTS, GR_DT_U64},
	};
	printf("n = 2^%u elements\n", lg);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		size_t nb = n * gr_dtype_size(cases[c].dt);
		double best = 1e30;
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			if (cases[c].op == GR_OP_N) {
				bench_sink = bench_read(buf, nb);
			} else {
				gr_partial p;
				gr_reduce(cases[c].op, cases[c].dt, buf, n, &p);
				bench_sink = p.v.u;
			}
			double t = now() - t0;
			if (t < best)
				best = t;
		}
		printf("%-10s %3s  %7.2f GB/s  (%zu bytes, best of %d: %.1f us)\n", cases[c].what,
		       gr_dtype_name(cases[c].dt), nb / best / 1e9, nb, reps, best * 1e6);
	}

	/* exact against plain, same data, same run */
	printf("\nexact vs plain double sum (GB/s, best of %d)\n", reps);
	printf("%-10s %3s %7s %9s %9s %6s\n", "op", "dt", "threads", "exact", "plain", "ratio");
	static const struct {
		const char *what;
		gr_op op;
		gr_dtype dt;
	} pairs[] = {
	    {"sum", GR_OP_SUM, GR_DT_F32},
	    {"sum", GR_OP_SUM, GR_DT_F64},
	    {"sumsq", GR_OP_SUMSQ, GR_DT_F32},
	    {"sumsq", GR_OP_SUMSQ, GR_DT_F64},
	    {"moments", GR_OP_MOMENTS, GR_DT_F32},
	    {"moments", GR_OP_MOMENTS, GR_DT_F64},
	};
	/* the same kind of data as doubles (above, the f64 rows read pairs
	 * of floats: wild exponents) */
	unsigned char *dbuf = NULL;
	if (posix_memalign((void **)&dbuf, 64, bytes)) {
		fprintf(stderr, "out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		double d = (double)rand() / RAND_MAX - 0.5;
		memcpy(dbuf + i * 8, &d, 8);
	}
	for (unsigned threads = 1; threads <= 2; threads++)
		for (size_t c = 0; c < sizeof(pairs) / sizeof(pairs[0]); c++) {
			gr_dtype dt = pairs[c].dt;
			const unsigned char *data = dt == GR_DT_F64 ? dbuf : buf;
			size_t nb = n * gr_dtype_size(dt);
			double te = bench_time(pairs[c].op, dt, data, n, reps, threads);
			double tp = bench_time(GR_OP_N, dt, data, n, reps, threads);
			printf("%-10s %3s %7u %9.2f %9.2f %6.2f\n", pairs[c].what,
			       gr_dtype_name(dt), threads, nb / te / 1e9, nb / tp / 1e9, tp / te);
		}
	free(dbuf);
	free(buf);
	return 0;
}
