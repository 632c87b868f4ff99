/*
 * gpured-device-bench: an f32 array in GPU memory, mapped once (a VMM
 * allocation exported as a file descriptor) and summed many times by one
 * client through the daemon, against the GPU's own ceilings measured in
 * the same run: a plain float4 read-bandwidth kernel over the same array,
 * and the kernels the daemon runs launched directly (single-launch
 * latency: the rounding kernel, and for floats the exact sum's, which is
 * the daemon's). One JSON line per size.
 *
 *   gpured-device-bench [-g GPU] [-S SPIN_US] SOCKET [REQUESTS [DTYPE [LOG2,...]]]
 *       (f32, f64, i32 or a narrow dtype: f16, bf16, f8e4m3, f8e5m2, i8,
 *       u8, i16, u16, whose direct launch is the narrow kernel's;
 *       sizes 2^16,2^24,2^26,2^28 f32 bytes by default;
 *       the array on GPU 0 unless -g says; -S: the client spins that long
 *       for each reply before it sleeps, gpured_set_spin())
 */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <getopt.h>
#include <time.h>
#include <unistd.h>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

#include "bench/cuda/bench-check.h"
#include "client/gpured.h"
#include "cuda/exact.h"
#include "cuda/kernel.h"
#include "cuda/narrow.h"

template <typename F> static F drv(const char *name)
{
	void *fn = nullptr;
	cudaDriverEntryPointQueryResult q;
	CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
	if (q != cudaDriverEntryPointSuccess || !fn) {
		fprintf(stderr, "no %s\n", name);
		exit(1);
	}
	return (F)fn;
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

template <typename T> __global__ void fill_ones(T *p, size_t n, T one = (T)1)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		p[i] = one;
}

/* the bits of 1 in a narrow dtype (0: not one of them) */
static unsigned narrow_one(gpured_dtype dt)
{
	switch (dt) {
	case GPURED_F16: return 0x3c00;
	case GPURED_BF16: return 0x3f80;
	case GPURED_F8E4M3: return 0x38;
	case GPURED_F8E5M2: return 0x3c;
	case GPURED_I8:
	case GPURED_U8:
	case GPURED_I16:
	case GPURED_U16: return 1;
	default: return 0;
	}
}

/* the read ceiling: every float4 read once, a sum kept so nothing is elided */
__global__ void read_bw(const float4 *p, size_t n4, float *out)
{
	float s = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
		float4 v = __ldg(p + i);
		s += v.x + v.y + v.z + v.w;
	}
	if (s == -1.0f)
		*out = s;
}

