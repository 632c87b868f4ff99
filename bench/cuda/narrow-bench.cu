/*
 * gpured-narrow-bench: the narrow dtypes' kernels (cuda/narrow.h) next to
 * the float4 grid-stride read kernel over the same bytes, in one run.
 *
 * For every (op, dtype) that has a kernel, n = 2^24, 2^26, 2^28 elements
 * (--hi E: up to 2^E): back-to-back throughput (blocks of launches
 * between two events, each launch on another place of a large pool, as
 * gpured-exact-bench times; ours and the read kernel's blocks taken in
 * turn, five times, medians), GB/s of the array's bytes, microseconds a
 * launch and the ratio ours/read. Data: floats uniform in [-1, 1)
 * (rounded to the dtype), integers random bits; bf16 and f16 sums also on
 * "wide" data, random bits over every finite exponent, where the bf16
 * sum's careful path runs, and the 16-bit floats' sums of squares and
 * moments there too. moments is gr_narrow_moments_launch's kernel.
 * torch.sum's times for the same sizes come from bench/cuda/narrow-torch.py,
 * run on the same machine.
 *
 * --sweep: the f16, bf16 and f8e5m2 sums' kernel forms instead (vectors a
 * lane a group, blocks an SM), at 2^24 to 2^28; --forms: bf16 argmax's
 * and bf16 moments' forms (and moments' earlier form, each group widened
 * to f32 for the f32 moments kernel's group; "bits": the elements' doubles
 * built from their bits, not converted), likewise.
 *
 *   gpured-narrow-bench [--hi E] [--op NAME] [--dtype NAME] [--sweep | --forms]
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "bench/cuda/bench-common.cuh"
#include "cuda/narrow-argm.cuh"
#include "cuda/narrow-mom-bf16.cuh"
#include "cuda/narrow-moments.cuh"
#include "cuda/narrow-ops.cuh"

/* gr_op's and gr_dtype's values and names */
static const char *op_names[] = {"sum", "min", "max", "sumsq", "argmin", "argmax", "moments"};
static const char *dt_names[] = {"i32", "i64", "u32", "u64", "f32", "f64", "f16", "bf16",
				 "f8e4m3", "f8e5m2", "i8", "u8", "i16", "u16"};
static unsigned dt_size(int dt)
{
	return dt == 6 || dt == 7 || dt == 12 || dt == 13 ? 2 : 1;
}

/* a float's value in the dtype's bits (round to nearest even), finite */
static __device__ uint32_t to_narrow(float f, int dt)
{
	uint32_t b = __float_as_uint(f);
	if (dt == 7) /* bf16 */
		return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
	/* f16 by the hardware; the f8s from it, by truncation */
	unsigned short h;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
	if (dt == 6)
		return h;
	if (dt == 9) /* e5m2: the top byte of an f16 */
		return h >> 8;
	/* e4m3: exponent rebiased (|f| < 1: f16 exponent 15 - k, e4m3 7 - k) */
	uint32_t s = (h >> 8) & 0x80u, e = (h >> 10) & 0x1fu, m = (h >> 7) & 7u;
	if (e < 9)
		return s; /* below e4m3's normals: a zero */
	return s | (e - 8) << 3 | m;
}

/* kind 0: uniform [-1, 1) (integers: random bits); 1: random bits with
 * every finite exponent (16-bit floats) */
__global__ void fill_narrow(unsigned char *p, size_t n, int dt, int kind, uint64_t seed)
{
	const unsigned size = dt == 6 || dt == 7 || dt == 12 || dt == 13 ? 2 : 1;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint64_t x = grb::bench_mix(i, seed);
		uint32_t b;
		if (dt >= 10) {
			b = (uint32_t)x;
		} else if (kind == 1) {
			b = (uint32_t)x & 0xffffu;
			uint32_t em = dt == 7 ? 0x7f80u : 0x7c00u;
			if ((b & em) == em)
				b &= ~em | (em >> 1); /* finite */
		} else {
			float u = (float)((double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0);
			b = to_narrow(u, dt);
		}
		if (size == 2)
			((uint16_t *)p)[i] = (uint16_t)b;
		else
			p[i] = (unsigned char)b;
	}
}

