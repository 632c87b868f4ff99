/*
 * gpuredctl cumsum: the prefix sums of the input. Raw input goes through
 * shared-memory regions (the daemon reads the elements in place and
 * writes the values into a writable region), text input and anything the
 * daemon will not map over the socket; the values print one a line.
 * Kept out of gpuredctl.c so the unit tests can reach it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "client/gpured.h"

/*
 * The n prefix sums of data's n elements of dt, as
 * gpured_result_kind(GPURED_OP_SUM, dt) types them, 8 bytes each: in
 * regions when raw, over the socket when not, or when the daemon will not
 * map the regions. On success *ret_values (freed with free()) holds them.
 * Returns 0 or libgpured's error (gpured_errmsg() says why).
 */
int ctl_cumsum_compute(gpured_t *g, gpured_dtype dt, const void *data, size_t n, bool raw,
		       void **ret_values);

/*
 * Print the n values to f, numbers as gpuredctl prints them: one a line,
 * or with json one object, {"count": n, "values": [...]} (inf and nan as
 * null). Returns 0, or -EIO when f could not take them.
 */
int ctl_cumsum_print(FILE *f, gpured_dtype dt, const void *values, size_t n, bool json);
