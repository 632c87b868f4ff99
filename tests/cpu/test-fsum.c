/*
 * Exact partials (math/fsum.h): what the daemon writes, the client reads
 * back; every malformed "exact" map is refused with a reason; and the
 * arithmetic on random partials, at any scales, agrees with an
 * independent big-integer sum here, rounded by the C library's strtod()
 * (glibc rounds hexadecimal input correctly, to nearest, ties to even).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/proto/check.h"
#include "math/fsum.h"
#include "proto/message.h"
#include "proto/obj.h"

static bool same(double a, double b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

/* ---- writer and reader --------------------------------------------------- */

static void test_request_bytes(void)
{
	gr_buf b, want;

	gr_buf_init(&b);
	gr_buf_init(&want);
	CHECK(gr_msg_write_reduce_partial_header(&b, 1, GR_OP_SUM, GR_DT_F32, 8) == 0);
	/* [0, 1, "reduce", [{"op": "sum", "dtype": "f32", "partial": true,
	 * "data": bin of 8 */
	HEX(&want, "94 00 01 a6 72 65 64 75 63 65 91 84 a2 6f 70 a3 73 75 6d"
		   " a5 64 74 79 70 65 a3 66 33 32 a7 70 61 72 74 69 61 6c c3"
		   " a4 64 61 74 61 c4 08");
	CHECK(b.len == want.len && memcmp(b.data, want.data, b.len) == 0);
	/* the plain header is unchanged */
	b.len = 0;
	want.len = 0;
	CHECK(gr_msg_write_reduce_header(&b, 1, GR_OP_SUM, GR_DT_I32, 8) == 0);
	HEX(&want, "94 00 01 a6 72 65 64 75 63 65 91 83 a2 6f 70 a3 73 75 6d"
		   " a5 64 74 79 70 65 a3 69 33 32 a4 64 61 74 61 c4 08");
	CHECK(b.len == want.len && memcmp(b.data, want.data, b.len) == 0);
	CHECK(gr_msg_write_reduce_partial_header(&b, 1, GR_OP_N, GR_DT_F32, 8) == -EINVAL);
	gr_buf_deinit(&b);
	gr_buf_deinit(&want);
}

/* Write the daemon's response with these limbs, read it as a client. */
static int read_back(const uint64_t *limbs, size_t n, int scale, unsigned specials, double value,
		     uint64_t count, gr_fsum *ret, char *why, size_t size)
{
	gr_value v = { .kind = GR_KIND_F64, .f = value };
	gr_obj_tree t = { 0 };
	const gr_obj *res = NULL;
	gr_err code;
	gr_buf b;
	int r;

	gr_buf_init(&b);
	CHECK(gr_msg_write_response_exact(&b, 5, &v, count, limbs, n, scale, specials) == 0);
	CHECK(gr_obj_parse(b.data, b.len, &gr_msg_response_limits, &t) == (long)b.len);
	CHECK(gr_msg_parse_response(t.root, NULL, &code, NULL, NULL, &res) == 0 && code == GR_OK);
	r = gr_fsum_parse(res, count, ret, why, size);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);
	return r;
}

