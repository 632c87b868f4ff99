/*
 * The seam of the exact partials: limbs out and in, digits and specials
 * folded in as a device would (one by one, and whole arrays of them at
 * once), and partials filled by hand.
 */
#include "math/xsum.h"
#include "tests/cpu/reduce-check.h"

/* Does q export limbs (w, k, scale, flags)? A partial that holds its value
 * as a double in v.f (xflags 0: what the f32 narrow path leaves) comes back
 * from its limbs in the exact form, with other bytes; an exact partial
 * comes back byte for byte. */
static bool same_limbs(const gr_partial *q, const uint64_t *w, size_t k, int scale, unsigned flags)
{
	uint64_t w2[GR_PARTIAL_LIMBS_MAX];
	int s2;
	unsigned f2;
	size_t k2 = gr_partial_limbs(q, w2, GR_PARTIAL_LIMBS_MAX, &s2, &f2);
	return k2 == k && s2 == scale && f2 == flags && memcmp(w, w2, k * sizeof(*w)) == 0;
}

static void check_limbs(unsigned char *buf)
{
	uint64_t w[GR_PARTIAL_LIMBS_MAX];
	int scale;
	unsigned flags;
	gr_partial p, q;

	/* round trips, for values from every path */
	for (gr_dtype dt = GR_DT_F32; dt <= GR_DT_F64; dt++)
		for (int kind = 0; kind < 6; kind++) {
			size_t n = 1 + rng() % 3000;
			fill(dt, buf, n, kind % 2);
			if (kind == 2)
				put_f(dt, buf, 0, INFINITY);
			if (kind == 3)
				put_f(dt, buf, n - 1, NAN);
			if (kind == 4)
				for (size_t i = 0; i < n; i++)
					put_f(dt, buf, i, -0.0);
			for (gr_op op = GR_OP_SUM; op <= GR_OP_SUMSQ;
			     op += GR_OP_SUMSQ - GR_OP_SUM) {
				gr_reduce(op, dt, buf, n, &p);
				size_t k =
				    gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
				CHECK_MSG(k <= GR_PARTIAL_LIMBS_MAX, "limbs %zu", k);
				CHECK_MSG(gr_partial_from_limbs(&q, p.count, w, k, scale, flags) ==
				              0,
				          "from_limbs");
				CHECK_MSG(same_limbs(&q, w, k, scale, flags) &&
				              (p.xflags == 0 || same_bits(&p, &q)),
				          "%s %s kind %d: round trip", op_names[op], dt_names[dt],
				          kind);
				CHECK_MSG(k == 0 || (w[k - 1] != 0 && w[k - 1] != UINT64_MAX) ||
				              (k > 1 && (w[k - 1] >> 63) != (w[k - 2] >> 63)),
				          "limbs not minimal");
				CHECK_MSG(k == 0 || w[0] != 0, "low limb zero");
				if (kind == 4)
					CHECK_MSG(op == GR_OP_SUMSQ ? flags == 0
					                            : flags == GR_PARTIAL_NEGZERO,
					          "-0 flags %u", flags);
			}
		}

	/* a few f32 elements close together: their sum is a double, in v.f */
	float few[3] = {1.5f, 0.25f, -0.125f};
	gr_reduce(GR_OP_SUM, GR_DT_F32, few, 3, &p);
	size_t k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(gr_partial_from_limbs(&q, p.count, w, k, scale, flags) == 0 &&
	              same_limbs(&q, w, k, scale, flags),
	          "f32 narrow round trip");
	gr_value v;
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &q, &v) == GR_OK && v.f == 1.625,
	          "f32 narrow value");

	/* a value known exactly: 2^-1080 * 3 from three tiny squares */
	double tiny[3] = {0x1p-540, -0x1p-540, 0x1p-540};
	gr_reduce(GR_OP_SUMSQ, GR_DT_F64, tiny, 3, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && flags == 0, "tiny limbs %zu flags %u", k, flags);
	CHECK_MSG(scale <= -1080 && w[0] == 3ull << (-1080 - scale), "tiny value");
	/* 5e-324 squared is 2^-2148, the least bit a square can have */
	gr_reduce(GR_OP_SUMSQ, GR_DT_F64, (double[]){5e-324, -5e-324}, 2, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && scale <= -2148 && w[0] == 1ull << (-2148 - scale + 1), "2^-2147 limbs");
	/* every bit of every square, seen through the limbs: the least bit of
	 * the exact value, whichever path the block takes (a huge element
	 * sends it element by element; 2^499 keeps it on the fast path, where
	 * 2^-600 squared underflows unless handled) */
	static const struct {
		double big, tiny;
		int lsb;
	} sq[] = {{0x1p600, 0x1p-540, -1080},
	          {0x1p499, 0x1p-600, -1200},
	          {0x1p499, 5e-324, -2148},
	          {1.0, 0x1p-1000, -2000},
	          {0x1p-1000, 0x1p-1073, -2146}};
	for (size_t c = 0; c < sizeof(sq) / sizeof(sq[0]); c++)
		for (size_t n = 2; n <= 40; n += 38) {
			double *d = (double *)(void *)buf;
			for (size_t i = 0; i < n; i++)
				d[i] = i == 0 ? sq[c].big : i == 1 ? sq[c].tiny : 0.0;
			gr_reduce(GR_OP_SUMSQ, GR_DT_F64, buf, n, &p);
			k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
			int b = sq[c].lsb - scale;
			CHECK_MSG(
			    k > 0 && b >= 0 && b < 64 && w[0] == 1ull << b,
			    "sumsq %a, %a (n %zu): least bit 2^%d, scale %d, word %016" PRIx64,
			    sq[c].big, sq[c].tiny, n, sq[c].lsb, scale, w[0]);
		}

	/* a negative value: -1 */
	gr_reduce(GR_OP_SUM, GR_DT_F64, (double[]){-1.0}, 1, &p);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k >= 1 && (int64_t)w[k - 1] < 0, "negative limbs");
	CHECK_MSG(gr_partial_limbs(&p, w, 0, &scale, &flags) == k, "size without room");

	/* hand-made limbs: -3 * 2^-10 as one word, and as three words */
	uint64_t m3[3] = {(uint64_t)-3, UINT64_MAX, UINT64_MAX};
	CHECK_MSG(gr_partial_from_limbs(&p, 2, m3, 3, -10, 0) == 0, "from -3");
	CHECK_MSG(gr_partial_from_limbs(&q, 2, m3, 1, -10, 0) == 0, "from -3 short");
	CHECK_MSG(same_bits(&p, &q), "sign extension");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == -3 * 0x1p-10,
	          "-3 * 2^-10: %g", v.f);
	/* an unaligned scale */
	uint64_t five = 5;
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &five, 1, -2173, 0) == 0, "low scale");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 0,
	          "rounds to 0");
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 1 && w[0] == 5ull << 3 && scale == GR_PARTIAL_EXP_MIN, "re-aligned");

	/* what from_limbs refuses */
	uint64_t one = 1, top = 1ull << 62, big[GR_PARTIAL_LIMBS_MAX + 1] = {0};
	CHECK_MSG(gr_partial_from_limbs(&p, 1, big, GR_PARTIAL_LIMBS_MAX + 1, 0, 0) == -EINVAL,
	          "too many words");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MIN - 1, 0) == -EINVAL,
	          "scale too low");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX + 1, 0) == -EINVAL,
	          "scale too high");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX, 0) == -EINVAL,
	          "2^EXP_MAX does not fit");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, GR_PARTIAL_EXP_MAX - 1, 0) == 0,
	          "2^(EXP_MAX-1) fits");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &top, 1, GR_PARTIAL_EXP_MAX - 62, 0) == -EINVAL,
	          "2^EXP_MAX shifted does not fit");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, 1u << 7) == -EINVAL, "unknown flag");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, GR_PARTIAL_SEEN) == -EINVAL,
	          "SEEN is not a limbs flag");
	CHECK_MSG(gr_partial_from_limbs(&p, 1, &one, 1, 0, GR_PARTIAL_NEGZERO) == -EINVAL,
	          "-0 with a value");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, GR_PARTIAL_NEGZERO) == -EINVAL,
	          "-0 of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, &one, 1, 0, 0) == -EINVAL, "a value of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, GR_PARTIAL_NAN) == -EINVAL,
	          "NaN of nothing");
	CHECK_MSG(gr_partial_from_limbs(&p, 0, NULL, 0, 0, 0) == 0, "empty");
	CHECK_MSG(gr_partial_from_limbs(&p, 4, NULL, 0, 0, GR_PARTIAL_NEGZERO) == 0, "-0");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 0 &&
	              signbit(v.f),
	          "-0 in");

	/* digits and specials, as a device would fold them in: the digits
	 * of 2^600 + 1 - 2^600 + 2^-2176 in any order */
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &p);
	p.count = 4;
	CHECK_MSG(gr_partial_add_scaled(&p, 1, 600) == 0, "2^600");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MIN) == 0, "2^-2176");
	CHECK_MSG(gr_partial_add_scaled(&p, -1, 600) == 0, "-2^600");
	CHECK_MSG(gr_partial_add_scaled(&p, INT64_MIN, -63) == 0, "-1");
	CHECK_MSG(gr_partial_add_scaled(&p, 2, 0) == 0, "+2");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MAX - 62) == -ERANGE, "too high");
	CHECK_MSG(gr_partial_add_scaled(&p, 1, GR_PARTIAL_EXP_MIN - 1) == -ERANGE, "too low");
	CHECK_MSG(gr_partial_add_scaled(&p, 0, 99999) == 0, "zero digit anywhere");
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK && v.f == 1.0,
	          "digits: %a", v.f);
	k = gr_partial_limbs(&p, w, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	CHECK_MSG(k == 35 && scale == GR_PARTIAL_EXP_MIN && w[0] == 1 && w[34] == 1, "digit limbs");
	/* a device's result folded into a CPU partial gives the CPU's bits */
	double xs[5] = {3.5, -0x1p-30, 1e10, -1e10, 0x1p-1074};
	gr_partial cpu, dev;
	gr_reduce(GR_OP_SUM, GR_DT_F64, xs, 5, &cpu);
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &dev);
	dev.count = 5;
	for (size_t i = 0; i < 5; i++) {
		int e;
		double m = frexp(xs[i], &e);
		CHECK_MSG(gr_partial_add_scaled(&dev, (int64_t)ldexp(m, 53), e - 53) == 0, "digit");
	}
	CHECK_MSG(same_bits(&cpu, &dev), "device digits vs cpu");
	/* zeros and specials */
	gr_partial_identity(GR_OP_SUM, GR_DT_F64, &dev);
	dev.count = 2;
	gr_partial_add_special(&dev, 0);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && signbit(v.f),
	          "device -0");
	gr_partial_add_special(&dev, GR_PARTIAL_SEEN);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && !signbit(v.f),
	          "device +0");
	gr_partial_add_special(&dev, GR_PARTIAL_NINF);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && v.f == -INFINITY,
	          "device -inf");
	gr_partial_add_special(&dev, GR_PARTIAL_PINF);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &dev, &v) == GR_OK && isnan(v.f),
	          "device inf - inf");

	/* a partial filled by hand, as the CUDA backend does: its v.f is the
	 * value, its words are never read, and combining folds it in */
	gr_partial hand;
	memset(&hand, 0xa5, sizeof(hand));
	hand.count = 3;
	hand.v.f = 0.25;
	hand.xflags = 0;
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F32, &hand, &v) == GR_OK && v.f == 0.25,
	          "hand finish");
	gr_reduce(GR_OP_SUM, GR_DT_F64, (double[]){0x1p-60}, 1, &p);
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &p, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &p, &v) == GR_OK &&
	              v.f == 0.25 + 0x1p-60 && p.count == 4,
	          "hand combined: %a", v.f);
	gr_partial acc = hand;
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v) == GR_OK && v.f == 0.5,
	          "hand twice");
	hand.v.f = -0.0;
	acc = hand;
	gr_partial_combine(GR_OP_SUM, GR_DT_F64, &acc, &hand);
	CHECK_MSG(gr_partial_finish(GR_OP_SUM, GR_DT_F64, &acc, &v) == GR_OK && v.f == 0 &&
	              signbit(v.f),
	          "hand -0 twice");
}

