/*
 * What the CPU reduction's tests share: seeded data in every dtype, the
 * references they check math/reduce.c against (written here,
 * independently of it: naive loops in wider types, exact integers and
 * long double floats within a bound; an exact sum, Shewchuk's partials,
 * that float sums and sumsq of f32/f64 must match bit for bit; a plain
 * scalar transcription of the block shape of integer sumsq), and a runner
 * that counts the checks of each part.
 */
#pragma once

/* The transcription in reduce-check.c must round x * x + acc twice, as
 * reduce.c does; the tests' own arithmetic follows the same rule. */
#ifdef __clang__
#pragma clang fp contract(off)
#else
#pragma GCC optimize("fp-contract=off")
#endif

#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"
#include "math/reduce.h"

/* Every check counts: a change to the tests can show that none was lost. */
extern unsigned long checks;
#undef CHECK_MSG
#define CHECK_MSG(cond, ...)                                                                       \
	do {                                                                                       \
		checks++;                                                                          \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Same double, bit for bit (so -0 != +0, and NaN == NaN). */
#define CHECK_BITS(got, want, ...)                                                                 \
	do {                                                                                       \
		double g_ = (got), w_ = (want);                                                    \
		bool ok_ = bits_of(g_) == bits_of(w_) || (isnan(g_) && isnan(w_));                 \
		if (!ok_)                                                                          \
			fprintf(stderr, "got %a, want %a: ", g_, w_);                              \
		CHECK_MSG(ok_, __VA_ARGS__);                                                       \
	} while (0)

/* The seeded generator; every part starts from RNG_SEED. */
#define RNG_SEED 0x9e3779b97f4a7c15ull
extern uint64_t rng_state;
uint64_t rng(void);
/* x[0..n) in an order drawn from rng(). */
void shuffle(double *x, size_t n);

extern const char *const op_names[];
extern const char *const dt_names[];

size_t esize(gr_dtype dt);
bool is_float(gr_dtype dt);
/* Element i of an array of dtype dt: in the widest type of its kind; as
 * the reduction sees it for sumsq (converted to double); as integers. */
long double get_ld(gr_dtype dt, const unsigned char *p, size_t i);
double get_d(gr_dtype dt, const unsigned char *p, size_t i);
int64_t get_i(gr_dtype dt, const unsigned char *p, size_t i);
uint64_t get_u(gr_dtype dt, const unsigned char *p, size_t i);
/* n random elements of dt at p (small: integers in [-1000, 1000], floats
 * within a few binades). */
void fill(gr_dtype dt, unsigned char *p, size_t n, bool small);
/* n copies of the element whose bits are bits. */
void fill_const(gr_dtype dt, unsigned char *p, size_t n, uint64_t bits);
/* Element i of a float array becomes x (rounded to float for f32). */
void put_f(gr_dtype dt, unsigned char *p, size_t i, double x);
bool same_bits(const gr_partial *a, const gr_partial *b);
uint64_t bits_of(double x);
/* The finished value of a partial, checked to be GR_OK of the right kind. */
gr_value finish(gr_op op, gr_dtype dt, const gr_partial *p);
/* gr_reduce() and finish(): as a double (float results), as a value. */
double reduce_f(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);
gr_value reduce_v(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);

/* The exact sum of n finite doubles, rounded once. */
double exact_sum(const double *x, size_t n);
/* gr_reduce() against the naive reference (float sums within a bound). */
void check_against_naive(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);
/* Float results and every sumsq against the canonical shape, bit for bit. */
void check_canonical(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);
/* Chunks of whole blocks, combined, give the whole array's partial. */
void check_chunking(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);

/* Elements of 8 bytes or fewer that the buffer of a part holds, and 64
 * bytes more to shift them by. */
#define REDUCE_BUF_ELEMS 1000003u

typedef struct reduce_part {
	const char *name;
	void (*run)(unsigned char *buf);
} reduce_part;

/*
 * Run parts[0..n) in order, each from RNG_SEED (so that each sees the same
 * data whichever executable runs it) on one buffer; print how many checks
 * each made, then the total. With names (main's arguments), only the parts
 * so named run, and a name no part has fails. Returns main()'s exit
 * status: 0, for a check that fails exits 1.
 */
int reduce_run(const reduce_part *parts, size_t n, int nnames, char **names);
