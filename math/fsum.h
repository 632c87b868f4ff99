/*
 * Exact partials of float sums, as they travel (PROTOCOL.md, "Exact
 * partials"): the exact value of a float sum or sumsq before rounding,
 * limbs x 2^scale with limbs a two's complement integer of 64-bit words,
 * least significant first, and its specials. A client reads them from
 * reduce's "exact" map, adds those of the pieces of an array at a common
 * scale, and rounds the total once; the result is the bits one request
 * over the whole array gives. (The CUDA engine's gr_exact_ names are its
 * kernels' digits, another thing.)
 *
 * The range: every value here is a multiple of 2^GR_FSUM_SCALE_MIN that
 * fits GR_FSUM_LIMBS_MAX words of two's complement at that scale, that
 * is -2^2175 <= v < 2^2175. The exact sum or sumsq of up to 2^64 f32 or
 * f64 elements always does: its terms are multiples of 2^-2148 (the
 * least f64 subnormal squared) below 2^2048 (the largest f64 squared),
 * so the sum stays below 2^2112. This is also the daemon's accumulator.
 *
 * No I/O, no allocation: the daemon may share it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/obj.h"

#define GR_FSUM_LIMBS_MAX 68
#define GR_FSUM_SCALE_MIN (-2176)
#define GR_FSUM_SCALE_MAX 2175

/* "specials" bits */
enum {
	GR_FSUM_NAN = 1u << 0,     /* a NaN was among the elements */
	GR_FSUM_PINF = 1u << 1,    /* a +inf (for sumsq: any infinity) */
	GR_FSUM_NINF = 1u << 2,    /* a -inf */
	GR_FSUM_NEGZERO = 1u << 4, /* at least one element, and every one -0 */
	GR_FSUM_SPECIALS = GR_FSUM_NAN | GR_FSUM_PINF | GR_FSUM_NINF | GR_FSUM_NEGZERO,
};

/*
 * A partial: the exact value limbs[0..nlimbs) x 2^scale of count elements,
 * and their specials. gr_fsum_check() says what makes one valid. The
 * functions below return canonical partials: zero is nlimbs 0 and scale 0;
 * any other value has an odd limbs[0] and no top word that only repeats
 * the sign of the one below; limbs past nlimbs are 0. Equal values then
 * have equal limbs and scale.
 */
typedef struct gr_fsum {
	uint64_t count;
	int32_t scale;
	uint32_t specials;
	uint32_t nlimbs;
	uint64_t limbs[GR_FSUM_LIMBS_MAX];
} gr_fsum;

/* The partial of no elements. */
void gr_fsum_init(gr_fsum *ret);

/*
 * Whether x is a partial: nlimbs at most GR_FSUM_LIMBS_MAX, scale within
 * [GR_FSUM_SCALE_MIN, GR_FSUM_SCALE_MAX], the value within the range
 * above, no specials bits but GR_FSUM_SPECIALS, nothing but a zero value
 * and no specials when count is 0, and GR_FSUM_NEGZERO only alone and
 * with a zero value. 0, or -EINVAL and a description of the first rule
 * broken in why[0..size) (NUL-terminated; why may be NULL).
 */
int gr_fsum_check(const gr_fsum *x, char *why, size_t size);

/*
 * Make a valid x canonical (see gr_fsum). 0, or -EINVAL as
 * gr_fsum_check() says, x untouched.
 */
int gr_fsum_canonical(gr_fsum *x, char *why, size_t size);

/*
 * The partial of count elements whose wire form is limbs (nbytes bytes of
 * little-endian 64-bit words), scale and specials, canonical. nbytes must
 * be a multiple of 8. 0, or -EINVAL with why, as gr_fsum_check().
 */
int gr_fsum_from_wire(gr_fsum *ret, uint64_t count, const uint8_t *limbs, size_t nbytes,
		       int64_t scale, uint64_t specials, char *why, size_t size);

/*
 * The partial in a reduce result map of count elements: its "exact" map
 * must hold "limbs" (a bin), "scale" (an integer) and "specials" (an
 * unsigned integer); other keys are ignored. 0, or -EBADMSG with why when
 * it is absent, malformed or not a valid partial.
 */
int gr_fsum_parse(const gr_obj *result, uint64_t count, gr_fsum *ret, char *why, size_t size);

/*
 * acc = acc + next, the partial of both pieces' elements, in either
 * order: values added exactly, NaN and infinity bits or'ed, and
 * GR_FSUM_NEGZERO kept only when every piece with elements had it.
 * A piece of no elements changes nothing. 0 (acc canonical), -EINVAL when
 * either is not valid, or -ERANGE when the count passes 2^64 - 1 or the
 * value leaves the range; acc is untouched on failure.
 */
int gr_fsum_combine(gr_fsum *acc, const gr_fsum *next);

/*
 * The value of a valid partial rounded once to a double: NaN when a NaN
 * was among the elements or +inf and -inf both were; else +inf or -inf
 * when one was; else the exact value rounded to nearest, ties to even,
 * +-inf past the largest finite double. A zero value is -0.0 when
 * GR_FSUM_NEGZERO is set, else +0.0; a non-zero value too small for the
 * least subnormal rounds to a zero of its sign.
 */
double gr_fsum_round(const gr_fsum *x);
