/*
 * The segmented reduce (cuda/segred.h) against the CPU backend's records
 * (math/reduce.c and segments.c, built in): sum, min, max, sumsq, argmin,
 * argmax and moments of every dtype, each segment's record bit for bit
 * what the CPU gives for that segment alone, float sums exact (moments'
 * records made on the host from the launch's sums, cuda/segs-moments.c,
 * with ddof 0 and 1). Integer sumsq, which the GPU sums
 * exactly from the rounded squares, against the CPU's exact f64 sum of
 * those squares. Data: random, wide exponents (the careful path), a few
 * huge or tiny elements among ordinary ones, NaNs and infinities, -0 and
 * +0, cancelling pairs, subnormals and extremes; segments: many empty and
 * short ones (one lane each), lengths up to several tiles, one long
 * segment over many tiles, and launches over a middle run of the segments
 * (first > 0), as the engine cuts them. Also the refusals (too little
 * scratch, misaligned data, an op it does not take). --quick keeps to
 * small sizes (for compute-sanitizer). Exits 77 when there is no GPU.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/segred.h"
#include "tests/gpu/gpu-test.h"
extern "C" {
#include "cuda/segs-moments.h"
#include "math/reduce.h"
#include "math/segments.h"
}

static const char *dt_name[] = { "i32", "i64", "u32", "u64", "f32", "f64" };
static const size_t dt_size[] = { 4, 8, 4, 8, 4, 8 };
static const char *op_name[] = { "sum", "min", "max", "sumsq", "argmin", "argmax", "moments" };

enum { RANDOM, WIDE, OUTLIERS, SPECIALS, ZEROS, CANCEL, SUBNORMAL, EXTREMES, NKINDS };
static const char *kind_name[] = { "random", "wide", "outliers", "specials",
				   "zeros", "cancel", "subnormal", "extremes" };

static double rnd_unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

static void put_f(int dt, unsigned char *p, size_t i, double f)
{
	if (dt == 4) {
		float v = (float)f;
		memcpy(p + 4 * i, &v, 4);
	} else {
		memcpy(p + 8 * i, &f, 8);
	}
}

static double get_f(int dt, const unsigned char *p, size_t i)
{
	if (dt == 4) {
		float v;
		memcpy(&v, p + 4 * i, 4);
		return v;
	}
	double v;
	memcpy(&v, p + 8 * i, 8);
	return v;
}

static void fill(int dt, int kind, std::vector<unsigned char> &h, size_t n)
{
	h.assign(n * dt_size[dt] + 8, 0);
	if (dt < 4) {
		for (size_t i = 0; i < n; i++) {
			uint64_t u = rnd();
			if (kind == ZEROS || kind == CANCEL)
				u %= 5;
			if (kind == EXTREMES)
				u = rnd() % 2 ? (dt == 0 ? 0x80000000ull : dt == 2 ? 0xffffffffull
									   : 1ull << 63)
					      : (dt == 0 ? 0x7fffffffull : dt == 2 ? 0 : ~0ull >> (dt == 1));
			memcpy(h.data() + i * dt_size[dt], &u, dt_size[dt]);
		}
		return;
	}
	const int span = dt == 4 ? 250 : 2000;
	for (size_t i = 0; i < n; i++) {
		double f = (rnd_unit() * 2 - 1);
		switch (kind) {
		case WIDE:
			f = ldexp(f, (int)(rnd() % (uint64_t)span) - span / 2);
			break;
		case OUTLIERS:
			if (rnd() % 97 == 0)
				f = ldexp(f, (int)(rnd() % 200) - 100);
			break;
		case SPECIALS: {
			uint64_t r = rnd() % 211;
			if (r == 0)
				f = NAN;
			else if (r == 1)
				f = INFINITY;
			else if (r == 2)
				f = -INFINITY;
			break;
		}
		case ZEROS:
			f = rnd() % 3 ? -0.0 : (rnd() % 5 ? 0.0 : f);
			break;
		case CANCEL:
			if (i % 2)
				f = -get_f(dt, h.data(), i - 1);
			else
				f = ldexp(f, (int)(rnd() % 60) - 30);
			break;
		case SUBNORMAL:
			f = dt == 4 ? ldexp(f, -130) : ldexp(f, -1030);
			if (rnd() % 7 == 0)
				f = ldexp(f, 60);
			break;
		case EXTREMES:
			f = (rnd() % 2 ? 1 : -1) * (dt == 4 ? 3.4028234663852886e38 : 1.7976931348623157e308);
			if (rnd() % 3 == 0)
				f = ldexp(f, -(int)(rnd() % 30));
			break;
		}
		put_f(dt, h.data(), i, f);
	}
}

/* Segment lengths: a mix whose shape depends on layout. */
static std::vector<uint64_t> make_offsets(int layout, size_t n)
{
	std::vector<uint64_t> off(1, 0);
	uint64_t at = 0;
	while (at < n) {
		uint64_t len;
		switch (layout) {
		case 0: len = rnd() % 24; break;                    /* short, many empty */
		case 1: len = 1 + rnd() % 9000; break;              /* up to a few tiles */
		case 2: len = rnd() % 4 == 0 ? rnd() % 3 : 1 + rnd() % 70000; break;
		default: len = n; break;                            /* one long segment */
		}
		if (len > n - at)
			len = n - at;
		at += len;
		off.push_back(at);
	}
	/* empty segments at the end, too */
	off.push_back(n);
	off.push_back(n);
	return off;
}

