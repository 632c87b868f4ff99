/*
 * A reduction's partial: the running state of one op over some elements,
 * and the exact accumulator inside it that float sums, sums of squares and
 * moments keep (xsum.c). reduce.h starts, combines and finishes partials;
 * what is here also folds in values computed elsewhere (a device's digits,
 * a partial from the wire) and exports the exact value as limbs.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/types.h"

/* The elements one block partial covers at most: arrays are reduced
 * block by block (reduce.h). */
#define GR_REDUCE_BLOCK 32768u
/* Chunk sizes must be multiples of this many bytes. */
#define GR_REDUCE_ALIGN_BYTES ((size_t)GR_REDUCE_BLOCK * 8u)

/*
 * The exact accumulator: a 4352-bit two's complement fixed-point number
 * whose bit 0 weighs 2^GR_PARTIAL_EXP_MIN. It holds every finite double,
 * every exact square of one (down to 2^-2148) and sums of 2^64 of them
 * (below 2^2112); values must stay below 2^GR_PARTIAL_EXP_MAX in
 * magnitude.
 */
#define GR_PARTIAL_XWORDS 68
#define GR_PARTIAL_EXP_MIN (-2176)
#define GR_PARTIAL_EXP_MAX 2175

/* Flags of gr_partial_add_special() and gr_partial_limbs(). */
enum {
	GR_PARTIAL_NAN = 1u << 0,     /* a NaN was folded in */
	GR_PARTIAL_PINF = 1u << 1,    /* a +inf (for sumsq: any infinity) */
	GR_PARTIAL_NINF = 1u << 2,    /* a -inf */
	GR_PARTIAL_SEEN = 1u << 3,    /* add_special only: an element other than -0.0 */
	GR_PARTIAL_NEGZERO = 1u << 4, /* limbs only: count >= 1 and every element -0.0 */
};

/*
 * A reduction's running state over some elements. Which member of v holds
 * it depends on op and dtype:
 *   sum of i32/i64/u32/u64: u, wrapping 64-bit (exact for i32/u32)
 *   sum of f32/f64, sumsq of anything: f and xacc, see below
 *   min/max of i32/i64: i; of u32/u64: u; of f32/f64: f (NaN propagates)
 *   argmin/argmax: v as min/max, and index, the index of the first element
 *     (counted from the partial's own first element) whose bits equal v's
 *     (as the dtype), or of the first NaN when v.f is NaN
 *   moments: the exact sum of the elements in f, xflags and xacc as a float
 *     sum's, for every dtype (integers are exact fixed-point values there
 *     too, never specials, and always "seen"); the exact sum of their
 *     squares in x2acc and x2flags, always an exact partial (no double
 *     beside it) with a float sumsq's specials; lo and hi as min's and
 *     max's v
 *
 * Float sums and sumsq: while xflags is zero the whole value is v.f (a
 * double; -0.0 counts as "every element was -0.0") and xacc is neither
 * read nor trusted, so a backend may fill a partial by hand: zero the
 * whole struct (or at least xflags), then set count and v.f. Otherwise the
 * value is the exact xacc * 2^GR_PARTIAL_EXP_MIN + v.f plus the specials
 * in xflags, whose bits are private to reduce.c: gr_partial_identity()
 * gives such a partial, the block kernels fill xacc, and
 * gr_partial_combine() turns both sides into xacc and adds them. A value
 * can therefore be held two ways (a plain double, as the f32 narrow path
 * leaves it, or in xacc): compare partials by their value
 * (gr_partial_limbs()), not byte for byte.
 */
typedef union gr_pvalue {
	int64_t i;
	uint64_t u;
	double f;
} gr_pvalue;

typedef struct gr_partial {
	uint64_t count;
	gr_pvalue v;
	uint64_t index;                   /* argmin, argmax: see below */
	uint64_t xflags;                  /* specials, "seen", xacc in use */
	uint64_t xacc[GR_PARTIAL_XWORDS]; /* two's complement, little word first */
	/* moments only (zero for the other ops): see above */
	gr_pvalue lo, hi;
	uint64_t x2flags;
	uint64_t x2acc[GR_PARTIAL_XWORDS];
} gr_partial;

