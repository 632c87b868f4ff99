/*
 * Exact partials as they travel: checked, made canonical, combined and
 * rounded on a fixed grid, the accumulator's number (wide.h) of XW words
 * whose bit 0 weighs 2^GR_FSUM_SCALE_MIN: one word more than the range
 * needs, so that the sum of two values in range cannot wrap, and the range
 * check comes after the addition.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "math/fsum.h"
#include "math/wide.h"

#define XW (GR_FSUM_LIMBS_MAX + 1)
/* Bits a value in range takes, sign included, on the grid. */
#define RANGE_BITS (64L * GR_FSUM_LIMBS_MAX)

__attribute__((format(printf, 3, 4)))
static int fail(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	if (why && size) {
		va_start(ap, fmt);
		vsnprintf(why, size, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static uint64_t sign_word(const uint64_t *w, size_t n)
{
	return n && (w[n - 1] >> 63) ? UINT64_MAX : 0;
}

/* Word i of w[0..n) sign-extended upwards, with zeros below word 0. */
static uint64_t word_at(const uint64_t *w, size_t n, uint64_t sign, long i)
{
	if (i < 0)
		return 0;
	return (size_t)i < n ? w[i] : sign;
}

/* The 64 bits from bit pos (which may be negative) of w[0..n), as word_at(). */
static uint64_t bits_at(const uint64_t *w, size_t n, uint64_t sign, long pos)
{
	/* floor division for negative positions too */
	long i = (pos + 64L * 128) / 64 - 128;
	unsigned b = (unsigned)(pos - 64 * i);
	uint64_t lo = word_at(w, n, sign, i);

	if (b == 0)
		return lo;
	return lo >> b | word_at(w, n, sign, i + 1) << (64 - b);
}

static bool is_zero(const uint64_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (w[i])
			return false;
	return true;
}

/* The fewest bits, sign included, of a two's complement that holds w[0..n). */
static long tc_bits(const uint64_t *w, size_t n)
{
	uint64_t sign = sign_word(w, n);
	size_t t = n;

	while (t > 0 && w[t - 1] == sign)
		t--;
	if (t == 0)
		return 1;
	return 64L * (long)(t - 1) + (64 - __builtin_clzll(w[t - 1] ^ sign)) + 1;
}

/* The lowest set bit of w[0..n), which is not zero. */
static long low_bit(const uint64_t *w, size_t n)
{
	size_t i = 0;

	while (!w[i])
		i++;
	return 64L * (long)i + __builtin_ctzll(w[i]);
}

void gr_fsum_init(gr_fsum *ret)
{
	memset(ret, 0, sizeof(*ret));
}

int gr_fsum_check(const gr_fsum *x, char *why, size_t size)
{
	bool zero;

	if (x->nlimbs > GR_FSUM_LIMBS_MAX)
		return fail(why, size, "%" PRIu32 " limbs, more than %d", x->nlimbs,
			    GR_FSUM_LIMBS_MAX);
	if (x->scale < GR_FSUM_SCALE_MIN || x->scale > GR_FSUM_SCALE_MAX)
		return fail(why, size, "scale %" PRId32 " outside %d..%d", x->scale,
			    GR_FSUM_SCALE_MIN, GR_FSUM_SCALE_MAX);
	if (x->specials & ~(uint32_t)GR_FSUM_SPECIALS)
		return fail(why, size, "unknown specials bits 0x%" PRIx32,
			    x->specials & ~(uint32_t)GR_FSUM_SPECIALS);
	zero = is_zero(x->limbs, x->nlimbs);
	if (!zero && (x->scale - GR_FSUM_SCALE_MIN) + tc_bits(x->limbs, x->nlimbs) > RANGE_BITS)
		return fail(why, size, "value out of range: at least 2^%d in magnitude",
			    GR_FSUM_SCALE_MAX);
	if (x->count == 0 && (!zero || x->specials))
		return fail(why, size, "no elements, yet a non-zero value or specials");
	if ((x->specials & GR_FSUM_NEGZERO) && (x->specials != GR_FSUM_NEGZERO || !zero))
		return fail(why, size, "every element -0, yet a non-zero value, a NaN or an infinity");
	return 0;
}

/* The value of a valid x on the grid. */
static void grid_place(uint64_t *a, const gr_fsum *x)
{
	uint64_t sign = sign_word(x->limbs, x->nlimbs);
	long o = x->scale - GR_FSUM_SCALE_MIN;

	for (long k = 0; k < XW; k++)
		a[k] = bits_at(x->limbs, x->nlimbs, sign, 64 * k - o);
}

/* The value on the grid as x's canonical limbs and scale; -ERANGE when it
 * is out of range (x untouched). */
static int grid_export(const uint64_t *a, gr_fsum *x)
{
	uint64_t sign = sign_word(a, XW);
	long len, low;
	size_t n;

	if (is_zero(a, XW)) {
		memset(x->limbs, 0, sizeof(x->limbs));
		x->nlimbs = 0;
		x->scale = 0;
		return 0;
	}
	len = tc_bits(a, XW);
	if (len > RANGE_BITS)
		return -ERANGE;
	low = low_bit(a, XW);
	n = (size_t)(len - low + 63) / 64;
	for (size_t k = 0; k < GR_FSUM_LIMBS_MAX; k++)
		x->limbs[k] = k < n ? bits_at(a, XW, sign, low + 64 * (long)k) : 0;
	x->nlimbs = (uint32_t)n;
	x->scale = (int32_t)(GR_FSUM_SCALE_MIN + low);
	return 0;
}

int gr_fsum_canonical(gr_fsum *x, char *why, size_t size)
{
	uint64_t a[XW];
	int r = gr_fsum_check(x, why, size);

	if (r < 0)
		return r;
	grid_place(a, x);
	/* a valid value is in range */
	return grid_export(a, x);
}

int gr_fsum_from_wire(gr_fsum *ret, uint64_t count, const uint8_t *limbs, size_t nbytes,
		       int64_t scale, uint64_t specials, char *why, size_t size)
{
	gr_fsum x = { .count = count };
	int r;

	if (nbytes % 8)
		return fail(why, size, "limbs of %zu bytes, not a multiple of 8", nbytes);
	if (nbytes / 8 > GR_FSUM_LIMBS_MAX)
		return fail(why, size, "limbs of %zu words, more than %d", nbytes / 8,
			    GR_FSUM_LIMBS_MAX);
	if (scale < GR_FSUM_SCALE_MIN || scale > GR_FSUM_SCALE_MAX)
		return fail(why, size, "scale %" PRId64 " outside %d..%d", scale, GR_FSUM_SCALE_MIN,
			    GR_FSUM_SCALE_MAX);
	if (specials & ~(uint64_t)GR_FSUM_SPECIALS)
		return fail(why, size, "unknown specials bits 0x%" PRIx64,
			    specials & ~(uint64_t)GR_FSUM_SPECIALS);
	x.nlimbs = (uint32_t)(nbytes / 8);
	x.scale = (int32_t)scale;
	x.specials = (uint32_t)specials;
	for (size_t i = 0; i < x.nlimbs; i++) {
		uint64_t w = 0;

		for (unsigned k = 0; k < 8; k++)
			w |= (uint64_t)limbs[8 * i + k] << (8 * k);
		x.limbs[i] = w;
	}
	r = gr_fsum_canonical(&x, why, size);
	if (r < 0)
		return r;
	*ret = x;
	return 0;
}

int gr_fsum_parse(const gr_obj *result, uint64_t count, gr_fsum *ret, char *why, size_t size)
{
	const gr_obj *ex = gr_obj_get(result, "exact"), *limbs, *scale, *specials;
	int64_t s;

	if (!ex || ex->type != GR_MP_MAP) {
		fail(why, size, ex ? "\"exact\" is not a map" : "no \"exact\" map");
		return -EBADMSG;
	}
	limbs = gr_obj_get(ex, "limbs");
	scale = gr_obj_get(ex, "scale");
	specials = gr_obj_get(ex, "specials");
	if (!limbs || !scale || !specials) {
		fail(why, size, "\"exact\" without \"%s\"",
		     !limbs ? "limbs" : !scale ? "scale" : "specials");
		return -EBADMSG;
	}
	if (limbs->type != GR_MP_BIN) {
		fail(why, size, "\"limbs\" is not a bin");
		return -EBADMSG;
	}
	if (scale->type == GR_MP_INT) {
		s = scale->v.i;
	} else if (scale->type == GR_MP_UINT) {
		/* past the range either way */
		s = scale->v.u > INT64_MAX ? INT64_MAX : (int64_t)scale->v.u;
	} else {
		fail(why, size, "\"scale\" is not an integer");
		return -EBADMSG;
	}
	if (specials->type != GR_MP_UINT) {
		fail(why, size, "\"specials\" is not an unsigned integer");
		return -EBADMSG;
	}
	if (gr_fsum_from_wire(ret, count, (const uint8_t *)limbs->v.str, limbs->len, s,
			       specials->v.u, why, size) < 0)
		return -EBADMSG;
	return 0;
}

int gr_fsum_combine(gr_fsum *acc, const gr_fsum *next)
{
	uint64_t a[XW], b[XW];
	gr_fsum t;
	int r;

	if (gr_fsum_check(acc, NULL, 0) < 0 || gr_fsum_check(next, NULL, 0) < 0)
		return -EINVAL;
	if (next->count == 0 || acc->count == 0) {
		t = next->count == 0 ? *acc : *next;
		r = gr_fsum_canonical(&t, NULL, 0);
		if (r < 0)
			return r;
		*acc = t;
		return 0;
	}
	if (acc->count > UINT64_MAX - next->count)
		return -ERANGE;
	grid_place(a, acc);
	grid_place(b, next);
	gr_wide_add(a, b, XW);
	t.count = acc->count + next->count;
	t.specials = (acc->specials | next->specials) & (GR_FSUM_NAN | GR_FSUM_PINF | GR_FSUM_NINF);
	/* both have elements */
	t.specials |= acc->specials & next->specials & GR_FSUM_NEGZERO;
	r = grid_export(a, &t);
	if (r < 0)
		return r;
	*acc = t;
	return 0;
}

double gr_fsum_round(const gr_fsum *x)
{
	uint64_t a[XW];

	if ((x->specials & GR_FSUM_NAN) ||
	    (x->specials & (GR_FSUM_PINF | GR_FSUM_NINF)) == (GR_FSUM_PINF | GR_FSUM_NINF))
		return NAN;
	if (x->specials & GR_FSUM_PINF)
		return INFINITY;
	if (x->specials & GR_FSUM_NINF)
		return -INFINITY;
	grid_place(a, x);
	if (is_zero(a, XW))
		return x->specials & GR_FSUM_NEGZERO ? -0.0 : 0.0;
	return gr_wide_round(a, XW, GR_FSUM_SCALE_MIN);
}