int main(int argc, char **argv)
{
	int gpu = 0, opt;
	unsigned spin_us = 0;
	while ((opt = getopt(argc, argv, "g:S:")) != -1) {
		if (opt == 'g')
			gpu = atoi(optarg);
		else if (opt == 'S')
			spin_us = (unsigned)atoi(optarg);
		else
			optind = argc + 1;
	}
	argc -= optind - 1;
	argv += optind - 1;
	if (argc < 2) {
		fprintf(stderr, "usage: gpured-device-bench [-g GPU] [-S SPIN_US] SOCKET [REQUESTS [DTYPE [LOG2,...]]]\n");
		return 2;
	}
	int reqs = argc > 2 ? atoi(argv[2]) : 200;
	gpured_dtype dt = GPURED_F32;
	if (argc > 3 && gpured_dtype_parse(argv[3], &dt) < 0) {
		fprintf(stderr, "unknown dtype %s\n", argv[3]);
		return 2;
	}
	size_t es = gpured_dtype_size(dt);
	bool flt = dt == GPURED_F32 || dt == GPURED_F64;
	const unsigned one = narrow_one(dt);
	CK(cudaSetDevice(gpu));
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, gpu));
	char uuid[64];
	const unsigned char *u = (const unsigned char *)p.uuid.bytes;
	snprintf(uuid, sizeof(uuid),
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);

	auto create = drv<CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long)>("cuMemCreate");
	auto gran = drv<CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)>("cuMemGetAllocationGranularity");
	auto reserve = drv<CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)>("cuMemAddressReserve");
	auto map = drv<CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long)>("cuMemMap");
	auto access = drv<CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)>("cuMemSetAccess");
	auto exp = drv<CUresult (*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long)>("cuMemExportToShareableHandle");

	gpured_t *g;
	if (gpured_connect(argv[1], &g) < 0) {
		fprintf(stderr, "cannot connect to %s\n", argv[1]);
		return 1;
	}
	gpured_set_spin(g, spin_us);
	/* the exact sum's scratch, and its result in mapped host memory, as
	 * the daemon has them */
	gr_exact_scratch *xscr;
	gr_exact_sum *xout, *xout_d;
	CK(cudaMalloc(&xscr, sizeof(*xscr)));
	CK(cudaMemset(xscr, 0, sizeof(*xscr)));
	CK(cudaHostAlloc(&xout, sizeof(*xout), cudaHostAllocMapped));
	CK(cudaHostGetDevicePointer(&xout_d, xout, 0));
	float *dout;
	uint64_t *partials, *out;
	uint32_t *ticket;
	CK(cudaMalloc(&dout, 4));
	CK(cudaMalloc(&partials, 2 * 8192 * sizeof(uint64_t)));
	CK(cudaMalloc(&out, sizeof(uint64_t)));
	CK(cudaMalloc(&ticket, 8193 * sizeof(uint32_t)));
	CK(cudaMemset(ticket, 0, 8193 * sizeof(uint32_t)));
	cudaEvent_t a, b;
	CK(cudaEventCreate(&a));
	CK(cudaEventCreate(&b));

	std::vector<int> sizes = { 16, 24, 26, 28 };
	if (argc > 4) {
		sizes.clear();
		for (char *t = strtok(argv[4], ","); t; t = strtok(NULL, ","))
			sizes.push_back(atoi(t));
	}
	for (int lg : sizes) {
		size_t n = (size_t)1 << lg, bytes = n * es;
		/* the same bytes as f32 at this size */
		n = n * 4 / es;
		bytes = n * es;
		CUmemAllocationProp prop = {};
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = gpu;
		prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		size_t gr = 0;
		gran(&gr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
		size_t size = (bytes + gr - 1) / gr * gr;
		CUmemGenericAllocationHandle h;
		CUdeviceptr ptr;
		int fd = -1;
		if (create(&h, size, &prop, 0) || reserve(&ptr, size, gr, 0, 0) || map(ptr, size, 0, h, 0)) {
			fprintf(stderr, "allocation failed\n");
			return 1;
		}
		CUmemAccessDesc acc = {};
		acc.location = prop.location;
		acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		access(ptr, size, &acc, 1);
		exp(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
		void *x = (void *)ptr;
		if (one && es == 2)
			fill_ones<<<1024, 256>>>((uint16_t *)x, n, (uint16_t)one);
		else if (one)
			fill_ones<<<1024, 256>>>((uint8_t *)x, n, (uint8_t)one);
		else if (dt == GPURED_F64)
			fill_ones<<<1024, 256>>>((double *)x, n);
		else if (dt == GPURED_I32)
			fill_ones<<<1024, 256>>>((int32_t *)x, n);
		else
			fill_ones<<<1024, 256>>>((float *)x, n);
		CK(cudaDeviceSynchronize());

		/* the ceilings */
		std::vector<float> bw, lat, xlat;
		for (int k = 0; k < 21; k++) {
			CK(cudaEventRecord(a));
			read_bw<<<p.multiProcessorCount * 8, 256>>>((const float4 *)x, bytes / 16, dout);
			CK(cudaEventRecord(b));
			CK(cudaEventSynchronize(b));
			float ms;
			CK(cudaEventElapsedTime(&ms, a, b));
			bw.push_back((float)(bytes / (ms * 1e-3) / 1e9));
			CK(cudaEventRecord(a));
			if (one)
				CK((cudaError_t)gr_narrow_launch(0, (int)dt, x, n, xscr, out, xout_d,
								 p.multiProcessorCount, 0));
			else
				CK((cudaError_t)gr_kernel_launch_single(0, (int)dt, x, n, partials,
									ticket, out,
									p.multiProcessorCount, 0));
			CK(cudaEventRecord(b));
			CK(cudaEventSynchronize(b));
			CK(cudaEventElapsedTime(&ms, a, b));
			lat.push_back(ms * 1000);
			if (flt) {
				CK(cudaEventRecord(a));
				CK((cudaError_t)gr_exact_launch_single(
					dt == GPURED_F64 ? GR_EXACT_F64 : GR_EXACT_F32, x, n, xscr, xout_d,
					p.multiProcessorCount, 0));
				CK(cudaEventRecord(b));
				CK(cudaEventSynchronize(b));
				CK(cudaEventElapsedTime(&ms, a, b));
				xlat.push_back(ms * 1000);
			}
		}
		std::sort(bw.begin(), bw.end());
		std::sort(lat.begin(), lat.end());
		std::sort(xlat.begin(), xlat.end());
		/* the kernel the daemon runs for this sum */
		double klat = flt ? xlat[10] : lat[10];

		uint64_t id;
		if (gpured_map_cuda_fd(g, fd, bytes, uuid, &id) < 0) {
			fprintf(stderr, "map: %s\n", gpured_errmsg(g));
			return 1;
		}
		gpured_value v;
		for (int k = 0; k < 5; k++)
			gpured_reduce_region(g, id, GPURED_OP_SUM, dt, 0, n, &v);
		if (gpured_value_as_double(&v) != (double)n) {
			fprintf(stderr, "wrong sum %.17g of %zu ones\n", v.v.f, n);
			return 1;
		}
		/* pipeline 4 */
		uint32_t rid;
		double t0 = now_us();
		int sent = 0, got = 0;
		for (; sent < 4; sent++)
			gpured_submit_region(g, id, GPURED_OP_SUM, dt, 0, n, &rid);
		while (got < reqs) {
			if (gpured_wait(g, &rid, &v) < 0 || gpured_value_as_double(&v) != (double)n) {
				fprintf(stderr, "wait: %s\n", gpured_errmsg(g));
				return 1;
			}
			got++;
			if (sent < reqs) {
				gpured_submit_region(g, id, GPURED_OP_SUM, dt, 0, n, &rid);
				sent++;
			}
		}
		double secs = (now_us() - t0) / 1e6;
		/* one at a time */
		std::vector<double> rt;
		for (int k = 0; k < (lg <= 16 ? 4096 : 50); k++) {
			double t = now_us();
			gpured_reduce_region(g, id, GPURED_OP_SUM, dt, 0, n, &v);
			rt.push_back(now_us() - t);
		}
		std::sort(rt.begin(), rt.end());
		/* the daemon's own view of the same requests: the last byte of
		 * each to its reply, over its window of the latest requests
		 * (whole microseconds) */
		gpured_stats_t st = {};
		gpured_stats(g, &st);
		printf("{\"dtype\":\"%s\",\"gpu\":%d,\"spin_us\":%u,\"elements\":%zu,\"bytes\":%zu,"
		       "\"gpured_gb_per_s\":%.1f,\"gpured_req_per_s\":%.1f,"
		       "\"read_kernel_gb_per_s\":%.1f,\"ratio_to_read\":%.3f,\"rtt_p50_us\":%.1f,"
		       "\"daemon_p50_us\":%.0f,\"kernel_launch_us\":%.1f,\"exact_launch_us\":%.1f,"
		       "\"rtt_minus_kernel_us\":%.1f}\n",
		       gpured_dtype_name(dt), gpu, spin_us, n, bytes, reqs * (double)bytes / secs / 1e9,
		       reqs / secs, bw[10], reqs * (double)bytes / secs / 1e9 / bw[10], rt[rt.size() / 2],
		       st.latency_p50_us, lat[10], flt ? xlat[10] : 0.0, rt[rt.size() / 2] - klat);
		fflush(stdout);
		gpured_unmap(g, id);
		close(fd);
	}
	gpured_close(g);
	return 0;
}