/* the kernel form of Op with NG vectors a lane a group and BPS blocks an
 * SM */
template <class Op, unsigned NG, unsigned BPS, bool PIPE = true> struct form {
	static void launch(const void *d, uint64_t n, gr_exact_scratch *s, uint64_t *raw,
			   gr_exact_sum *x, int sms, cudaStream_t st)
	{
		CU((grn::launch<Op, NG, BPS, PIPE>(d, n, s, raw, x, sms, st)));
	}
};
typedef void (*launch_fn)(const void *, uint64_t, gr_exact_scratch *, uint64_t *, gr_exact_sum *,
			  int, cudaStream_t);
template <class Op> static void forms(std::vector<std::pair<const char *, launch_fn>> &f)
{
	f.push_back({"G8 B2", form<Op, 8, 2>::launch});
	f.push_back({"G4 B2", form<Op, 4, 2>::launch});
	f.push_back({"G2 B4", form<Op, 2, 4>::launch});
	f.push_back({"G3 B3", form<Op, 3, 3>::launch});
	f.push_back({"G8 B2 one set", form<Op, 8, 2, false>::launch});
}

/* bf16 argmax's and moments' forms: (name, launch at d of n elements);
 * "bulk TGxNB": the groups through shared memory, tiles of TG groups, NB
 * buffers a warp (narrow-bulk.cuh), "T": threads a block, 256 unless
 * named */
struct bform {
	const char *name;
	void (*launch)(const void *d, uint64_t n, gr_exact_scratch *s, uint64_t *raw,
		       gr_moments_scratch *ms, gr_moments_sums *mo, int sms, cudaStream_t st);
};
template <unsigned NG, unsigned BPS>
static void argmax_form(const void *d, uint64_t n, gr_exact_scratch *s, uint64_t *raw,
			gr_moments_scratch *, gr_moments_sums *, int sms, cudaStream_t st)
{
	CU((grn::launch_argm<grn::BF16, true, NG, BPS>(d, n, s, (gr_argm_result *)raw, sms, st)));
}
template <unsigned NG, unsigned BPS, bool BITS = false, unsigned TG = 1, unsigned NB = 0,
	  unsigned NT = grn::THREADS>
static void mom_form(const void *d, uint64_t n, gr_exact_scratch *, uint64_t *,
		     gr_moments_scratch *ms, gr_moments_sums *mo, int sms, cudaStream_t st)
{
	CU((grn::launch_mom_bf16<NG, BPS, BITS, TG, NB, NT>(d, n, ms, mo, sms, st)));
}
static void mom_f32_group(const void *d, uint64_t n, gr_exact_scratch *, uint64_t *,
			  gr_moments_scratch *ms, gr_moments_sums *mo, int sms, cudaStream_t st)
{
	CU((grn::launch_moments<grn::BF16>(d, n, ms, mo, sms, st)));
}
static const bform bforms[] = {
	{"argmax G8 B2", argmax_form<8, 2>},   {"argmax G4 B4", argmax_form<4, 4>},
	{"argmax G4 B2", argmax_form<4, 2>},   {"argmax G16 B1", argmax_form<16, 1>},
	{"moments G4 B2", mom_form<4, 2>},     {"moments G2 B2", mom_form<2, 2>},
	{"moments G8 B1", mom_form<8, 1>},     {"moments f32 group", mom_f32_group},
	{"moments G4 B2 bits", mom_form<4, 2, true>}, {"moments G2 B4 bits", mom_form<2, 4, true>},
	{"moments G8 B1 bits", mom_form<8, 1, true>}, {"moments G2 B4", mom_form<2, 4>},
	{"moments G4 B2 bulk 1x3", mom_form<4, 2, false, 1, 3>},
	{"moments G4 B2 bulk 1x4", mom_form<4, 2, false, 1, 4>},
	{"moments G4 B2 bulk 2x2", mom_form<4, 2, false, 2, 2>},
	{"moments G4 B3 bulk 1x3", mom_form<4, 3, false, 1, 3>},
	{"moments G4 B2 bulk 2x2 T288", mom_form<4, 2, false, 2, 2, 288>},
	{"moments G4 B2 bulk 2x2 T320", mom_form<4, 2, false, 2, 2, 320>},
	{"moments G4 B4 bulk 2x2 T160", mom_form<4, 4, false, 2, 2, 160>},
	{"moments G4 B5 bulk 2x2 T128", mom_form<4, 5, false, 2, 2, 128>},
	{"moments G4 B2 bulk 1x4 T320", mom_form<4, 2, false, 1, 4, 320>},
};

