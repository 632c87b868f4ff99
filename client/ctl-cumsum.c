#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/ctl-cumsum.h"
#include "client/ctl-input.h"
#include "util/cleanup.h"

/* ctl_cumsum_compute() in two new regions, the values copied out of the
 * second: -ENOSYS, -EINVAL or -E2BIG when the daemon has no regions, or
 * no writable ones, or will not map these. */
static int cumsum_in_regions(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			     void *values)
{
	gpured_region_t *in = NULL, *out = NULL;
	int r = ctl_input_region(g, data, n * gpured_dtype_size(dt), &in);

	if (r == 0)
		r = gpured_region_new_flags(g, n * 8, GPURED_REGION_WRITABLE, &out);
	if (r == 0)
		r = gpured_region_cumsum(g, in, dt, 0, n, out, 0);
	if (r == 0)
		memcpy(values, gpured_region_data(out), n * 8);
	int f = gpured_region_free(g, out);
	int f2 = gpured_region_free(g, in);
	return r < 0 ? r : f < 0 ? f : f2;
}

int ctl_cumsum_compute(gpured_t *g, gpured_dtype dt, const void *data, size_t n, bool raw,
		       void **ret_values)
{
	_cleanup_(freep) void *values = NULL;
	int r = -ENOSYS;

	if (n > SIZE_MAX / 8)
		return -E2BIG;
	values = malloc(n ? n * 8 : 1);
	if (!values)
		return -ENOMEM;
	if (raw && n > 0)
		r = cumsum_in_regions(g, dt, data, n, values);
	if (r == -ENOSYS || r == -EINVAL || r == -E2BIG)
		r = gpured_cumsum(g, dt, data, n, values);
	if (r < 0)
		return r;
	*ret_values = TAKE_PTR(values);
	return 0;
}

int ctl_cumsum_print(FILE *f, gpured_dtype dt, const void *values, size_t n, bool json)
{
	gpured_value v = { .kind = gpured_result_kind(GPURED_OP_SUM, dt) };
	char buf[64];

	if (json)
		fprintf(f, "{\"count\":%zu,\"values\":[", n);
	for (size_t i = 0; i < n; i++) {
		memcpy(&v.v, (const uint8_t *)values + 8 * i, 8);
		ctl_input_format_value(&v, json, buf, sizeof(buf));
		if (json && i > 0)
			fputc(',', f);
		fputs(buf, f);
		if (!json)
			fputc('\n', f);
	}
	if (json)
		fputs("]}\n", f);
	return fflush(f) != 0 || ferror(f) ? -EIO : 0;
}
