#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/ctl-input.h"
#include "client/ctl-segments.h"
#include "util/cleanup.h"

int ctl_segments_rows(size_t n, uint64_t rows, uint64_t **ret, size_t *ret_nseg)
{
	size_t nseg;
	uint64_t *o;

	if (rows == 0)
		return -EINVAL;
	nseg = (size_t)(n / rows) + (n % rows != 0);
	*ret = NULL;
	*ret_nseg = nseg;
	if (nseg == 0)
		return 0;
	o = malloc((nseg + 1) * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < nseg; i++)
		o[i] = (uint64_t)i * rows;
	o[nseg] = n;
	*ret = o;
	return 0;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int ctl_segments_parse(const void *bytes, size_t len, size_t n, uint64_t **ret,
		       size_t *ret_nseg, char *why, size_t size)
{
	const uint8_t *p = bytes;
	size_t k = len / 8;
	_cleanup_(freep) uint64_t *o = NULL;

	if (len % 8 != 0 || k < 2) {
		snprintf(why, size,
			 "%zu bytes: offsets are little-endian u64, at least two (one segment)",
			 len);
		return -EINVAL;
	}
	o = malloc(k * sizeof(*o));
	if (!o)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		o[i] = le64(p + 8 * i);
		if (i == 0 && o[0] != 0)
			snprintf(why, size, "the first offset is %llu, not 0",
				 (unsigned long long)o[0]);
		else if (i > 0 && o[i] < o[i - 1])
			snprintf(why, size, "offset %zu is %llu, below the one before it (%llu)", i,
				 (unsigned long long)o[i], (unsigned long long)o[i - 1]);
		else
			continue;
		return -EINVAL;
	}
	if (o[k - 1] != n) {
		snprintf(why, size, "the last offset is %llu, not the %zu elements of the input",
			 (unsigned long long)o[k - 1], n);
		return -EINVAL;
	}
	*ret = TAKE_PTR(o);
	*ret_nseg = k - 1;
	return 0;
}

/* The same as ctl_segments_reduce(), in a new region: -ENOSYS, -EINVAL or
 * -E2BIG when the daemon has no regions or will not map this one. */
static int reduce_in_region(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data,
			    size_t n, const uint64_t *offsets, size_t nseg, uint64_t ddof,
			    void *records, size_t records_bytes)
{
	gpured_region_t *rg;
	int r = ctl_input_region(g, data, n * gpured_dtype_size(dt), &rg);

	if (r < 0)
		return r;
	r = gpured_region_reduce_segments(g, rg, op, dt, 0, n, offsets, nseg, ddof, records,
					  records_bytes);
	int f = gpured_region_free(g, rg);
	return r < 0 ? r : f;
}

int ctl_segments_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			const uint64_t *offsets, size_t nseg, uint64_t ddof, bool raw,
			void **ret_records)
{
	size_t bytes = nseg * gpured_segment_record_bytes(op);
	_cleanup_(freep) void *records = malloc(bytes ? bytes : 1);
	int r = -ENOSYS;

	if (!records)
		return -ENOMEM;
	if (raw && n > 0)
		r = reduce_in_region(g, op, dt, data, n, offsets, nseg, ddof, records, bytes);
	if (r == -ENOSYS || r == -EINVAL || r == -E2BIG)
		r = gpured_reduce_segments(g, op, dt, data, n, offsets, nseg, ddof, records, bytes);
	if (r < 0)
		return r;
	*ret_records = TAKE_PTR(records);
	return 0;
}

static gpured_value value_of(gpured_kind kind, const gpured_number *x)
{
	gpured_value v = { .kind = kind };

	memcpy(&v.v, x, sizeof(*x));
	return v;
}

void ctl_segments_print(FILE *f, gpured_op op, gpured_dtype dt, const uint64_t *offsets,
			size_t nseg, const void *records, bool json)
{
	const gpured_kind kind = gpured_result_kind(op, dt);
	const size_t rb = gpured_segment_record_bytes(op);
	char a[64], b[64], c[64], d[64], e[64];

	for (size_t i = 0; i < nseg; i++) {
		unsigned long long count = offsets[i + 1] - offsets[i];
		const uint8_t *p = (const uint8_t *)records + i * rb;
		gpured_value v;

		if (op == GPURED_OP_MOMENTS) {
			gpured_moments_record m;

			memcpy(&m, p, sizeof(m));
			v = value_of(kind, &m.sum);
			ctl_input_format_value(&v, json, a, sizeof(a));
			v = value_of(kind, &m.min);
			ctl_input_format_value(&v, json, b, sizeof(b));
			v = value_of(kind, &m.max);
			ctl_input_format_value(&v, json, c, sizeof(c));
			v = (gpured_value){ .kind = GPURED_KIND_F64, .v.f = m.mean };
			ctl_input_format_value(&v, json, d, sizeof(d));
			v.v.f = m.var;
			ctl_input_format_value(&v, json, e, sizeof(e));
			if (json)
				fprintf(f, "{\"count\":%llu,\"sum\":%s,\"min\":%s,\"max\":%s,"
					   "\"mean\":%s,\"var\":%s}\n",
					count, a, b, c, d, e);
			else
				fprintf(f, "%llu %s %s %s %s %s\n", count, a, b, c, d, e);
		} else if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX) {
			gpured_arg_record x;

			memcpy(&x, p, sizeof(x));
			v = value_of(kind, &x.value);
			ctl_input_format_value(&v, json, a, sizeof(a));
			if (x.index == GPURED_SEGMENT_NO_INDEX)
				snprintf(b, sizeof(b), "%s", json ? "null" : "-1");
			else
				snprintf(b, sizeof(b), "%llu", (unsigned long long)x.index);
			if (json)
				fprintf(f, "{\"value\":%s,\"index\":%s,\"count\":%llu}\n", a, b,
					count);
			else
				fprintf(f, "%s %s\n", a, b);
		} else {
			gpured_number x;

			memcpy(&x, p, sizeof(x));
			v = value_of(kind, &x);
			ctl_input_format_value(&v, json, a, sizeof(a));
			if (json)
				fprintf(f, "{\"value\":%s,\"count\":%llu}\n", a, count);
			else
				fprintf(f, "%s\n", a);
		}
	}
}
