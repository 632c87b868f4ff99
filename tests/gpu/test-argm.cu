/*
 * The argmin/argmax kernel (cuda/argm.h) against the CPU backend's argmin
 * and argmax (math/reduce.c, built in): every dtype, sizes from 1 to
 * past 2^24, random data, many ties, -0 beside +0, NaNs (the first one
 * reported), infinities, every element equal, and each dtype's extremes;
 * the same value (bit for bit; any NaN for a NaN) and index, on grids of
 * 1, 7 and every multiprocessor, and for 4-byte dtypes also off a 16-byte
 * boundary (the element-wise path). --quick keeps to small sizes (for
 * compute-sanitizer). Exits 77 when there is no GPU.
 */
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/argm.h"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "math/reduce.h"
}

static const char *dt_name[] = { "i32", "i64", "u32", "u64", "f32", "f64" };
static const size_t dt_size[] = { 4, 8, 4, 8, 4, 8 };

enum { RANDOM, TIES, ZEROS, NANS, INFS, EQUAL, EXTREMES, NKINDS };
static const char *kind_name[] = { "random", "ties", "zeros", "nans", "infs", "equal", "extremes" };

static void put(int dt, void *p, size_t i, double f, uint64_t u)
{
	switch (dt) {
	case 0: ((int32_t *)p)[i] = (int32_t)u; break;
	case 1: ((int64_t *)p)[i] = (int64_t)u; break;
	case 2: ((uint32_t *)p)[i] = (uint32_t)u; break;
	case 3: ((uint64_t *)p)[i] = u; break;
	case 4: ((float *)p)[i] = (float)f; break;
	case 5: ((double *)p)[i] = f; break;
	}
}

static void fill(int dt, int kind, std::vector<unsigned char> &h, size_t n)
{
	h.assign(n * dt_size[dt], 0);
	bool fl = dt >= 4;
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		double f = ldexp((double)(int64_t)(r >> 11) / 4.5e15, (int)(r % 40) - 20);
		uint64_t u = r;
		switch (kind) {
		case TIES:
			f = (double)(int)(r % 7) - 3;
			u = (uint64_t)(int64_t)((int)(r % 7) - 3);
			if (dt == 2 || dt == 3)
				u = r % 7;
			break;
		case ZEROS:
			f = (r & 1) ? -0.0 : 0.0;
			u = r % 2;
			break;
		case NANS:
			if (fl && r % 97 == 0)
				f = (r & 2) ? NAN : -NAN;
			break;
		case INFS:
			if (r % 53 == 0)
				f = (r & 2) ? INFINITY : -INFINITY;
			break;
		case EQUAL:
			f = 2.5;
			u = 12345;
			break;
		case EXTREMES:
			/* the dtype's largest or smallest value everywhere but a few */
			f = (r % 1000 == 0) ? (fl ? -INFINITY : 0) : (dt == 4 ? FLT_MAX : DBL_MAX);
			u = (r % 1000 == 0) ? 7 : (dt == 0 ? (uint64_t)INT32_MAX : dt == 1 ? (uint64_t)INT64_MAX : ~0ull);
			if (r % 3 == 0)
				u = dt == 0 ? (uint64_t)(int64_t)INT32_MIN : dt == 1 ? (uint64_t)INT64_MIN : 0;
			break;
		}
		put(dt, h.data(), i, f, u);
	}
}

static void *ws;

static void one(int dt, int kind, size_t n, const std::vector<unsigned char> &h, const void *d,
		gr_argm_result *dout, int sms)
{
	for (int is_max = 0; is_max < 2; is_max++) {
		gr_partial p;
		gr_reduce(is_max ? GR_OP_ARGMAX : GR_OP_ARGMIN, (gr_dtype)dt, h.data(), n, &p);
		CU(gr_argm_launch(dt, is_max, d, n, dout, ws, sms, nullptr));
		gr_argm_result got;
		CU(cudaMemcpy(&got, dout, sizeof(got), cudaMemcpyDeviceToHost));
		bool same;
		if (dt >= 4) {
			double g;
			memcpy(&g, &got.value, 8);
			same = std::isnan(p.v.f) ? std::isnan(g) : got.value == p.v.u;
		} else {
			same = got.value == p.v.u;
		}
		CHECK(same && got.index == p.index,
		      "%s %s %s n=%zu sms=%d: GPU value %llx index %llu, CPU %llx index %llu",
		      is_max ? "argmax" : "argmin", dt_name[dt], kind_name[kind], n, sms,
		      (unsigned long long)got.value, (unsigned long long)got.index,
		      (unsigned long long)p.v.u, (unsigned long long)p.index);
	}
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int sms = gpu_sms();
	CU(cudaMalloc(&ws, gr_argm_workspace_bytes(sms)));
	CU(cudaMemset(ws, 0, gr_argm_workspace_bytes(sms)));
	gr_argm_result *dout;
	CU(cudaMalloc((void **)&dout, sizeof(*dout)));
	std::vector<size_t> sizes = { 1, 2, 33, 1000, 4097, 65537 };
	if (!quick) {
		sizes.push_back((1u << 20) + 3);
		sizes.push_back((1u << 24) + 7);
	}
	std::vector<unsigned char> h;
	for (int dt = 0; dt < 6; dt++)
		for (int kind = 0; kind < NKINDS; kind++) {
			if (dt < 4 && (kind == NANS || kind == INFS))
				continue;
			for (size_t n : sizes) {
				if (n > (1u << 21) && kind != RANDOM && kind != TIES)
					continue;
				fill(dt, kind, h, n);
				void *d;
				CU(cudaMalloc(&d, n * dt_size[dt]));
				CU(cudaMemcpy(d, h.data(), n * dt_size[dt], cudaMemcpyHostToDevice));
				for (int g : { 1, 7, sms })
					one(dt, kind, n, h, d, dout, g);
				if (dt_size[dt] == 4 && n > 1) {
					/* not on a 16-byte boundary: the element-wise path */
					std::vector<unsigned char> t(h.begin() + 4, h.end());
					one(dt, kind, n - 1, t, (const char *)d + 4, dout, sms);
				}
				CU(cudaFree(d));
			}
			printf("argm %s %-8s ok so far (%lu checks)\n", dt_name[dt], kind_name[kind], checks);
		}
	unsigned ticket;
	CU(cudaMemcpy(&ticket, ws, 4, cudaMemcpyDeviceToHost));
	CHECK(ticket == 0, "ticket left at %u", ticket);
	CU(cudaFree(ws));
	CU(cudaFree(dout));
	if (failures) {
		printf("argm: %lu of %lu checks failed\n", failures, checks);
		return 1;
	}
	printf("argm: %lu checks passed\n", checks);
	return 0;
}
