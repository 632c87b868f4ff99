/*
 * gpuredctl's segmented reduces (--rows, --offsets): the segments' offsets
 * made from a row length or read from a file of little-endian u64, checked
 * against the input before anything is sent; the reduce itself, in a
 * shared-memory region or over the socket; one printed line per segment.
 * Kept out of gpuredctl.c so the unit tests can reach it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client/gpured.h"

/*
 * The offsets of n elements in rows of rows elements (rows >= 1), the last
 * row shorter when rows does not divide n: *ret_nseg = ceil(n / rows)
 * segments, *ret (freed with free()) their *ret_nseg + 1 offsets. No
 * elements give no segments (and *ret NULL). Returns 0, -EINVAL for rows
 * 0, or -ENOMEM.
 */
int ctl_segments_rows(size_t n, uint64_t rows, uint64_t **ret, size_t *ret_nseg);

/*
 * The offsets in bytes[0..len), little-endian u64 each, for n elements:
 * at least two, the first 0, none below the one before, the last n.
 * Returns 0 with *ret (freed with free()) and *ret_nseg, -EINVAL with why
 * in why[0..size), or -ENOMEM.
 */
int ctl_segments_parse(const void *bytes, size_t len, size_t n, uint64_t **ret,
		       size_t *ret_nseg, char *why, size_t size);

/*
 * Reduce data's n elements by segments: in a shared-memory region when raw
 * (the input is the file's bytes, worth not copying through the socket),
 * over the socket when not, or when the daemon will not map the region.
 * On success *ret_records (freed with free()) holds the nseg records.
 * Returns 0 or libgpured's error (gpured_errmsg() says why).
 */
int ctl_segments_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			const uint64_t *offsets, size_t nseg, uint64_t ddof, bool raw,
			void **ret_records);

/*
 * Print one line per segment to f: the value (argmin, argmax: the value
 * and its index, -1 for an empty segment; moments: count, sum, min, max,
 * mean and var), numbers as gpuredctl prints them; with json one object a
 * line, shaped as the command prints one result, count the segment's
 * length (an empty segment's index null).
 */
void ctl_segments_print(FILE *f, gpured_op op, gpured_dtype dt, const uint64_t *offsets,
			size_t nseg, const void *records, bool json);
