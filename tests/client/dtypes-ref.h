/*
 * The narrow dtypes' exact reference for test-client-dtypes (dtypes-ref.c):
 * the elements decoded by the formats' definitions, their sums kept in a
 * 2048-bit fixed-point integer, every float result rounded once from it,
 * and the checks of libgpured's answers against it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/gpured.h"
#include "tests/client/daemon-harness.h"
#include "tests/narrow-formats.h"

extern const gpured_dtype floats[4], ints[4];

/*
 * A two's complement integer of BIG_WORDS words, least significant first.
 * Sums keep their value as big * 2^ACC_LSB: bit 0 is below the least
 * square (bf16's 2^-133, squared) and the top far above the largest sum
 * of squares (2^256 a square, 2^24 of them).
 */
#define BIG_WORDS 32
#define ACC_LSB (-300)

typedef struct big {
	uint64_t w[BIG_WORDS];
} big;

/* What reduce (op of dt, over data) must answer. */
typedef struct expect {
	int err;
	gpured_value v;
	gpured_moments m;
} expect;

/* results checked against the reference, told at the end */
extern unsigned long checked;

/* a += m 2^e (a negative term when neg), exactly */
void big_add_scaled(big *a, uint64_t m, int e, bool neg);
/* a 2^scale rounded once to a double, to nearest, ties to even */
double big_round_signed(const big *a, int scale);
/* Every op of dt over data, by data and from a region at an odd offset,
 * against the reference. */
void check_all(gpured_t *g, gpured_dtype dt, const void *data, size_t n, const char *label);
/* One answer (r, v) against what e says. */
void check_value(const char *what, const expect *e, int r, const gpured_value *v, gpured_t *g);
/* bits of an element of dt */
unsigned dt_bits(gpured_dtype dt);
/* element i of data, decoded */
test_value element(gpured_dtype dt, const void *data, size_t i);
/* what op of dt over data must answer */
expect expected(gpured_op op, gpured_dtype dt, const void *data, size_t n, uint64_t ddof);
bool is_float_dt(gpured_dtype dt);
/* element i of data becomes the bits b */
void put_at(gpured_dtype dt, void *data, size_t i, uint32_t b);
/* the same bits, or both NaN */
bool same_f(double a, double b);
/* the bits of element i of data */
uint32_t raw_at(gpured_dtype dt, const void *data, size_t i);

/* test-client-dtypes.c: the scenarios' random generator, and room for n
 * elements of dt */
extern rng the_rng;
void *alloc_elems(gpured_dtype dt, size_t n);

/* dtypes-cumsum-ctl.c's scenarios: prefix sums against sums exact in a
 * double, and gpuredctl's --dtype */
void test_cumsum(void);
void test_ctl(void);