static void test_read_back(void)
{
	gr_fsum x;
	char why[128];

	/* The daemon's grid: scale -2176 + 64k, low zero bits, a top word of
	 * sign only: read back canonical. 3 x 2^-2112 and -1 x 2^-2112 */
	uint64_t w[3] = { 0, 3, 0 };
	CHECK(read_back(w, 3, -2176, 0, 0.0, 2, &x, why, sizeof(why)) == 0);
	CHECK(x.count == 2 && x.nlimbs == 1 && x.limbs[0] == 3 && x.scale == -2112);
	CHECK(x.specials == 0 && x.limbs[1] == 0);
	uint64_t m[2] = { 0, UINT64_MAX };
	CHECK(read_back(m, 2, -2176, 0, 0.0, 1, &x, why, sizeof(why)) == 0);
	CHECK(x.nlimbs == 1 && x.limbs[0] == UINT64_MAX && x.scale == -2112);
	CHECK(same(gr_fsum_round(&x), -0.0));
	/* words are little-endian on the wire */
	uint64_t one = 0x0807060504030201ull;
	CHECK(read_back(&one, 1, 0, 0, 0x0807060504030201p0, 9, &x, why, sizeof(why)) == 0);
	CHECK(x.nlimbs == 1 && x.limbs[0] == one && x.scale == 0);
	uint8_t le[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	CHECK(gr_fsum_from_wire(&x, 9, le, 8, 0, 0, why, sizeof(why)) == 0);
	CHECK(x.limbs[0] == one);
	/* nothing at all; and -0 */
	CHECK(read_back(NULL, 0, 0, 0, 0.0, 0, &x, why, sizeof(why)) == 0);
	CHECK(x.count == 0 && x.nlimbs == 0 && x.scale == 0 && x.specials == 0);
	CHECK(read_back(NULL, 0, 0, GR_FSUM_NEGZERO, -0.0, 4, &x, why, sizeof(why)) == 0);
	CHECK(same(gr_fsum_round(&x), -0.0));
	/* the widest: 68 words at -2176, just below 2^2175 */
	uint64_t wide[68];
	memset(wide, 0xff, sizeof(wide));
	wide[67] = INT64_MAX;
	CHECK(read_back(wide, 68, -2176, 0, INFINITY, 1, &x, why, sizeof(why)) == 0);
	CHECK(x.nlimbs == 68 && x.scale == -2176);
	CHECK(gr_fsum_round(&x) == INFINITY);
	/* twice that is out of range, as is any 69th word */
	uint64_t w69[69] = { 1 };
	CHECK(read_back(wide, 68, -2175, 0, 0.0, 1, &x, why, sizeof(why)) == -EBADMSG);
	CHECK_MSG(strstr(why, "out of range"), "%s", why);
	CHECK(read_back(w69, 69, -2176, 0, 0.0, 1, &x, why, sizeof(why)) == -EBADMSG);
	CHECK_MSG(strstr(why, "69 words, more than 68"), "%s", why);
}

/* A result map built by hand around an "exact" value written by fn. */
static int parse_with(void (*fn)(gr_buf *), uint64_t count, char *why, size_t size)
{
	gr_obj_tree t = { 0 };
	gr_fsum x;
	gr_buf b;
	int r;

	gr_buf_init(&b);
	CHECK(gr_mpw_map(&b, 2) == 0 && gr_mpw_cstr(&b, "count") == 0 &&
	      gr_mpw_uint(&b, count) == 0);
	fn(&b);
	CHECK(gr_obj_parse(b.data, b.len, &gr_msg_response_limits, &t) == (long)b.len);
	memset(why, 0, size);
	r = gr_fsum_parse(t.root, count, &x, why, size);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);
	return r;
}

static void key(gr_buf *b, const char *k)
{
	CHECK(gr_mpw_cstr(b, k) == 0);
}

static void ex_none(gr_buf *b)
{
	key(b, "value");
	CHECK(gr_mpw_f64(b, 1.0) == 0);
}
static void ex_array(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_array(b, 0) == 0);
}
static void ex_no_limbs(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 2) == 0);
	key(b, "scale");
	CHECK(gr_mpw_int(b, 0) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
}
static void ex_limbs_str(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "limbs");
	key(b, "12345678");
	key(b, "scale");
	CHECK(gr_mpw_int(b, 0) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
}
static void ex_scale_nil(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "", 0) == 0);
	key(b, "scale");
	CHECK(gr_mpw_nil(b) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
}
static void ex_specials_bool(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "", 0) == 0);
	key(b, "scale");
	CHECK(gr_mpw_int(b, 0) == 0);
	key(b, "specials");
	CHECK(gr_mpw_bool(b, true) == 0);
}
static void ex_scale_huge(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "", 0) == 0);
	key(b, "scale");
	CHECK(gr_mpw_uint(b, UINT64_MAX) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
}
static void ex_scale_neg(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "", 0) == 0);
	key(b, "scale");
	CHECK(gr_mpw_int(b, INT64_MIN) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
}
static void ex_odd_bytes(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 3) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
	key(b, "scale");
	CHECK(gr_mpw_int(b, -3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "\1\0\0\0\0\0\0\0\0", 9) == 0);
}
/* extra keys are ignored; key order is free */
static void ex_extra_key(gr_buf *b)
{
	key(b, "exact");
	CHECK(gr_mpw_map(b, 4) == 0);
	key(b, "specials");
	CHECK(gr_mpw_uint(b, 0) == 0);
	key(b, "later");
	CHECK(gr_mpw_nil(b) == 0);
	key(b, "scale");
	CHECK(gr_mpw_int(b, -3) == 0);
	key(b, "limbs");
	CHECK(gr_mpw_bin(b, "\5\0\0\0\0\0\0\0", 8) == 0);
}

