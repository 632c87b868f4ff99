/*
 * Exact float sums of data whose exponents spread over every finite one:
 * the element path of sums (math/xsum.c), which such blocks take. Random
 * blocks, cancellation to exactly zero, a few huge among many tiny,
 * alternating signs, subnormals alone, counters that fill up, values near
 * overflow where the exact sum overflows and where it does not, and many
 * specials, at odd sizes and block boundaries, each bit for bit against
 * exact_sum() or a known answer.
 */
#include "tests/cpu/reduce-check.h"

static const size_t every_sizes[] = {
    1,
    2,
    3,
    15,
    16,
    17,
    255,
    /* just below and at the least f64 block the counters take */
    383,
    384,
    1023,
    4097,
    GR_REDUCE_BLOCK - 1,
    GR_REDUCE_BLOCK,
    GR_REDUCE_BLOCK + 1,
    2 * GR_REDUCE_BLOCK + 5,
};
#define EVERY_MAX (2 * GR_REDUCE_BLOCK + 5)

static double every_x[EVERY_MAX];

/* f64 bits of either sign, a full random mantissa and an exponent field
 * uniform in [0, top] (0: a subnormal). */
static uint64_t every_bits64(unsigned top)
{
	return (rng() >> 63) << 63 | (rng() % (top + 1)) << 52 | rng() >> 12;
}

static double every_f64(unsigned top)
{
	uint64_t b = every_bits64(top);
	double x;
	memcpy(&x, &b, 8);
	return x;
}

/* every_x[0, n) into buf as f64, then its sum against want. */
static void every_check64(unsigned char *buf, size_t n, double want, const char *what)
{
	for (size_t i = 0; i < n; i++)
		put_f(GR_DT_F64, buf, i, every_x[i]);
	CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F64, buf, n), want, "f64 %s n=%zu", what, n);
}

static void check_f64_every(unsigned char *buf)
{
	for (size_t s = 0; s < sizeof(every_sizes) / sizeof(every_sizes[0]); s++) {
		const size_t n = every_sizes[s];
		/* random, up to 2^998: no sum of them overflows */
		for (size_t i = 0; i < n; i++)
			every_x[i] = every_f64(2020);
		every_check64(buf, n, exact_sum(every_x, n), "random");
		/* and their negations, shuffled: exactly +0 */
		if (2 * n <= EVERY_MAX) {
			for (size_t i = 0; i < n; i++)
				every_x[n + i] = -every_x[i];
			shuffle(every_x, 2 * n);
			every_check64(buf, 2 * n, 0.0, "cancel");
			/* and one subnormal more */
			every_x[rng() % (2 * n)] += 0x1p-1074;
			every_check64(buf, 2 * n, exact_sum(every_x, 2 * n), "cancel and one");
		}
		/* a few huge among many tiny */
		for (size_t i = 0; i < n; i++)
			every_x[i] = every_f64(100);
		for (unsigned k = 0; k < 3; k++)
			every_x[rng() % n] = ldexp(every_f64(1022) > 0 ? 1.5 : -1.25, 990 + (int)k);
		every_check64(buf, n, exact_sum(every_x, n), "huge among tiny");
		/* alternating signs, magnitudes over every exponent */
		for (size_t i = 0; i < n; i++)
			every_x[i] = (i % 2 ? -1 : 1) * fabs(every_f64(2020));
		every_check64(buf, n, exact_sum(every_x, n), "alternating");
		/* subnormals alone, and with the least normals */
		for (size_t i = 0; i < n; i++)
			every_x[i] = every_f64(s % 2);
		every_check64(buf, n, exact_sum(every_x, n), "subnormals");
		/* most elements in one counter with every mantissa bit set, so
		 * that it fills up, among every exponent */
		for (size_t i = 0; i < n; i++)
			every_x[i] = rng() % 3
			                 ? ldexp(0x1.fffffffffffffp0, (int)(s * 37 % 1900) - 1000)
			                 : every_f64(2020);
		every_check64(buf, n, exact_sum(every_x, n), "one counter full");
	}
}

/*
 * Near overflow: huge elements (+-DBL_MAX, 2^970) whose own sum h is
 * known, among every exponent up to 2^900 (body, of exact sum b): the sum
 * is h + b rounded once. h = DBL_MAX: DBL_MAX + b (exact_sum() holds it).
 * h = DBL_MAX + 2^970, halfway to 2^1024: +inf unless b < 0, then DBL_MAX.
 */
static void check_f64_overflow(unsigned char *buf)
{
	for (size_t s = 0; s < sizeof(every_sizes) / sizeof(every_sizes[0]); s++) {
		const size_t n = every_sizes[s];
		if (n < 8)
			continue;
		for (int tie = 0; tie < 2; tie++)
			for (int sign = -1; sign <= 1; sign += 2) {
				const size_t nb = n - 5 - (size_t)tie;
				for (size_t i = 0; i < nb; i++)
					every_x[i] = every_f64(1923);
				const double b = exact_sum(every_x, nb);
				double want;
				if (!tie) {
					every_x[nb] = DBL_MAX;
					want = exact_sum(every_x, nb + 1);
				} else {
					want = b < 0 ? DBL_MAX : INFINITY;
				}
				const double huge[] = {DBL_MAX,  DBL_MAX,  DBL_MAX,
				                       -DBL_MAX, -DBL_MAX, 0x1p970};
				for (size_t k = 0; k < 5 + (size_t)tie; k++)
					every_x[nb + k] = huge[k];
				shuffle(every_x, n);
				for (size_t i = 0; i < n; i++)
					every_x[i] *= sign;
				every_check64(buf, n, sign * want,
				              tie ? "halfway to overflow" : "near overflow");
			}
	}
}

