/*
 * The exact accumulator's number: a two's complement integer of n 64-bit
 * words, least significant first, whose bit 0 weighs 2^lsb. The daemon's
 * partials (xsum.c), the partials clients combine (fsum.c) and the GPU's
 * digits once folded (cuda/exact-partial.c) all hold their exact value in
 * one, and round it here, once.
 */
#pragma once

#include <stdint.h>

/* The first word of a[0..n) at or above i that is not w (n when there is
 * none): four words a step while it can, for the long runs of sign words
 * an accumulator holds above and below its value. */
static inline unsigned gr_wide_run_up(const uint64_t *a, unsigned n, unsigned i, uint64_t w)
{
	for (; i + 4 <= n; i += 4)
		if ((a[i] ^ w) | (a[i + 1] ^ w) | (a[i + 2] ^ w) | (a[i + 3] ^ w))
			break;
	while (i < n && a[i] == w)
		i++;
	return i;
}

/* The last word of a at or below i, and above floor, that is not w
 * (floor when there is none). */
static inline unsigned gr_wide_run_down(const uint64_t *a, unsigned i, unsigned floor, uint64_t w)
{
	for (; i >= floor + 4; i -= 4)
		if ((a[i] ^ w) | (a[i - 1] ^ w) | (a[i - 2] ^ w) | (a[i - 3] ^ w))
			break;
	while (i > floor && a[i] == w)
		i--;
	return i;
}

/* a += b, modulo 2^(64 n). */
void gr_wide_add(uint64_t *a, const uint64_t *b, unsigned n);

/*
 * The value a[0..n) x 2^lsb rounded once to a double: to nearest, ties to
 * even, with no place below 2^-1074 (subnormals, and values too small for
 * the least subnormal round to a zero of their sign), and +-inf where it
 * rounds to 2^1024 or past. lsb must be below -1074. A zero value gives
 * +0.0: whether it is -0 is the caller's to know.
 */
double gr_wide_round(const uint64_t *a, unsigned n, int lsb);