static void test_malformed(void)
{
	static const struct {
		void (*fn)(gr_buf *);
		const char *why;
	} cases[] = {
		{ ex_none, "no \"exact\" map" },
		{ ex_array, "\"exact\" is not a map" },
		{ ex_no_limbs, "\"exact\" without \"limbs\"" },
		{ ex_limbs_str, "\"limbs\" is not a bin" },
		{ ex_scale_nil, "\"scale\" is not an integer" },
		{ ex_specials_bool, "\"specials\" is not an unsigned integer" },
		{ ex_scale_huge, "scale 9223372036854775807 outside -2176..2175" },
		{ ex_scale_neg, "scale -9223372036854775808 outside" },
		{ ex_odd_bytes, "limbs of 9 bytes, not a multiple of 8" },
	};
	char why[128];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_MSG(parse_with(cases[i].fn, 1, why, sizeof(why)) == -EBADMSG, "case %zu", i);
		CHECK_MSG(strstr(why, cases[i].why), "case %zu: '%s', want '%s'", i, why,
			  cases[i].why);
	}
	CHECK(parse_with(ex_extra_key, 1, why, sizeof(why)) == 0);

	/* The rules on a well-formed map. */
	gr_fsum x;
	uint8_t one[8] = { 1 }, neg[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	CHECK(gr_fsum_from_wire(&x, 1, one, 8, -2177, 0, why, sizeof(why)) == -EINVAL);
	CHECK(strstr(why, "scale -2177 outside -2176..2175"));
	CHECK(gr_fsum_from_wire(&x, 1, one, 8, 2176, 0, why, sizeof(why)) == -EINVAL);
	CHECK(gr_fsum_from_wire(&x, 1, one, 8, 2175, 0, why, sizeof(why)) == -EINVAL);
	CHECK_MSG(strstr(why, "out of range"), "%s", why);
	CHECK(gr_fsum_from_wire(&x, 1, neg, 8, 2175, 0, why, sizeof(why)) == 0); /* -2^2175 */
	CHECK(gr_fsum_round(&x) == -INFINITY);
	CHECK(gr_fsum_from_wire(&x, 1, one, 8, 2174, 0, why, sizeof(why)) == 0);
	for (unsigned bit = 3; bit < 64; bit++) {
		if (bit == 4)
			continue;
		CHECK(gr_fsum_from_wire(&x, 1, NULL, 0, 0, 1ull << bit, why, sizeof(why)) == -EINVAL);
		CHECK(strstr(why, "unknown specials bits"));
	}
	CHECK(gr_fsum_from_wire(&x, 0, one, 8, 0, 0, why, sizeof(why)) == -EINVAL);
	CHECK(strstr(why, "no elements"));
	CHECK(gr_fsum_from_wire(&x, 0, NULL, 0, 0, GR_FSUM_NAN, why, sizeof(why)) == -EINVAL);
	CHECK(gr_fsum_from_wire(&x, 0, NULL, 0, 0, GR_FSUM_NEGZERO, why, sizeof(why)) == -EINVAL);
	CHECK(gr_fsum_from_wire(&x, 2, one, 8, 0, GR_FSUM_NEGZERO, why, sizeof(why)) == -EINVAL);
	CHECK(strstr(why, "every element -0"));
	CHECK(gr_fsum_from_wire(&x, 2, NULL, 0, 0, GR_FSUM_NEGZERO | GR_FSUM_NAN, why,
				 sizeof(why)) == -EINVAL);
	/* zero limbs are zero, whatever their number and scale */
	uint8_t zeros[16] = { 0 };
	CHECK(gr_fsum_from_wire(&x, 2, zeros, 16, 77, GR_FSUM_NEGZERO, why, sizeof(why)) == 0);
	CHECK(x.nlimbs == 0 && x.scale == 0 && same(gr_fsum_round(&x), -0.0));
	/* why may be NULL */
	CHECK(gr_fsum_from_wire(&x, 1, one, 7, 0, 0, NULL, 0) == -EINVAL);
}

/* ---- random partials against an independent sum -------------------------- */

/* The independent sum: a two's complement grid of TW words, bit 0 2^-TBASE. */
#define TW 80
#define TBASE 2240

static void t_add_word(uint64_t *a, unsigned __int128 v, unsigned w, bool neg)
{
	uint64_t d[2] = { (uint64_t)v, (uint64_t)(v >> 64) }, c = 0;

	for (unsigned k = w; k < TW; k++) {
		uint64_t x = k - w < 2 ? d[k - w] : 0, o = a[k], t;

		if (k - w >= 2 && !c)
			break;
		if (!neg) {
			t = o + x;
			uint64_t c1 = t < o;
			a[k] = t + c;
			c = c1 | (a[k] < t);
		} else {
			t = o - x;
			uint64_t c1 = o < x;
			a[k] = t - c;
			c = c1 | (t < c);
		}
	}
}

