/*
 * The plain read of f32 elements the region benchmarks measure against
 * (gpured-readsum, gpured-host-ceiling): sixteen double lanes in AVX2
 * vectors, memory-bound on one core where a scalar loop is not. C and
 * C++ alike.
 */
#pragma once

#include <stddef.h>
#include <string.h>

typedef double read_v4df __attribute__((vector_size(32)));
typedef float read_v4sf __attribute__((vector_size(16)));

#if defined(__x86_64__)
__attribute__((target("avx2")))
#endif
static inline double read_vec_sum(const float *p, size_t n)
{
	read_v4df a[4] = { { 0 } };
	size_t i = 0;

	for (; i + 16 <= n; i += 16)
		for (int k = 0; k < 4; k++) {
			read_v4sf x;
			memcpy(&x, p + i + 4 * (size_t)k, sizeof(x));
			a[k] += __builtin_convertvector(x, read_v4df);
		}
	read_v4df t = (a[0] + a[1]) + (a[2] + a[3]);
	double s = (t[0] + t[1]) + (t[2] + t[3]);
	for (; i < n; i++)
		s += p[i];
	return s;
}
