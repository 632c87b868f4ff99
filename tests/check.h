/*
 * Assertions for gpured's C tests. They stay on in every build type (unlike
 * assert()), say where and what failed, and exit 1: meson's "fail".
 */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                                   \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                               \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

#define CHECK_MSG(cond, ...)                                                          \
	do {                                                                          \
		if (!(cond)) {                                                        \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, \
				#cond);                                               \
			fprintf(stderr, __VA_ARGS__);                                 \
			fputc('\n', stderr);                                          \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

/* Two integers, both printed when they differ. */
#define CHECK_EQ(a, b)                                                                \
	do {                                                                          \
		long long a_ = (long long)(a), b_ = (long long)(b);                   \
		if (a_ != b_) {                                                       \
			fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", \
				__FILE__, __LINE__, #a, #b, a_, b_);                  \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

/* A seeded xorshift generator: the same data on every run. */
static inline uint64_t check_rng(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return *state * 2685821657736338717ull;
}
