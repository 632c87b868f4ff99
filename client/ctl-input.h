/*
 * The numbers gpuredctl reads and writes: reading an input whole, strict
 * parsing of text input for a dtype (every token must be a number: an
 * integer the dtype holds, or a float within its range, rounded to it),
 * and printing results so that they read back to the same value. Kept out of gpuredctl.c so the unit tests can
 * reach it.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "client/ctl-progress.h"
#include "client/gpured.h"

/* The bytes left to read in fd when it is a regular file; 0 otherwise
 * (a pipe, a terminal: unknown). */
uint64_t ctl_input_remaining(int fd);

/*
 * Read fd to its end into a malloc'd buffer: *ret (freed with free()) holds
 * *ret_len bytes. size_hint (the bytes expected, 0 if unknown) sizes the
 * buffer once; progress (NULL: none) is told of every read. Returns 0 or a
 * negative errno.
 */
int ctl_input_read_all(int fd, uint64_t size_hint, ctl_progress *progress, char **ret,
		       size_t *ret_len);

/* A new region (gpured_region_new()) holding data[0..bytes): 0 or the
 * call's error. */
int ctl_input_region(gpured_t *g, const void *data, size_t bytes, gpured_region_t **ret);

/*
 * Parse tok[0..len) as one element of dt and store it, packed and
 * little-endian, at out (gpured_dtype_size(dt) bytes). Integers: decimal
 * digits with an optional sign, within the dtype's range. Floats: what
 * strtod() accepts, including inf and nan, rounded to the nearest value
 * of the dtype, ties to even; for f16, bf16, f8e4m3 and f8e5m2 the
 * decimal itself is rounded once (never first to a double, then again).
 * A finite number that rounds past the dtype's largest finite value is out
 * of range, as is inf for f8e4m3, which has none; one that rounds to zero
 * is a zero of its sign. nan is the dtype's quiet NaN (f8e4m3: S.1111.111).
 * Returns 0, -EINVAL if tok is not such a number, -ERANGE if it is out of
 * the dtype's range.
 */
int ctl_input_parse_number(const char *tok, size_t len, gpured_dtype dt, void *out);

/* Where a bad token was found. */
typedef struct ctl_input_error {
	int err;          /* -EINVAL, -ERANGE or -ENOMEM */
	size_t line;      /* 1-based */
	size_t column;    /* 1-based, in bytes */
	size_t index;     /* 0-based element number */
	char token[48];   /* the token, shortened with "..." if longer */
} ctl_input_error;

/*
 * Parse the whitespace-separated numbers in text[0..len) as elements of
 * dt. On success *ret_data (freed with free(); NULL when *ret_n is 0) holds
 * *ret_n packed elements. On failure returns the error and fills *ret_err.
 */
int ctl_input_parse_text(const char *text, size_t len, gpured_dtype dt, void **ret_data,
			 size_t *ret_n, ctl_input_error *ret_err);

/*
 * Print v to buf[0..size): integers exactly, floats with 17 significant
 * digits (they read back to the same double). With json, a value that JSON
 * cannot hold (inf, nan) is printed as null. Returns the length, as
 * snprintf does.
 */
int ctl_input_format_value(const gpured_value *v, int json, char *buf, size_t size);