/* The CPU's record of one segment (16 bytes for argmin and argmax: the
 * value, then the index; 40 for moments). */
static void cpu_record(int op, int dt, const unsigned char *p, size_t n, uint64_t ddof,
		       uint64_t ret[5])
{
	gr_partial r;
	uint8_t rec[40];
	if (op == 3 && dt < 4) {
		/* integer sumsq on the GPU: the exact sum of the squares as the
		 * CPU rounds them */
		std::vector<double> sq(n ? n : 1);
		for (size_t i = 0; i < n; i++) {
			double d;
			switch (dt) {
			case 0: { int32_t v; memcpy(&v, p + 4 * i, 4); d = v; break; }
			case 1: { int64_t v; memcpy(&v, p + 8 * i, 8); d = (double)v; break; }
			case 2: { uint32_t v; memcpy(&v, p + 4 * i, 4); d = v; break; }
			default: { uint64_t v; memcpy(&v, p + 8 * i, 8); d = (double)v; break; }
			}
			sq[i] = d * d;
		}
		gr_reduce(GR_OP_SUM, GR_DT_F64, sq.data(), n, &r);
		gr_segs_record(GR_OP_SUM, GR_DT_F64, 0, &r, rec);
	} else {
		gr_reduce((gr_op)op, (gr_dtype)dt, p, n, &r);
		gr_segs_record((gr_op)op, (gr_dtype)dt, ddof, &r, rec);
	}
	memcpy(ret, rec, gr_segs_record_bytes((gr_op)op));
}

/* Launch segments [s0, s1) of off over h (on the device at dh) and
 * check every record; *zero is the scratch's zero bytes from its start
 * (segred.h), checked: the exact sums leave what they used zero, argmin
 * and argmax say none are. */