/*
 * Folding results computed elsewhere (a device's exact kernel, a partial
 * sent over the wire) into the partial of a float sum or sumsq: start
 * from gr_partial_identity() and set count to the number of elements the
 * value covers (gr_partial_combine() treats a partial of count 0 as
 * empty); none of these functions touch count.
 */

/*
 * Add digit * 2^exp2 exactly. exp2 must lie in [GR_PARTIAL_EXP_MIN,
 * GR_PARTIAL_EXP_MAX - 63] (-2176 ... 2112); the running value must stay
 * below 2^GR_PARTIAL_EXP_MAX. A non-zero digit also marks the partial as
 * having seen an element other than -0.0 (GR_PARTIAL_SEEN). Returns 0, or
 * -ERANGE (nothing added) when exp2 is out of range and digit is not 0.
 */
int gr_partial_add_scaled(gr_partial *p, int64_t digit, int exp2);

/*
 * Fold specials into p: any of GR_PARTIAL_NAN, GR_PARTIAL_PINF,
 * GR_PARTIAL_NINF and GR_PARTIAL_SEEN. A device whose elements were not
 * all -0.0 must pass GR_PARTIAL_SEEN even when its digits summed to zero;
 * without it, an exact zero finishes as -0.0.
 */
void gr_partial_add_special(gr_partial *p, unsigned flags);

/* Words gr_partial_limbs() may need, at most. */
#define GR_PARTIAL_LIMBS_MAX GR_PARTIAL_XWORDS

/*
 * Export p's exact value as words[0..n) (a little-endian two's complement
 * integer, n as small as it can be, 0 for zero) times 2^*ret_scale, and
 * its specials as GR_PARTIAL_NAN, _PINF, _NINF and _NEGZERO in *ret_flags.
 * Returns n; writes words only when n <= max (GR_PARTIAL_LIMBS_MAX is
 * always enough), *ret_scale and *ret_flags always.
 */
size_t gr_partial_limbs(const gr_partial *p, uint64_t *words, size_t max, int *ret_scale,
                        unsigned *ret_flags);

/*
 * The inverse: *ret becomes the partial of count elements whose exact
 * value is words[0..n) * 2^scale plus flags (as gr_partial_limbs() gives
 * them). Returns 0, or -EINVAL with *ret untouched when n exceeds
 * GR_PARTIAL_LIMBS_MAX, scale lies outside [GR_PARTIAL_EXP_MIN,
 * GR_PARTIAL_EXP_MAX], the value does not fit the accumulator, flags has
 * unknown bits, GR_PARTIAL_NEGZERO comes with a non-zero value or count 0,
 * or count is 0 and anything else is not zero.
 */
int gr_partial_from_limbs(gr_partial *ret, uint64_t count, const uint64_t *words, size_t n,
                          int scale, unsigned flags);

/* partial.c */
/* The partial of no elements. */
void gr_partial_identity(gr_op op, gr_dtype dt, gr_partial *ret);
/* acc = acc (+) next, where next covers the elements right after acc's. */
void gr_partial_combine(gr_op op, gr_dtype dt, gr_partial *acc, const gr_partial *next);
/* The wire result: GR_OK, or GR_ERR_EMPTY for min/max/argmin/argmax/moments
 * of no elements. argmin's and argmax's index is p->index; moments' value
 * is its sum (gr_moments_finish() gives the whole result). */
gr_err gr_partial_finish(gr_op op, gr_dtype dt, const gr_partial *p, gr_value *ret);

/*
 * moments' result (PROTOCOL.md, "moments") from its partial, with ddof
 * delta degrees of freedom: GR_OK; GR_ERR_EMPTY when p counts no
 * elements; GR_ERR_INVALID_PARAMS when ddof is not below the count (the
 * request parser refuses those already). mean and var are the exact
 * values rounded once (math/moments.c).
 */
gr_err gr_moments_finish(gr_dtype dt, const gr_partial *p, uint64_t ddof, gr_moments *ret);