/* Many specials among every exponent: enough of one kind to fill its
 * counter exactly, and more. */
static void check_f64_specials(unsigned char *buf)
{
	static const size_t counts[] = {2047, 2048, 2049, 4096};
	const size_t n = GR_REDUCE_BLOCK;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		for (unsigned kind = 0; kind < 4; kind++) {
			for (size_t i = 0; i < n; i++)
				every_x[i] = every_f64(2046);
			/* +inf, -inf, both, NaN */
			for (size_t i = 0; i < counts[c]; i++) {
				every_x[i] = kind == 3 ? NAN : kind == 1 ? -INFINITY : INFINITY;
				if (kind == 2)
					every_x[counts[c] + i] = -INFINITY;
			}
			shuffle(every_x, n);
			const double want[] = {INFINITY, -INFINITY, NAN, NAN};
			every_check64(buf, n, want[kind], "specials");
		}
}

/* f32: every exponent field but the top, either sign, against the exact
 * sum of the floats as doubles. */
static void every_check32(unsigned char *buf, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		put_f(GR_DT_F32, buf, i, every_x[i]);
	CHECK_BITS(reduce_f(GR_OP_SUM, GR_DT_F32, buf, n), exact_sum(every_x, n), "f32 %s n=%zu",
	           what, n);
}

static double every_f32(unsigned top)
{
	uint32_t b = (uint32_t)(rng() >> 63) << 31 | (uint32_t)(rng() % (top + 1)) << 23 |
	             (uint32_t)(rng() >> 41);
	float f;
	memcpy(&f, &b, 4);
	return f;
}

static void check_f32_every(unsigned char *buf)
{
	for (size_t s = 0; s < sizeof(every_sizes) / sizeof(every_sizes[0]); s++) {
		const size_t n = every_sizes[s];
		for (size_t i = 0; i < n; i++)
			every_x[i] = every_f32(254);
		every_check32(buf, n, "random");
		if (2 * n <= EVERY_MAX) {
			for (size_t i = 0; i < n; i++)
				every_x[n + i] = -every_x[i];
			shuffle(every_x, 2 * n);
			every_check32(buf, 2 * n, "cancel");
		}
		for (size_t i = 0; i < n; i++)
			every_x[i] = (i % 2 ? -1 : 1) * fabs(every_f32(254));
		every_check32(buf, n, "alternating");
		for (size_t i = 0; i < n; i++)
			every_x[i] = every_f32(s % 2);
		every_check32(buf, n, "subnormals");
		/* FLT_MAX many times among the least: the sum leaves the
		 * float range */
		for (size_t i = 0; i < n; i++)
			every_x[i] = rng() % 2 ? FLT_MAX : every_f32(3);
		every_check32(buf, n, "FLT_MAX many");
	}
}

/* An f32 of exponent field e (1 to 254), either sign, a random mantissa. */
static double span_f32(unsigned e)
{
	uint32_t b = (uint32_t)(rng() >> 63) << 31 | e << 23 | (uint32_t)(rng() >> 41);
	float f;
	memcpy(&f, &b, 4);
	return f;
}

/*
 * Large f32 blocks whose sample (their first 256 elements) spans d
 * binades below the top field 200, both ends in it: one grid level takes
 * a span of 26, two of 77; at 78 the sample alone sends the block element
 * by element. The rest lies within the sample's span, or reaches one
 * field wider below it, or two above it (past the guess).
 */
static void check_f32_span(unsigned char *buf)
{
	static const unsigned spans[] = {25, 26, 27, 76, 77, 78, 79};
	static const size_t sizes[] = {4097, GR_REDUCE_BLOCK};
	for (size_t k = 0; k < sizeof(spans) / sizeof(spans[0]); k++)
		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
			for (int rest = 0; rest < 3; rest++) {
				const unsigned d = spans[k], top = 200;
				const size_t n = sizes[z];
				for (size_t i = 0; i < n; i++)
					every_x[i] =
					    span_f32(top - d + (unsigned)(rng() % (d + 1)));
				every_x[rng() % 256] = span_f32(top);
				every_x[rng() % 256] = span_f32(top - d);
				if (rest == 1)
					every_x[256 + rng() % (n - 256)] = span_f32(top - d - 1);
				else if (rest == 2)
					every_x[256 + rng() % (n - 256)] = span_f32(top + 2);
				every_check32(buf, n, "sample span");
			}
}

int main(int argc, char **argv)
{
	/* clang-format off */
	static const reduce_part parts[] = {
	    {"f64 every", check_f64_every},
	    {"f64 overflow", check_f64_overflow},
	    {"f64 specials", check_f64_specials},
	    {"f32 every", check_f32_every},
	    {"f32 sample span", check_f32_span},
	};
	/* clang-format on */

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