int main(int argc, char **argv)
{
	bool sweep = false, bf = false;
	for (int i = 1; i < argc; i++) {
		sweep |= !strcmp(argv[i], "--sweep");
		bf |= !strcmp(argv[i], "--forms");
	}
	int hi = 28;
	const char *only_op = NULL, *only_dt = NULL;
	for (int i = 1; i + 1 < argc; i++) {
		if (!strcmp(argv[i], "--hi"))
			hi = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--op"))
			only_op = argv[i + 1];
		else if (!strcmp(argv[i], "--dtype"))
			only_dt = argv[i + 1];
	}
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no GPU\n");
		return 77;
	}
	cudaDeviceProp prop;
	CU(cudaGetDeviceProperties(&prop, 0));
	const int sms = prop.multiProcessorCount;
	int per_sm = 0;
	CU(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grb::read_bw_kernel, 256, 0));
	const int bw_blocks = sms * per_sm;
	printf("# %s, %d SMs; GB/s of the array's bytes, medians of 5 blocks of launches\n",
	       prop.name, sms);
	printf("%-6s %-7s %-5s %-4s %10s %10s %9s %9s %7s\n", "op", "dtype", "data", "lg n",
	       "ours GB/s", "read GB/s", "ours us", "read us", "ratio");

	unsigned char *pool;
	CU(cudaMalloc((void **)&pool, grb::POOL));
	gr_exact_scratch *scratch;
	CU(cudaMalloc((void **)&scratch, sizeof(*scratch)));
	CU(cudaMemset(scratch, 0, sizeof(*scratch)));
	uint64_t *raw;
	gr_exact_sum *xout;
	float *sink;
	CU(cudaMalloc((void **)&raw, 16));
	CU(cudaMalloc((void **)&xout, sizeof(*xout)));
	CU(cudaMalloc((void **)&sink, 4));
	gr_moments_scratch *mscratch;
	gr_moments_sums *mout;
	CU(cudaMalloc((void **)&mscratch, sizeof(*mscratch)));
	CU(cudaMemset(mscratch, 0, sizeof(*mscratch)));
	CU(cudaMalloc((void **)&mout, sizeof(*mout)));
	cudaStream_t st;
	cudaEvent_t e0, e1;
	CU(cudaStreamCreate(&st));
	CU(cudaEventCreate(&e0));
	CU(cudaEventCreate(&e1));

	if (bf) {
		for (int kind = 0; kind < 2; kind++) {
			const size_t pool_n = grb::POOL / 2;
			fill_narrow<<<sms * 8, 256, 0, st>>>(pool, pool_n, 7, kind, 0x1234567ull + 7);
			CU(cudaStreamSynchronize(st));
			for (int lg = 24; lg <= hi; lg += 2) {
				const size_t n = (size_t)1 << lg, bytes = n * 2;
				const size_t nf = sizeof(bforms) / sizeof(bforms[0]);
				std::vector<std::vector<double>> t(nf + 1);
				for (int rep = 0; rep < 5; rep++) {
					for (size_t k = 0; k < nf; k++)
						t[k].push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
							bforms[k].launch(pool + at, n, scratch, raw, mscratch, mout,
									 sms, st);
						}));
					t[nf].push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
						grb::read_bw(pool + at, bytes, bw_blocks, sink, st);
					}));
				}
				const double r = grb::median(t[nf]);
				for (size_t k = 0; k < nf; k++) {
					const double o = grb::median(t[k]);
					printf("%-6s %-7s %-5s %-4d %10.0f %10.0f %9.1f %9.1f %7.3f  %s\n", "form",
					       "bf16", kind ? "wide" : "unif", lg, o, r, bytes / o / 1e3,
					       bytes / r / 1e3, o / r, bforms[k].name);
				}
				fflush(stdout);
			}
		}
		return 0;
	}
	if (sweep) {
		for (int dt : {6, 7, 9}) {
			std::vector<std::pair<const char *, launch_fn>> f;
			if (dt == 6)
				forms<grn::SumFix<grn::F16, false>>(f);
			else if (dt == 7)
				forms<grn::SumBf16>(f);
			else
				forms<grn::SumF8<grn::E5M2>>(f);
			const size_t pool_n = grb::POOL / dt_size(dt);
			fill_narrow<<<sms * 8, 256, 0, st>>>(pool, pool_n, dt, 0, 0x1234567ull + dt);
			CU(cudaStreamSynchronize(st));
			for (int lg = 24; lg <= hi; lg += 2) {
				const size_t n = (size_t)1 << lg, bytes = n * dt_size(dt);
				std::vector<std::vector<double>> t(f.size() + 1);
				for (int rep = 0; rep < 5; rep++) {
					for (size_t k = 0; k < f.size(); k++)
						t[k].push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
							f[k].second(pool + at, n, scratch, raw, xout, sms, st);
						}));
					t[f.size()].push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
						grb::read_bw(pool + at, bytes, bw_blocks, sink, st);
					}));
				}
				const double r = grb::median(t[f.size()]);
				for (size_t k = 0; k < f.size(); k++) {
					const double o = grb::median(t[k]);
					printf("sum    %-7s %-5s %-4d %10.0f %10.0f %9.1f %9.1f %7.3f  %s\n",
					       dt_names[dt], "unif", lg, o, r, bytes / o / 1e3, bytes / r / 1e3,
					       o / r, f[k].first);
				}
				fflush(stdout);
			}
		}
		return 0;
	}
	for (int dt = 6; dt <= 13; dt++) {
		if (only_dt && strcmp(only_dt, dt_names[dt]))
			continue;
		for (int kind = 0; kind < 2; kind++) {
			if (kind == 1 && dt != 6 && dt != 7)
				continue;
			const size_t pool_n = grb::POOL / dt_size(dt);
			fill_narrow<<<sms * 8, 256, 0, st>>>(pool, pool_n, dt, kind, 0x1234567ull + dt);
			CU(cudaGetLastError());
			CU(cudaStreamSynchronize(st));
			for (int op = 0; op < 7; op++) {
				if (!gr_narrow_has_kernel(op, dt) || (only_op && strcmp(only_op, op_names[op])))
					continue;
				if (kind == 1 && op != 0 && op != 3 && op != 6)
					continue;
				for (int lg = 24; lg <= hi; lg += 2) {
					const size_t n = (size_t)1 << lg, bytes = n * dt_size(dt);
					std::vector<double> ours, rd;
					for (int rep = 0; rep < 5; rep++) {
						ours.push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
							if (op == 6)
								CU((cudaError_t)gr_narrow_moments_launch(
									dt, pool + at, n, mscratch, mout, sms, st));
							else
								CU((cudaError_t)gr_narrow_launch(op, dt, pool + at, n,
												 scratch, raw, xout,
												 sms, st));
						}));
						rd.push_back(grb::block_gbs(bytes, 0, e0, e1, st, [&](size_t at) {
							grb::read_bw(pool + at, bytes, bw_blocks, sink, st);
						}));
					}
					double o = grb::median(ours), r = grb::median(rd);
					printf("%-6s %-7s %-5s %-4d %10.0f %10.0f %9.1f %9.1f %7.3f\n", op_names[op],
					       dt_names[dt], kind ? "wide" : "unif", lg, o, r, bytes / o / 1e3,
					       bytes / r / 1e3, o / r);
					fflush(stdout);
				}
			}
		}
	}
	return 0;
}