static void check(int op, int dt, int kind, int layout, const std::vector<unsigned char> &h,
		  const unsigned char *dh, const std::vector<uint64_t> &off, const uint64_t *doff,
		  size_t s0, size_t s1, void *drec, void *scratch, size_t scratch_bytes, size_t *zero)
{
	uint64_t k = s1 - s0;
	/* moments: the launch's sums at drec, made into records here */
	const bool mom = op == 6;
	const uint64_t ddof = mom && s0 > 0 ? 1 : 0;
	const unsigned rw = (unsigned)gr_segred_record_bytes(op, dt) / 8; /* words a segment */
	const unsigned w = mom ? 5 : rw;                                   /* words a record */
	uint64_t *at = (uint64_t *)drec + (mom ? 0 : s0 * rw);
	const size_t was = *zero;
	CU(gr_segred_launch(op, dt, dh, doff + s0, k, off[s0], off[s1], at, scratch, scratch_bytes,
			    zero, 0));
	CU(cudaDeviceSynchronize());
	const size_t used = k * gr_segred_scratch_per_seg(op, dt);
	if (op == 4 || op == 5) {
		CHECK(*zero == 0, "%s: the scratch is said to hold %zu zero bytes", op_name[op], *zero);
	} else if (used) {
		CHECK(*zero == (was > used ? was : used), "%s %s: %zu zero bytes said, %zu before, %zu used",
		      op_name[op], dt_name[dt], *zero, was, used);
		std::vector<uint64_t> sc(used / 8);
		CU(cudaMemcpy(sc.data(), scratch, used, cudaMemcpyDeviceToHost));
		size_t nz = 0;
		for (uint64_t v : sc)
			nz += v != 0;
		CHECK(nz == 0, "%s %s: %zu words of the scratch's first %zu bytes left non-zero",
		      op_name[op], dt_name[dt], nz, used);
	} else {
		CHECK(*zero == was, "%s: the scratch's zero bytes moved from %zu to %zu", op_name[op], was,
		      *zero);
	}
	std::vector<uint64_t> raw(k * rw), got(k * w);
	CU(cudaMemcpy(raw.data(), at, k * rw * 8, cudaMemcpyDeviceToHost));
	if (mom) {
		/* in two ranges, as the engine's threads make them */
		cuda_segs_moments_records((gr_dtype)dt, raw.data(), off.data() + s0, k, ddof,
					  (uint8_t *)got.data(), k / 3, k);
		cuda_segs_moments_records((gr_dtype)dt, raw.data(), off.data() + s0, k, ddof,
					  (uint8_t *)got.data(), 0, k / 3);
	}
	else
		got = raw;
	size_t size = dt_size[dt];
	for (uint64_t s = 0; s < k; s++) {
		uint64_t a = off[s0 + s], b = off[s0 + s + 1], want[5] = { 0 };
		cpu_record(op, dt, h.data() + a * size, (size_t)(b - a), ddof, want);
		for (unsigned j = 0; j < w; j++)
			CHECK(got[s * w + j] == want[j],
			      "%s %s %s layout %d: segment %llu of [%zu, %zu) ([%llu, %llu)), word %u: got "
			      "%016llx, want %016llx",
			      op_name[op], dt_name[dt], kind_name[kind], layout,
			      (unsigned long long)(s0 + s), s0, s1, (unsigned long long)a,
			      (unsigned long long)b, j, (unsigned long long)got[s * w + j],
			      (unsigned long long)want[j]);
	}
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	gpu_sms();
	const size_t n_big = quick ? 40000 : 3000000;
	const size_t scratch_bytes = (size_t)64 << 20;
	void *scratch;
	CU(cudaMalloc(&scratch, scratch_bytes));
	/* not zero to begin with: the first exact sum clears what it uses */
	CU(cudaMemset(scratch, 0xa5, scratch_bytes));
	size_t zero = 0;

	for (int dt = 0; dt < 6; dt++) {
		for (int kind = 0; kind < NKINDS; kind++) {
			if (dt < 4 && kind != RANDOM && kind != ZEROS && kind != CANCEL && kind != EXTREMES)
				continue;
			for (int layout = 0; layout < 4; layout++) {
				size_t n = layout == 0 ? n_big / 8 : n_big;
				if (kind != RANDOM && layout == 3)
					n = quick ? 20000 : 1000000;
				std::vector<unsigned char> h;
				fill(dt, kind, h, n);
				std::vector<uint64_t> off = make_offsets(layout, n);
				size_t k = off.size() - 1;
				unsigned char *dh = to_device(h.data(), h.size());
				uint64_t *doff = (uint64_t *)to_device(off.data(), off.size() * 8);
				void *drec;
				CU(cudaMalloc(&drec, k * gr_segred_record_bytes(6, dt)));
				for (int op = 0; op < 7; op++) {
					size_t per = gr_segred_scratch_per_seg(op, dt);
					if (per && per * k > scratch_bytes)
						continue;
					check(op, dt, kind, layout, h, dh, off, doff, 0, k, drec, scratch,
					      scratch_bytes, &zero);
					/* a middle run of the segments, as the engine cuts them
					 * (exact sums: on the scratch the run above left zero) */
					if (k > 4)
						check(op, dt, kind, layout, h, dh, off, doff, k / 3, k - k / 4,
						      drec, scratch, scratch_bytes, &zero);
				}
				CU(cudaFree(drec));
				CU(cudaFree(doff));
				CU(cudaFree(dh));
			}
		}
	}

	/* refusals */
	{
		std::vector<uint64_t> off = { 0, 10, 20 };
		uint64_t *doff = (uint64_t *)to_device(off.data(), off.size() * 8);
		unsigned char *dh;
		CU(cudaMalloc((void **)&dh, 256));
		void *drec;
		CU(cudaMalloc(&drec, 16));
		CHECK(gr_segred_launch(0, 4, dh, doff, 2, 0, 20, drec, scratch, 8, NULL, 0) ==
			      (int)cudaErrorInvalidValue,
		      "a scratch too small is refused");
		CHECK(gr_segred_launch(0, 4, dh + 2, doff, 2, 0, 20, drec, scratch, scratch_bytes, NULL, 0) ==
			      (int)cudaErrorInvalidValue,
		      "misaligned data is refused");
		CHECK(gr_segred_launch(7, 4, dh, doff, 2, 0, 20, drec, scratch, scratch_bytes, NULL, 0) ==
			      (int)cudaErrorInvalidValue,
		      "an op past moments is not taken");
		CHECK(gr_segred_launch(4, 4, dh, doff, 2, 0, 20, drec, scratch, 16, NULL, 0) ==
			      (int)cudaErrorInvalidValue,
		      "an argmin's scratch too small is refused");
		CHECK(gr_segred_launch(1, 0, dh, doff, 2, 0, GR_SEGRED_MAX_ELEMS + 1, drec, scratch,
				       scratch_bytes, NULL, 0) == (int)cudaErrorInvalidValue,
		      "too many elements are refused");
		CU(cudaGetLastError());
		CU(cudaFree(drec));
		CU(cudaFree(dh));
		CU(cudaFree(doff));
	}
	CU(cudaFree(scratch));
	printf("%lu checks, %lu failures\n", checks, failures);
	return failures ? 1 : 0;
}
