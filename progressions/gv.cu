/*
 * The variant tables, the device workspace, and the CPU reference the
 * variants are checked against (plain loops, long double where it helps).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "gv.h"
#include "gv_tables.h"

size_t gv_cub_reduce_bytes(enum gv_dtype dt, size_t n);
size_t gv_cub_scan_bytes(enum gv_dtype dt, size_t n);

size_t gv_dtype_size(enum gv_dtype dt)
{
	return dt == GV_DOUBLE ? 8 : 4;
}

const char *gv_dtype_name(enum gv_dtype dt)
{
	static const char *names[] = { "int", "float", "double" };

	return dt < GV_DTYPE_COUNT ? names[dt] : "?";
}

int gv_dtype_parse(const char *s, enum gv_dtype *ret_dt)
{
	for (int d = 0; d < GV_DTYPE_COUNT; d++)
		if (strcmp(s, gv_dtype_name((enum gv_dtype)d)) == 0) {
			*ret_dt = (enum gv_dtype)d;
			return 0;
		}
	return -EINVAL;
}

const struct gv_variant *gv_reduce_variants(size_t *ret_count)
{
	static struct gv_variant all[64];
	static size_t count;

	if (!count) {
		for (size_t i = 0; i < gv_reduce_classic_count; i++)
			all[count++] = gv_reduce_classic[i];
		for (size_t i = 0; i < gv_reduce_modern_count; i++)
			all[count++] = gv_reduce_modern[i];
	}
	*ret_count = count;
	return all;
}

const struct gv_variant *gv_scan_variants(size_t *ret_count)
{
	*ret_count = gv_scan_table_count;
	return gv_scan_table;
}

const struct gv_variant *gv_find(const struct gv_variant *v, size_t count,
				 const char *name)
{
	for (size_t i = 0; i < count; i++)
		if (strcmp(v[i].name, name) == 0)
			return &v[i];
	return NULL;
}

int gv_ws_init(struct gv_ws *ws, size_t n_max)
{
	cudaDeviceProp prop;
	int dev;
	size_t cub = 0;

	memset(ws, 0, sizeof(*ws));
	if (n_max < 1)
		n_max = 1;
	ws->n_max = n_max;
	if ((ws->last_err = cudaGetDevice(&dev)) != cudaSuccess ||
	    (ws->last_err = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
		return -ENODEV;
	ws->sms = prop.multiProcessorCount;
	ws->l2_bytes = prop.l2CacheSize;
	for (int d = 0; d < GV_DTYPE_COUNT; d++) {
		size_t a = gv_cub_reduce_bytes((enum gv_dtype)d, n_max);
		size_t b = gv_cub_scan_bytes((enum gv_dtype)d, n_max);

		if (a > cub)
			cub = a;
		if (b > cub)
			cub = b;
	}
	ws->cub_bytes = cub < 256 ? 256 : cub;
	ws->part_elems = n_max / 64 + 1024;
	ws->scan_sums_elems = n_max / 128 + 4096;
	if ((ws->last_err = cudaStreamCreateWithFlags(&ws->stream, cudaStreamNonBlocking)) ||
	    (ws->last_err = cudaMalloc(&ws->part[0], ws->part_elems * 8)) ||
	    (ws->last_err = cudaMalloc(&ws->part[1], ws->part_elems * 8)) ||
	    (ws->last_err = cudaMalloc(&ws->copy, n_max * 8)) ||
	    (ws->last_err = cudaMalloc(&ws->ticket, sizeof(unsigned))) ||
	    (ws->last_err = cudaMalloc(&ws->cub_tmp, ws->cub_bytes)) ||
	    (ws->last_err = cudaMalloc(&ws->scan_sums, ws->scan_sums_elems * 8)) ||
	    (ws->last_err = cudaMemset(ws->ticket, 0, sizeof(unsigned)))) {
		gv_ws_deinit(ws);
		return -ENOMEM;
	}
	return 0;
}

void gv_ws_deinit(struct gv_ws *ws)
{
	cudaFree(ws->part[0]);
	cudaFree(ws->part[1]);
	cudaFree(ws->copy);
	cudaFree(ws->ticket);
	cudaFree(ws->cub_tmp);
	cudaFree(ws->scan_sums);
	if (ws->stream)
		cudaStreamDestroy(ws->stream);
	memset(ws, 0, sizeof(*ws));
}

/* ---- CPU reference ---- */

void gv_ref_sum(enum gv_dtype dt, const void *h, size_t n, struct gv_ref *ret)
{
	memset(ret, 0, sizeof(*ret));
	switch (dt) {
	case GV_INT: {
		const uint32_t *p = (const uint32_t *)h;
		uint32_t s = 0;

		for (size_t i = 0; i < n; i++)
			s += p[i];
		ret->isum = s;
		break;
	}
	case GV_FLOAT: {
		const float *p = (const float *)h;

		for (size_t i = 0; i < n; i++) {
			ret->fsum += p[i];
			ret->abssum += fabsl(p[i]);
		}
		break;
	}
	default: {
		const double *p = (const double *)h;

		for (size_t i = 0; i < n; i++) {
			ret->fsum += p[i];
			ret->abssum += fabsl(p[i]);
		}
		break;
	}
	}
}