/* a += w[0..n) x 2^scale, w two's complement */
static void t_add(uint64_t *a, const uint64_t *w, size_t n, int scale)
{
	uint64_t mag[GR_FSUM_LIMBS_MAX];
	bool neg = n && w[n - 1] >> 63;
	unsigned off = (unsigned)(scale + TBASE);

	memcpy(mag, w, n * sizeof(*w));
	if (neg) {
		uint64_t c = 1;
		for (size_t k = 0; k < n; k++) {
			mag[k] = ~mag[k] + c;
			c = c && mag[k] == 0;
		}
	}
	for (size_t k = 0; k < n; k++)
		t_add_word(a, (unsigned __int128)mag[k] << (off % 64), off / 64 + (unsigned)k, neg);
}

static double t_round(const uint64_t *acc)
{
	uint64_t a[TW];
	bool neg = acc[TW - 1] >> 63;
	char hex[TW * 16 + 32], *p = hex;
	int top;

	memcpy(a, acc, sizeof(a));
	if (neg) {
		uint64_t c = 1;
		for (unsigned k = 0; k < TW; k++) {
			a[k] = ~a[k] + c;
			c = c && a[k] == 0;
		}
	}
	for (top = TW - 1; top >= 0 && !a[top]; top--)
		;
	if (top < 0)
		return 0.0;
	p += sprintf(p, "%s0x%" PRIx64, neg ? "-" : "", a[top]);
	for (int k = top - 1; k >= 0; k--)
		p += sprintf(p, "%016" PRIx64, a[k]);
	sprintf(p, "p-%d", TBASE);
	return strtod(hex, NULL);
}

static uint64_t rnd(uint64_t *s)
{
	return check_rng(s);
}

/* A random valid partial: few or many words of random patterns at a
 * random scale, sometimes specials. */
static void random_partial(uint64_t *s, gr_fsum *x)
{
	for (;;) {
		unsigned n = rnd(s) % 8 == 0 ? (unsigned)(rnd(s) % 69) : (unsigned)(rnd(s) % 4);

		gr_fsum_init(x);
		x->count = 1 + rnd(s) % 1000;
		x->nlimbs = n;
		for (unsigned k = 0; k < n; k++) {
			switch (rnd(s) % 4) {
			case 0: x->limbs[k] = 0; break;
			case 1: x->limbs[k] = UINT64_MAX; break;
			case 2: x->limbs[k] = rnd(s) >> (rnd(s) % 64); break;
			default: x->limbs[k] = rnd(s); break;
			}
		}
		/* scales near the ends of the range and near a double's */
		switch (rnd(s) % 4) {
		case 0: x->scale = GR_FSUM_SCALE_MIN + (int32_t)(rnd(s) % 130); break;
		case 1: x->scale = (int32_t)(rnd(s) % 2200) - 1150; break;
		case 2: x->scale = GR_FSUM_SCALE_MAX + 1 - 64 * (int32_t)n - (int32_t)(rnd(s) % 3); break;
		default:
			x->scale = GR_FSUM_SCALE_MIN + (int32_t)(rnd(s) % (GR_FSUM_SCALE_MAX -
									    GR_FSUM_SCALE_MIN + 1));
		}
		if (rnd(s) % 16 == 0)
			x->specials = (uint32_t)(rnd(s) % 8);
		if (gr_fsum_check(x, NULL, 0) == 0)
			return;
	}
}

static bool exact_equal(const gr_fsum *a, const gr_fsum *b)
{
	return a->count == b->count && a->scale == b->scale && a->specials == b->specials &&
	       a->nlimbs == b->nlimbs && memcmp(a->limbs, b->limbs, sizeof(a->limbs)) == 0;
}

static void check_canonical(const gr_fsum *x)
{
	CHECK(gr_fsum_check(x, NULL, 0) == 0);
	for (unsigned k = x->nlimbs; k < GR_FSUM_LIMBS_MAX; k++)
		CHECK(x->limbs[k] == 0);
	if (x->nlimbs == 0) {
		CHECK(x->scale == 0);
		return;
	}
	CHECK(x->limbs[0] & 1);
	if (x->nlimbs >= 2) {
		uint64_t top = x->limbs[x->nlimbs - 1], below = x->limbs[x->nlimbs - 2];
		CHECK(!(top == 0 && !(below >> 63)) && !(top == UINT64_MAX && (below >> 63)));
	}
}

