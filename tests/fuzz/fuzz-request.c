/*
 * Fuzz target: the daemon's request parser (proto/request.c). The input's
 * first 4 bytes choose the limits, the destination size, the read style
 * and the byte splits; the rest is the stream. The run in pieces must
 * tell the same story as the run in one piece, and no destination's guard
 * bytes may change (tests/proto/harness.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tests/proto/harness.h"

int h_counting;
unsigned h_allocs;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	gr_req_limits lim = { 0 };
	harness whole, pieces;
	uint64_t reject;
	size_t chunk;

	if (size < 4 || size - 4 > H_MAX_INPUT)
		return 0;
	lim.max_data_bytes = data[0] & 0x80 ? 1 + (data[0] & 0x7f) : 0;
	reject = data[1] & 0x80 ? 1 + (data[1] & 0x1f) : 0;
	chunk = 1 + (data[2] & 0x3f);

	h_init(&whole, &lim, 1 << 16, false, reject);
	h_run(&whole, data + 4, size - 4, 0, 0);
	h_init(&pieces, &lim, chunk, data[2] & 0x40, reject);
	h_run(&pieces, data + 4, size - 4, 1 + data[3] % 4, data[3]);
	CHECK(strcmp(whole.log, pieces.log) == 0);
	CHECK(whole.n_events == pieces.n_events);
	CHECK(memcmp(whole.offsets, pieces.offsets, whole.n_events * sizeof(whole.offsets[0])) == 0);
	h_deinit(&whole);
	h_deinit(&pieces);
	return 0;
}
