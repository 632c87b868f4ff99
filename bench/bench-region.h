/*
 * gpured-benchmark's --region mode: the array lives in a shared-memory
 * region that each connection maps once, and every request names it
 * (region, offset 0, count) instead of carrying the bytes.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "proto/mp.h"
#include "proto/types.h"

/* A memfd of bytes (at least 1), sealed against shrinking, mapped
 * read-write at *ret_map. */
int bench_region_memfd(size_t bytes, int *ret_fd, void **ret_map);

/* On a connected, blocking socket: map memfd (bytes long) and return the
 * daemon's region id. */
int bench_region_map(int sock, int memfd, size_t bytes, uint64_t *ret_id);

/*
 * The whole request [0, msgid 0x10000, "reduce", [{op, dtype, region,
 * offset 0, count n}]] with its msgid where every header has it (bytes 3
 * to 6) and the region id as 8 bytes big-endian at *ret_id_at, to patch.
 */
int bench_region_request(gr_buf *b, gr_op op, gr_dtype dt, size_t n, size_t *ret_id_at);
