/*
 * test-reduce-exact's parts, in three files (test-reduce-exact.c,
 * reduce-exact-f64.c, reduce-exact-f32.c), and what they share.
 */
#pragma once

#include "tests/cpu/reduce-check.h"

/* The exact value of a block of n elements at p against the combination
 * of its elements' one-element partials (test-reduce-exact.c). */
void check_exact_bits(gr_op op, gr_dtype dt, const unsigned char *p, size_t n);

/* got, a float sum (sq: sum of squares) of the n f64 elements at p (or of
 * their values as dtype dt, named for messages), holds exactly the
 * reference's value (reduce-exact-f64.c). */
void check_value_ref(const gr_partial *got, const unsigned char *p, size_t n, bool sq,
                     const char *dt, const char *what);

/* The parts (reduce_part), each on a buffer of reduce_run()'s. */
void check_f64_paths(unsigned char *buf);
void check_f64_bounds(unsigned char *buf);
void check_f64_top_words(unsigned char *buf);
void check_f64_late_subnormal(unsigned char *buf);
void check_f32_narrow(unsigned char *buf);
void check_f32_grid(unsigned char *buf);