void gv_ref_scan(enum gv_dtype dt, const void *h, size_t n, void *h_out,
		 long double *abs_out)
{
	long double s = 0, a = 0;

	switch (dt) {
	case GV_INT: {
		const uint32_t *p = (const uint32_t *)h;
		uint32_t *o = (uint32_t *)h_out, is = 0;

		for (size_t i = 0; i < n; i++) {
			is += p[i];
			o[i] = is;
			abs_out[i] = 0;
		}
		break;
	}
	case GV_FLOAT: {
		const float *p = (const float *)h;
		float *o = (float *)h_out;

		for (size_t i = 0; i < n; i++) {
			s += p[i];
			a += fabsl(p[i]);
			o[i] = (float)s;
			abs_out[i] = a;
		}
		break;
	}
	default: {
		const double *p = (const double *)h;
		double *o = (double *)h_out;

		for (size_t i = 0; i < n; i++) {
			s += p[i];
			a += fabsl(p[i]);
			o[i] = (double)s;
			abs_out[i] = a;
		}
		break;
	}
	}
}

/*
 * Tolerance for a floating-point sum of n terms in working precision eps:
 * a tree of depth log2(n) errs by at most about log2(n) * eps * sum|x|;
 * twice that leaves room for the sequential stretches (grid-stride loops,
 * atomics, chained tile totals).  Data made of small integers sums
 * exactly, so there the check is exact in practice.
 */
static long double gv_tol(enum gv_dtype dt, size_t n, long double abssum)
{
	long double eps = dt == GV_FLOAT ? FLT_EPSILON : DBL_EPSILON;
	long double depth = n > 2 ? log2l((long double)n) : 1;

	return 2 * (depth + 2) * eps * abssum;
}

bool gv_check_sum(enum gv_dtype dt, const void *got, size_t n,
		  const struct gv_ref *ref, double *err)
{
	long double g, e;

	if (dt == GV_INT) {
		uint32_t v;

		memcpy(&v, got, 4);
		*err = v == ref->isum ? 0 : 1;
		return v == ref->isum;
	}
	if (dt == GV_FLOAT) {
		float v;

		memcpy(&v, got, 4);
		g = v;
	} else {
		double v;

		memcpy(&v, got, 8);
		g = v;
	}
	e = fabsl(g - ref->fsum);
	*err = (double)e;
	/* NaN fails: the comparison is false. */
	return e <= gv_tol(dt, n, ref->abssum);
}

size_t gv_result_size(const struct gv_variant *v, enum gv_dtype dt)
{
	return (v->flags & GV_OUT_WIDE) ? 8 : gv_dtype_size(dt);
}

bool gv_check_result(const struct gv_variant *v, enum gv_dtype dt, const void *got, size_t n,
		     const struct gv_ref *ref, double *err)
{
	double d;
	float f;

	/* as written, but for a wide float: a wide int is checked on the low
	 * 32 bits of its 64-bit sum (little-endian), a double is a double */
	if (!(v->flags & GV_OUT_WIDE) || dt != GV_FLOAT)
		return gv_check_sum(dt, got, n, ref, err);
	/* A float sum kept in double: held to float's tolerance, which it
	 * meets with room to spare, after rounding as a float sum would. */
	memcpy(&d, got, 8);
	f = (float)d;
	return gv_check_sum(dt, &f, n, ref, err);
}

size_t gv_check_scan(enum gv_dtype dt, const void *got, const void *ref,
		     const long double *abs, size_t n, size_t *first_bad)
{
	size_t bad = 0;

	*first_bad = n;
	for (size_t i = 0; i < n; i++) {
		bool ok;

		if (dt == GV_INT) {
			ok = ((const uint32_t *)got)[i] == ((const uint32_t *)ref)[i];
		} else {
			long double g, r;

			if (dt == GV_FLOAT) {
				g = ((const float *)got)[i];
				r = ((const float *)ref)[i];
			} else {
				g = ((const double *)got)[i];
				r = ((const double *)ref)[i];
			}
			/* The reference itself was rounded once to the type. */
			ok = fabsl(g - r) <= gv_tol(dt, n, abs[i]) + fabsl(r) *
				(dt == GV_FLOAT ? FLT_EPSILON : DBL_EPSILON);
		}
		if (!ok) {
			if (!bad)
				*first_bad = i;
			bad++;
		}
	}
	return bad;
}

static uint64_t gv_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void gv_fill(enum gv_dtype dt, void *h, size_t n, uint64_t seed, bool exact)
{
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		uint64_t r = gv_splitmix(&s);

		switch (dt) {
		case GV_INT:
			((uint32_t *)h)[i] = (uint32_t)r;
			break;
		case GV_FLOAT:
			((float *)h)[i] = exact ? (float)((int)(r % 17) - 8)
						: (float)((double)(r >> 11) * 0x1p-52 - 1.0);
			break;
		default:
			((double *)h)[i] = exact ? (double)((int)(r % 17) - 8)
						 : (double)(r >> 11) * 0x1p-52 - 1.0;
			break;
		}
	}
}