static void test_random(void)
{
	uint64_t s = 0x0123456789abcdefull;
	unsigned ranged = 0, rounded = 0;

	for (unsigned it = 0; it < 20000; it++) {
		gr_fsum a, b, c, ab, ba, abc1, abc2;
		uint64_t sum[TW] = { 0 }, got[TW] = { 0 };

		random_partial(&s, &a);
		random_partial(&s, &b);
		random_partial(&s, &c);
		if (it % 16 == 0)
			b = a; /* twice a large one leaves the range */

		/* canonical form keeps the value */
		ab = a;
		CHECK(gr_fsum_canonical(&ab, NULL, 0) == 0);
		check_canonical(&ab);
		t_add(sum, a.limbs, a.nlimbs, a.scale);
		t_add(got, ab.limbs, ab.nlimbs, ab.scale);
		CHECK(memcmp(sum, got, sizeof(sum)) == 0);
		CHECK(same(gr_fsum_round(&a), gr_fsum_round(&ab)));

		ab = a;
		ba = b;
		int r1 = gr_fsum_combine(&ab, &b), r2 = gr_fsum_combine(&ba, &a);
		CHECK(r1 == r2);
		if (r1 == -ERANGE) {
			ranged++;
			continue;
		}
		CHECK(r1 == 0);
		check_canonical(&ab);
		CHECK(exact_equal(&ab, &ba));

		/* the value is the sum */
		memset(sum, 0, sizeof(sum));
		memset(got, 0, sizeof(got));
		t_add(sum, a.limbs, a.nlimbs, a.scale);
		t_add(sum, b.limbs, b.nlimbs, b.scale);
		t_add(got, ab.limbs, ab.nlimbs, ab.scale);
		CHECK_MSG(memcmp(sum, got, sizeof(sum)) == 0, "iteration %u", it);
		CHECK(ab.count == a.count + b.count);
		if (!(ab.specials & (GR_FSUM_NAN | GR_FSUM_PINF | GR_FSUM_NINF))) {
			double want = t_round(sum), have = gr_fsum_round(&ab);
			/* an exact zero: -0 only when both pieces were all -0 */
			CHECK((ab.specials & GR_FSUM_NEGZERO) ==
			      (a.specials & b.specials & GR_FSUM_NEGZERO));
			if (ab.nlimbs == 0)
				want = ab.specials & GR_FSUM_NEGZERO ? -0.0 : 0.0;
			CHECK_MSG(same(have, want), "iteration %u: %a, strtod says %a", it, have, want);
			rounded++;
		}

		/* associative */
		abc1 = ab;
		if (gr_fsum_combine(&abc1, &c) != 0)
			continue;
		gr_fsum bc = b;
		if (gr_fsum_combine(&bc, &c) != 0)
			continue;
		abc2 = a;
		CHECK(gr_fsum_combine(&abc2, &bc) == 0);
		CHECK(exact_equal(&abc1, &abc2));
	}
	printf("%u rounded against strtod, %u combinations out of range\n", rounded, ranged);
	CHECK(rounded > 10000 && ranged > 0);

	/* the empty partial is the identity; an invalid one changes nothing */
	gr_fsum e, a, keep;
	gr_fsum_init(&e);
	random_partial(&s, &a);
	keep = a;
	CHECK(gr_fsum_canonical(&keep, NULL, 0) == 0);
	CHECK(gr_fsum_combine(&a, &e) == 0 && exact_equal(&a, &keep));
	CHECK(gr_fsum_combine(&e, &a) == 0 && exact_equal(&e, &keep));
	gr_fsum bad = keep;
	bad.specials |= 32;
	CHECK(gr_fsum_combine(&a, &bad) == -EINVAL && exact_equal(&a, &keep));
	bad = keep;
	bad.nlimbs = GR_FSUM_LIMBS_MAX + 1;
	CHECK(gr_fsum_combine(&bad, &a) == -EINVAL);
	/* counts past 2^64 - 1 */
	bad = keep;
	bad.count = UINT64_MAX;
	CHECK(gr_fsum_combine(&bad, &a) == -ERANGE && bad.count == UINT64_MAX);
}

int main(void)
{
	test_request_bytes();
	test_read_back();
	test_malformed();
	test_random();
	return 0;
}
