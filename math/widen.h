/*
 * The narrow dtypes' elements as the dtypes they widen to exactly
 * (proto/types.h, gr_dtype_wide()): f16, bf16, f8e4m3 and f8e5m2 as
 * floats, i8 and i16 as int32_t, u8 and u16 as uint32_t. Every op over a
 * narrow dtype is the same op over its widened elements.
 *
 * A NaN widens to a quiet NaN of the same sign and payload (the F16C
 * instruction's rule, kept by the portable path too, so the two give the
 * same bits); E4M3's NaNs (S.1111.111) widen to the quiet NaN 0x7fc00000
 * with their sign.
 */
#pragma once

#include <stddef.h>

#include "proto/types.h"

/* Elements widened at a time by the kernels that widen into a buffer of
 * their own (4-byte elements: 16 KiB). */
#define GR_WIDEN_PIECE 4096u

/* n elements of the narrow dtype dt at src (any alignment) to dst, n
 * elements of gr_dtype_wide(dt) (4 bytes each, 4-byte aligned). */
void gr_widen(gr_dtype dt, const void *src, size_t n, void *dst);

/* One element's widened bits (a float's bits, an int32_t's or uint32_t's). */
uint32_t gr_widen_one(gr_dtype dt, const void *src);