/* One random digit: small, near 2^62 of either sign, sparse, or negative
 * only (each kind carries and borrows its own way). */
static int64_t random_digit(int kind)
{
	uint64_t r = rng();
	switch (kind) {
	case 0: return (int64_t)(r % 2000001) - 1000000;
	case 1: return (int64_t)(r >> 2) * (r & 1 ? 1 : -1);
	case 2: return rng() % 5 ? 0 : (int64_t)(r >> 3) - ((int64_t)1 << 60);
	default: return -(int64_t)(r >> 34);
	}
}

/* xsum_add_digits(): a whole array of a device's digits at once gives
 * the words that adding them one by one gives, into empty and non-empty
 * accumulators, at every scale a device uses and for integers. */
static void check_digits(unsigned char *buf)
{
	(void)buf;
	int64_t d[2 * GR_PARTIAL_XWORDS];
	for (int it = 0; it < 20000; it++) {
		unsigned n = 1 + (unsigned)(rng() % (2 * GR_PARTIAL_XWORDS));
		int lsb = rng() % 2 ? GR_PARTIAL_EXP_MIN + (int)(rng() % 64) : -149 - (int)(rng() % 300);
		while (lsb + 32 * (int)n + 66 > GR_PARTIAL_EXP_MAX)
			n--;
		int kind = (int)(rng() % 4);
		for (unsigned i = 0; i < n; i++)
			d[i] = random_digit(kind);
		gr_partial a, b;
		gr_partial_identity(GR_OP_SUM, GR_DT_F64, &a);
		gr_partial_identity(GR_OP_SUM, GR_DT_F64, &b);
		if (rng() % 2) {
			int64_t s = (int64_t)rng();
			gr_partial_add_scaled(&a, s, 0);
			gr_partial_add_scaled(&b, s, 0);
		}
		xsum_add_digits(a.xacc, lsb, d, n);
		for (unsigned i = 0; i < n; i++)
			gr_partial_add_scaled(&b, d[i], lsb + 32 * (int)i);
		CHECK_MSG(memcmp(a.xacc, b.xacc, sizeof(a.xacc)) == 0,
		          "digits at once: %u digits of kind %d from 2^%d", n, kind, lsb);
		/* integers: 32-bit places from 2^0 */
		uint64_t x1[GR_PARTIAL_XWORDS] = {0}, x2[GR_PARTIAL_XWORDS] = {0};
		unsigned ni = 1 + (unsigned)(rng() % 6);
		xsum_add_digits(x1, 0, d, ni);
		for (unsigned i = 0; i < ni; i++)
			xsum_add_int(x2, 32 * i,
			             d[i] < 0 ? (unsigned __int128)(-(uint64_t)d[i]) : (unsigned __int128)d[i],
			             d[i] < 0);
		CHECK_MSG(memcmp(x1, x2, sizeof(x1)) == 0, "integer digits at once: %u of kind %d", ni,
		          kind);
	}
	/* digits that cancel to zero add nothing */
	uint64_t z[GR_PARTIAL_XWORDS] = {0}, zero[GR_PARTIAL_XWORDS] = {0};
	int64_t c[3] = {(int64_t)1 << 32, -1, 0};
	xsum_add_digits(z, -149, c, 3);
	CHECK_MSG(memcmp(z, zero, sizeof(z)) == 0, "cancelling digits");
}

int main(int argc, char **argv)
{
	static const reduce_part parts[] = {
	    {"limbs", check_limbs},
	    {"digits", check_digits},
	};

	return reduce_run(parts, sizeof(parts) / sizeof(parts[0]), argc - 1, argv + 1);
}
