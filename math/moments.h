/*
 * moments' mean and variance from its exact sums, rounded once: the
 * integer arithmetic behind gr_moments_finish() (reduce.h).
 */
#pragma once

#include <stdint.h>

#include "math/partial.h"

/*
 * p is a moments partial of count >= 1 elements, ddof < count. With S1 and
 * S2 the exact sums of the elements and of their squares (reals, nothing
 * rounded), *ret_mean is S1 / n and *ret_var is (S2 - S1^2 / n) / (n -
 * ddof), each rounded once to float64, to nearest with ties to even
 * (infinity past the largest finite value). A NaN among the elements
 * makes both NaN; infinities make the mean what the sum is (+inf, -inf,
 * NaN for both) and the variance NaN. An exactly zero mean is -0.0 only
 * when every element is -0.0 (a negative mean too small for a double
 * rounds to -0.0, as any negative value does); a zero variance is +0.0.
 */
void moments_round(const gr_partial *p, uint64_t ddof, double *ret_mean, double *ret_var);
