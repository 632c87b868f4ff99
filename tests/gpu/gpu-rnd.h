/*
 * The GPU tests' xorshift generator with a fixed seed, so that every run
 * checks the same data. gpu-test.h carries it with the rest of what the
 * counting tests share; a test with checks of its own includes it alone.
 */
#pragma once

#include <cstdint>

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static inline uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}
