/*
 * Arrays on the GPU reduced where they lie, through the real daemon and
 * libgpured: memory from cudaMalloc handed over as an IPC handle, and a
 * virtual-memory allocation exported as a file descriptor; every op and
 * dtype at odd sizes and offsets against the same elements sent over the
 * socket (all bit for bit, float sums and sums of squares too; a float
 * sum or sum of squares at an offset that splits an element is refused,
 * but for the narrow dtypes, which go through the host there);
 * every bad input (a device the daemon does not serve, bytes beyond the
 * allocation, 64 bytes of garbage, a handle of freed memory, a descriptor
 * that is not a CUDA allocation, IPC handles while the option is off);
 * cumsum of a VMM allocation into another mapped writable, every dtype
 * bit for bit against the socket, in place, and its refusals; and many
 * map/unmap cycles leaving the daemon's GPU memory and descriptors flat;
 * and on every GPU in turn, an array there reduced there (the daemon's
 * jobs and regions per device say where). Exits 77 where there is no GPU.
 *
 *   test-device-map GPURED
 */
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/gpured.h"
#include "tests/gpu/gpu-rnd.h"

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)
#define CK(x) CHECK((x) == cudaSuccess, "%s", cudaGetErrorString(x))

static const char *gpured_path;
static pid_t daemon_pid;

/* a failed check exits: the daemon goes with it */
static void daemon_reap(void)
{
	if (daemon_pid > 0)
		kill(daemon_pid, SIGKILL);
}

struct daemon_proc {
	pid_t pid;
	char dir[64], sock[96];
};

static void daemon_start(daemon_proc *d, const char *ipc)
{
	snprintf(d->dir, sizeof(d->dir), "/tmp/gpured-dm-XXXXXX");
	CHECK(mkdtemp(d->dir), "mkdtemp");
	snprintf(d->sock, sizeof(d->sock), "%s/s", d->dir);
	d->pid = fork();
	CHECK(d->pid >= 0, "fork");
	if (d->pid == 0) {
		execl(gpured_path, gpured_path, "--socket", d->sock, "--backend", "cuda",
		      "--allow-cuda-ipc", ipc, "--config", "/dev/null", (char *)NULL);
		_exit(127);
	}
	daemon_pid = d->pid;
	for (int i = 0; i < 400; i++) {
		if (access(d->sock, F_OK) == 0)
			return;
		usleep(25000);
	}
	CHECK(0, "daemon did not start");
}

static void daemon_stop(daemon_proc *d)
{
	int st;
	kill(d->pid, SIGTERM);
	daemon_pid = 0;
	CHECK(waitpid(d->pid, &st, 0) == d->pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "daemon exit status %d", st);
	unlink(d->sock);
	rmdir(d->dir);
}

static int open_fds(pid_t pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
	DIR *dir = opendir(p);
	int n = 0;
	if (!dir)
		return -1;
	while (readdir(dir))
		n++;
	closedir(dir);
	return n;
}

/* the driver's virtual-memory calls, through the runtime (no libcuda link) */
template <typename F> static F drv(const char *name)
{
	void *fn = nullptr;
	cudaDriverEntryPointQueryResult q;
	CK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q));
	CHECK(q == cudaDriverEntryPointSuccess && fn, "%s", name);
	return (F)fn;
}

/* A VMM allocation of at least bytes on device 0, exported as an fd. */
struct vmm {
	CUmemGenericAllocationHandle h;
	CUdeviceptr ptr;
	size_t size;
	int fd;
};

/* The driver's virtual-memory calls, and an exportable allocation's
 * properties on dev. */
struct vmm_api {
	CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
	CUresult (*gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
	CUresult (*exp)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
	CUmemAllocationProp prop;
	size_t granule;
};

static vmm_api vmm_api_of(int dev)
{
	vmm_api a = {};
	a.create = drv<decltype(a.create)>("cuMemCreate");
	a.gran = drv<decltype(a.gran)>("cuMemGetAllocationGranularity");
	a.reserve = drv<decltype(a.reserve)>("cuMemAddressReserve");
	a.map = drv<decltype(a.map)>("cuMemMap");
	a.access = drv<decltype(a.access)>("cuMemSetAccess");
	a.exp = drv<decltype(a.exp)>("cuMemExportToShareableHandle");
	a.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	a.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	a.prop.location.id = dev;
	a.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	CHECK(a.gran(&a.granule, &a.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS,
	      "granularity");
	return a;
}

/* A new allocation of size bytes mapped at ptr, readable and writable on
 * its device, and exported: its handle and descriptor. */
static void vmm_map_new(const vmm_api &a, CUdeviceptr ptr, size_t size,
			CUmemGenericAllocationHandle *h, int *fd)
{
	CHECK(a.create(h, size, &a.prop, 0) == CUDA_SUCCESS, "cuMemCreate");
	CHECK(a.map(ptr, size, 0, *h, 0) == CUDA_SUCCESS, "map");
	CUmemAccessDesc acc = {};
	acc.location = a.prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CHECK(a.access(ptr, size, &acc, 1) == CUDA_SUCCESS, "access");
	CHECK(a.exp(fd, *h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS, "export");
}

static vmm vmm_new(size_t bytes, int dev = 0)
{
	vmm_api a = vmm_api_of(dev);
	vmm v = {};
	v.size = (bytes + a.granule - 1) / a.granule * a.granule;
	CHECK(a.reserve(&v.ptr, v.size, a.granule, 0, 0) == CUDA_SUCCESS, "reserve");
	vmm_map_new(a, v.ptr, v.size, &v.h, &v.fd);
	return v;
}

static void vmm_free(vmm &v)
{
	auto unmap = drv<CUresult (*)(CUdeviceptr, size_t)>("cuMemUnmap");
	auto afree = drv<CUresult (*)(CUdeviceptr, size_t)>("cuMemAddressFree");
	auto release = drv<CUresult (*)(CUmemGenericAllocationHandle)>("cuMemRelease");
	unmap(v.ptr, v.size);
	afree(v.ptr, v.size);
	release(v.h);
	close(v.fd);
}

/* A range of n allocations of one granule each, mapped back to back
 * from one reservation, each exported: what expandable segments make. */
struct vmm_parts {
	CUdeviceptr ptr;
	size_t gran, n;
	std::vector<CUmemGenericAllocationHandle> h;
	std::vector<int> fd;
	std::vector<size_t> size;
};

static vmm_parts vmm_parts_new(size_t n, int dev = 0)
{
	vmm_api a = vmm_api_of(dev);
	vmm_parts v = {};
	v.gran = a.granule;
	v.n = n;
	CHECK(a.reserve(&v.ptr, n * v.gran, v.gran, 0, 0) == CUDA_SUCCESS, "reserve");
	for (size_t i = 0; i < n; i++) {
		CUmemGenericAllocationHandle h;
		int fd = -1;
		vmm_map_new(a, v.ptr + i * v.gran, v.gran, &h, &fd);
		v.h.push_back(h);
		v.fd.push_back(fd);
		v.size.push_back(v.gran);
	}
	return v;
}

static void vmm_parts_free(vmm_parts &v)
{
	auto unmap = drv<CUresult (*)(CUdeviceptr, size_t)>("cuMemUnmap");
	auto afree = drv<CUresult (*)(CUdeviceptr, size_t)>("cuMemAddressFree");
	auto release = drv<CUresult (*)(CUmemGenericAllocationHandle)>("cuMemRelease");
	for (size_t i = 0; i < v.n; i++) {
		unmap(v.ptr + i * v.gran, v.gran);
		release(v.h[i]);
		close(v.fd[i]);
	}
	afree(v.ptr, v.n * v.gran);
}

static void fill(std::vector<uint8_t> &h, gpured_dtype dt)
{
	size_t es = gpured_dtype_size(dt);
	for (size_t i = 0; i + es <= h.size(); i += es) {
		if (dt == GPURED_F32) {
			float x = (float)((double)(rnd() % 2000001) / 1000.0 - 1000.0);
			memcpy(&h[i], &x, 4);
		} else if (dt == GPURED_F64) {
			double x = (double)(int64_t)(rnd() % 2000000001) / 1e6 - 1000.0;
			memcpy(&h[i], &x, 8);
		} else {
			uint64_t x = rnd();
			if (dt >= 6 && dt <= 9) {
				/* f16, bf16, f8e4m3, f8e5m2: finite (an all-ones
				 * exponent loses its top bit) */
				uint32_t top = es == 2 ? 0x4000u : 0x40u;
				uint32_t em = dt == 6 ? 0x7c00u : dt == 7 ? 0x7f80u : dt == 8 ? 0x78u : 0x7cu;
				uint32_t b = (uint32_t)x & (es == 2 ? 0xffffu : 0xffu);
				if ((b & em) == em)
					x &= ~(uint64_t)top;
			}
			memcpy(&h[i], &x, es);
		}
	}
}

/* every op x dtype at odd sizes and offsets of a device region, against
 * the socket path: float sums and sums of squares bit for bit, as they
 * are exact on every route; an exact sum at an offset that splits an
 * element is a clear invalid_params */
static void check_region(gpured_t *g, uint64_t id, const void *dptr, size_t cap)
{
	static const size_t sizes[] = { 1, 33, 4097, 1000003, 5000011 };
	std::vector<uint8_t> h(cap);
	/* the narrow dtypes (6 to 13) too: where the GPU has no kernel for
	 * the pair, or at an offset off the element's size, through a copy
	 * to the host */
	for (int dt = 0; dt < 14; dt++) {
		size_t es = gpured_dtype_size((gpured_dtype)dt);
		bool flt = dt == GPURED_F32 || dt == GPURED_F64;
		fill(h, (gpured_dtype)dt);
		CK(cudaMemcpy((void *)dptr, h.data(), cap, cudaMemcpyHostToDevice));
		CK(cudaDeviceSynchronize());
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k], off = (k * 4 + 4) % 64;
			if (off + n * es > cap)
				continue;
			for (int op = 0; op < 4; op++) {
				bool exact = flt && (op == GPURED_OP_SUM || op == GPURED_OP_SUMSQ);
				size_t o = off;
				gpured_value a, b;
				if (exact && o % es) {
					int r = gpured_reduce_region(g, id, (gpured_op)op, (gpured_dtype)dt, o,
								     n, &a);
					CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "boundary"),
					      "op %d dt %d offset %zu: %d %s", op, dt, o, r, gpured_errmsg(g));
					o -= o % es;
				}
				int ra = gpured_reduce_region(g, id, (gpured_op)op, (gpured_dtype)dt, o, n, &a);
				int rb = gpured_reduce(g, (gpured_op)op, (gpured_dtype)dt, &h[o], n, &b);
				CHECK(ra == 0 && rb == 0, "op %d dt %d n %zu: %d %d %s", op, dt, n, ra, rb,
				      gpured_errmsg(g));
				CHECK(a.count == n && a.kind == b.kind, "count");
				if (a.kind == GPURED_KIND_F64 && std::isnan(a.v.f))
					CHECK(std::isnan(b.v.f), "op %d dt %d n %zu: NaN vs %.17g", op, dt, n, b.v.f);
				else if (a.kind == GPURED_KIND_F64 && op == GPURED_OP_SUMSQ && !exact)
					/* integers: squares added in double */
					CHECK(a.v.f == b.v.f || fabs(a.v.f - b.v.f) <= 1e-12 * fabs(b.v.f) + 1e-300,
					      "op %d dt %d n %zu: %.17g vs %.17g", op, dt, n, a.v.f, b.v.f);
				else
					CHECK(memcmp(&a.v, &b.v, sizeof(a.v)) == 0,
					      "op %d dt %d n %zu offset %zu differ: %.17g vs %.17g", op, dt, n,
					      o, a.v.f, b.v.f);
			}
		}
	}
}

/* GPU dev's UUID as the daemon takes it */
static void gpu_uuid(int dev, char *buf, size_t size)
{
	cudaDeviceProp p;
	CK(cudaGetDeviceProperties(&p, dev));
	const unsigned char *u = (const unsigned char *)p.uuid.bytes;
	snprintf(buf, size, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

/*
 * Every GPU in turn: an allocation on it, mapped by its UUID, reduced by
 * every op and dtype against the socket path (check_region), and reduced
 * on that GPU: while it is mapped the daemon's info shows the region on
 * that device (daemon indexes are the CUDA ordinals under the same
 * CUDA_VISIBLE_DEVICES) and only that device's jobs grow.
 */
static void check_every_gpu(gpured_t *g, int ndev)
{
	const size_t cap = 4 * 1000003 + 64;
	for (int d = 0; d < ndev; d++) {
		char uuid[64];
		gpu_uuid(d, uuid, sizeof(uuid));
		CK(cudaSetDevice(d));
		vmm v = vmm_new(cap, d);
		gpured_snapshot_t z, a, b;
		CHECK(gpured_snapshot(g, &z) == 0, "snapshot: %s", gpured_errmsg(g));
		uint64_t id;
		CHECK(gpured_map_cuda_fd(g, v.fd, cap, uuid, &id) == 0, "map on GPU %d: %s", d,
		      gpured_errmsg(g));
		check_region(g, id, (void *)v.ptr, cap);
		CHECK(gpured_snapshot(g, &a) == 0, "snapshot: %s", gpured_errmsg(g));
		CHECK((int)a.ndevices == ndev, "the daemon serves %u GPUs, CUDA sees %d", a.ndevices, ndev);
		for (int k = 0; k < 50; k++) {
			gpured_value x;
			CHECK(gpured_reduce_region(g, id, GPURED_OP_SUM, GPURED_F32, 0, 1000003, &x) == 0,
			      "sum on GPU %d: %s", d, gpured_errmsg(g));
		}
		CHECK(gpured_snapshot(g, &b) == 0, "snapshot: %s", gpured_errmsg(g));
		for (int e = 0; e < ndev; e++) {
			uint64_t jobs = b.devices[e].jobs - a.devices[e].jobs;
			CHECK(e == d ? jobs >= 50 : jobs == 0, "region on GPU %d: %llu jobs on GPU %d", d,
			      (unsigned long long)jobs, e);
			uint64_t nr = b.devices[e].regions - z.devices[e].regions;
			uint64_t nb = b.devices[e].region_bytes - z.devices[e].region_bytes;
			CHECK(nr == (e == d ? 1u : 0u) && nb == (e == d ? cap : 0u),
			      "region on GPU %d: GPU %d shows %llu regions more, %llu bytes", d, e,
			      (unsigned long long)nr, (unsigned long long)nb);
		}
		CHECK(gpured_unmap(g, id) == 0, "unmap: %s", gpured_errmsg(g));
		vmm_free(v);
		printf("GPU %d of %d: ok\n", d, ndev);
	}
	CK(cudaSetDevice(0));
}

/* The first index where two arrays of n 8-byte values differ, or n. */
static size_t first_difference(const uint8_t *a, const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (memcmp(a + 8 * i, b + 8 * i, 8) != 0)
			return i;
	return n;
}

static unsigned long long u64_at(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return (unsigned long long)v;
}

static bool all_bytes(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/*
 * cumsum of device memory into device memory: a VMM allocation of
 * elements mapped read-only by fd, a second one mapped writable; every
 * dtype at odd sizes, at an element offset into both, against
 * gpured_cumsum() of the same elements over the socket, bit for bit (the
 * GPU adds floats in the order the CPU route does), nothing else of the
 * out region written; in place for the 8-byte dtypes; and the refusals:
 * a read-only device out region, a host out region for device elements
 * (and a device one for host elements), an offset that splits an element.
 */
static void check_cumsum(gpured_t *g, const char *device)
{
	static const size_t sizes[] = { 1, 4095, 4097, 100003, (1u << 20) + 3 };
	const size_t n_max = (1u << 20) + 3, cap = 8 * (n_max + 16);
	vmm in = vmm_new(cap), out = vmm_new(cap);
	uint64_t rin, rout, rro;
	CHECK(gpured_map_cuda_fd(g, in.fd, cap, device, &rin) == 0, "map in: %s", gpured_errmsg(g));
	CHECK(gpured_map_cuda_fd_flags(g, out.fd, cap, device, GPURED_REGION_WRITABLE, &rout) == 0,
	      "map out writable: %s", gpured_errmsg(g));
	std::vector<uint8_t> h(cap), want(8 * n_max), got(cap);

	for (int dt = 0; dt < 6; dt++) {
		size_t es = gpured_dtype_size((gpured_dtype)dt);
		fill(h, (gpured_dtype)dt);
		CK(cudaMemcpy((void *)in.ptr, h.data(), cap, cudaMemcpyHostToDevice));
		CK(cudaDeviceSynchronize());
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			size_t n = sizes[k], off = (k + 1) * es, out_off = 8 * (k + 2);
			CK(cudaMemset((void *)out.ptr, 0xa5, cap));
			CK(cudaDeviceSynchronize());
			int r = gpured_cumsum_region(g, rin, (gpured_dtype)dt, off, n, rout, out_off);
			CHECK(r == 0, "dt %d n %zu: %d %s", dt, n, r, gpured_errmsg(g));
			r = gpured_cumsum(g, (gpured_dtype)dt, &h[off], n, want.data());
			CHECK(r == 0, "socket dt %d n %zu: %d %s", dt, n, r, gpured_errmsg(g));
			/* the reply came once the GPU had written every value */
			CK(cudaMemcpy(got.data(), (void *)out.ptr, cap, cudaMemcpyDeviceToHost));
			size_t i = first_difference(&got[out_off], want.data(), n);
			CHECK(i == n, "dt %d n %zu: value %zu differs: %016llx vs %016llx", dt, n, i,
			      u64_at(&got[out_off + 8 * i]), u64_at(&want[8 * i]));
			CHECK(all_bytes(got.data(), out_off, 0xa5) &&
				      all_bytes(&got[out_off + 8 * n], cap - out_off - 8 * n, 0xa5),
			      "dt %d n %zu: bytes outside the prefix sums written", dt, n);
		}
	}
	printf("cumsum: every dtype ok\n");

	/* in place, 8-byte elements overwritten by their prefix sums */
	static const gpured_dtype wide[] = { GPURED_F64, GPURED_I64, GPURED_U64 };
	for (gpured_dtype dt : wide) {
		size_t n = 300001, off = 24;
		fill(h, dt);
		CK(cudaMemcpy((void *)out.ptr, h.data(), cap, cudaMemcpyHostToDevice));
		CK(cudaDeviceSynchronize());
		CHECK(gpured_cumsum_region(g, rout, dt, off, n, rout, off) == 0, "in place dt %d: %s",
		      (int)dt, gpured_errmsg(g));
		CHECK(gpured_cumsum(g, dt, &h[off], n, want.data()) == 0, "%s", gpured_errmsg(g));
		CK(cudaMemcpy(got.data(), (void *)out.ptr, cap, cudaMemcpyDeviceToHost));
		size_t i = first_difference(&got[off], want.data(), n);
		CHECK(i == n, "in place dt %d: value %zu differs", (int)dt, i);
		CHECK(memcmp(got.data(), h.data(), off) == 0 &&
			      memcmp(&got[off + 8 * n], &h[off + 8 * n], cap - off - 8 * n) == 0,
		      "in place dt %d: bytes outside the elements written", (int)dt);
	}
	printf("cumsum: in place ok\n");

	/* refusals, each invalid_params with nothing written */
	CHECK(gpured_map_cuda_fd(g, out.fd, cap, device, &rro) == 0, "map out read-only: %s",
	      gpured_errmsg(g));
	int r = gpured_cumsum_region(g, rin, GPURED_F32, 0, 1000, rro, 0);
	CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "read-only"), "read-only out: %d %s", r,
	      gpured_errmsg(g));
	gpured_region_t *host;
	CHECK(gpured_region_new_flags(g, 8 * 1000, GPURED_REGION_WRITABLE, &host) == 0, "%s",
	      gpured_errmsg(g));
	r = gpured_cumsum_region(g, rin, GPURED_F32, 0, 1000, gpured_region_id(host), 0);
	CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "go to GPU memory of the same device"),
	      "host out for device elements: %d %s", r, gpured_errmsg(g));
	r = gpured_cumsum_region(g, gpured_region_id(host), GPURED_I32, 0, 1000, rout, 0);
	CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "go to host memory"),
	      "device out for host elements: %d %s", r, gpured_errmsg(g));
	r = gpured_cumsum_region(g, rin, GPURED_F32, 2, 1000, rout, 0);
	CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "boundary"), "misaligned offset: %d %s", r,
	      gpured_errmsg(g));
	r = gpured_cumsum_region(g, rin, GPURED_I64, 4, 1000, rout, 0);
	CHECK(r == -EINVAL && strstr(gpured_errmsg(g), "boundary"), "misaligned i64: %d %s", r,
	      gpured_errmsg(g));
	CHECK(gpured_region_free(g, host) == 0, "%s", gpured_errmsg(g));

	/* the device still in service */
	fill(h, GPURED_I32);
	CK(cudaMemcpy((void *)in.ptr, h.data(), cap, cudaMemcpyHostToDevice));
	CK(cudaDeviceSynchronize());
	CHECK(gpured_cumsum_region(g, rin, GPURED_I32, 0, 1000, rout, 0) == 0, "after refusals: %s",
	      gpured_errmsg(g));
	CHECK(gpured_cumsum(g, GPURED_I32, h.data(), 1000, want.data()) == 0, "%s", gpured_errmsg(g));
	CK(cudaMemcpy(got.data(), (void *)out.ptr, 8 * 1000, cudaMemcpyDeviceToHost));
	CHECK(first_difference(got.data(), want.data(), 1000) == 1000, "after refusals: differ");
	for (uint64_t id : { rin, rout, rro })
		CHECK(gpured_unmap(g, id) == 0, "unmap: %s", gpured_errmsg(g));
	vmm_free(in);
	vmm_free(out);
	printf("cumsum: refusals ok\n");
}

int main(int argc, char **argv)
{
	int ndev = 0;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("no GPU: skipped\n");
		return 77;
	}
	CHECK(argc == 2, "usage: test-device-map GPURED");
	gpured_path = argv[1];
	atexit(daemon_reap);
	signal(SIGPIPE, SIG_IGN);
	CK(cudaSetDevice(0));
	char uuid[64], pci[32];
	gpu_uuid(0, uuid, sizeof(uuid));
	CK(cudaDeviceGetPCIBusId(pci, sizeof(pci), 0));

	daemon_proc d;
	daemon_start(&d, "yes");
	gpured_t *g;
	CHECK(gpured_connect(d.sock, &g) == 0, "connect");

	/* IPC handle of cudaMalloc memory, named by UUID */
	const size_t cap = 8 * 5000011 + 64;
	void *dm;
	CK(cudaMalloc(&dm, cap));
	cudaIpcMemHandle_t ih;
	CK(cudaIpcGetMemHandle(&ih, dm));
	uint64_t id;
	CHECK(gpured_map_cuda_ipc(g, &ih, cap, uuid, &id) == 0, "ipc map: %s", gpured_errmsg(g));
	check_region(g, id, dm, cap);
	CHECK(gpured_unmap(g, id) == 0, "unmap");
	printf("ipc: ok\n");

	/* a VMM allocation exported as an fd, named by PCI bus id */
	vmm v = vmm_new(cap);
	CHECK(gpured_map_cuda_fd(g, v.fd, cap, pci, &id) == 0, "fd map: %s", gpured_errmsg(g));
	check_region(g, id, (void *)v.ptr, cap);
	printf("fd: ok\n");

	/* a range of allocations mapped back to back, as one region */
	vmm_parts vp = vmm_parts_new((cap + (2u << 20) - 1) / (2u << 20));
	uint64_t rid;
	CHECK(gpured_map_cuda_fds(g, vp.fd.data(), vp.size.data(), vp.n, uuid, 0, &rid) == 0,
	      "parts map: %s", gpured_errmsg(g));
	check_region(g, rid, (void *)vp.ptr, cap);
	CHECK(gpured_unmap(g, rid) == 0, "unmap parts");
	std::vector<size_t> odd(vp.size);
	odd[1] = vp.gran / 2; /* a part in the middle that is not whole granules */
	uint64_t nope;
	CHECK(gpured_map_cuda_fds(g, vp.fd.data(), odd.data(), vp.n, uuid, 0, &nope) == -EINVAL &&
		      strstr(gpured_errmsg(g), "whole number of the device's allocation granules"),
	      "odd part: %s", gpured_errmsg(g));
	printf("parts: ok (%zu allocations of %zu KiB)\n", vp.n, vp.gran >> 10);

	/* prefix sums of device memory into device memory */
	check_cumsum(g, uuid);

	/* an array on each GPU reduced on its own */
	check_every_gpu(g, ndev);

	/* bad input: each a clear error, the connection and device in service */
	uint64_t bad;
	CHECK(gpured_map_cuda_fd(g, v.fd, v.size + (64u << 20), pci, &bad) == -EINVAL &&
		      strstr(gpured_errmsg(g), "beyond the allocation"),
	      "fd beyond: %s", gpured_errmsg(g));
	CHECK(gpured_map_cuda_ipc(g, &ih, cap + (1u << 30), uuid, &bad) == -EINVAL &&
		      strstr(gpured_errmsg(g), "beyond the allocation"),
	      "ipc beyond: %s", gpured_errmsg(g));
	CHECK(gpured_map_cuda_fd(g, v.fd, 4096, "GPU-00000000-0000-0000-0000-000000000000", &bad) == -EINVAL &&
		      strstr(gpured_errmsg(g), "serves no GPU"),
	      "device: %s", gpured_errmsg(g));
	unsigned char junk[64];
	for (int i = 0; i < 64; i++)
		junk[i] = (unsigned char)rnd();
	CHECK(gpured_map_cuda_ipc(g, junk, 4096, uuid, &bad) == -EINVAL, "garbage: %s", gpured_errmsg(g));
	int mfd = memfd_create("x", MFD_CLOEXEC);
	CHECK(ftruncate(mfd, 4096) == 0, "ftruncate");
	CHECK(gpured_map_cuda_fd(g, mfd, 4096, uuid, &bad) == -EINVAL &&
		      strstr(gpured_errmsg(g), "not a CUDA allocation"),
	      "memfd: %s", gpured_errmsg(g));
	close(mfd);
	void *gone;
	cudaIpcMemHandle_t gh;
	CK(cudaMalloc(&gone, 1 << 20));
	CK(cudaIpcGetMemHandle(&gh, gone));
	CK(cudaFree(gone));
	CHECK(gpured_map_cuda_ipc(g, &gh, 1 << 20, uuid, &bad) < 0, "freed memory mapped");
	CHECK(gpured_ping(g) == 0, "ping after errors");
	gpured_value still;
	CHECK(gpured_reduce_region(g, id, GPURED_OP_MAX, GPURED_U32, 0, 1000, &still) == 0,
	      "the region still reduces: %s", gpured_errmsg(g));
	printf("errors: ok\n");

	/* many cycles: the daemon's GPU memory and descriptors stay flat */
	size_t f0, t0, f1, t1;
	int fds0 = open_fds(d.pid);
	CK(cudaMemGetInfo(&f0, &t0));
	for (int i = 0; i < 200; i++) {
		uint64_t a, b;
		CHECK(gpured_map_cuda_fd(g, v.fd, cap, uuid, &a) == 0, "cycle fd: %s", gpured_errmsg(g));
		CHECK(gpured_map_cuda_ipc(g, &ih, cap, pci, &b) == 0, "cycle ipc: %s", gpured_errmsg(g));
		gpured_value val;
		CHECK(gpured_reduce_region(g, a, GPURED_OP_SUM, GPURED_I32, 0, 1000, &val) == 0, "sum");
		CHECK(gpured_unmap(g, a) == 0 && gpured_unmap(g, b) == 0, "unmap");
	}
	CK(cudaMemGetInfo(&f1, &t1));
	int fds1 = open_fds(d.pid);
	CHECK(fds1 == fds0, "daemon descriptors %d then %d", fds0, fds1);
	CHECK(f0 - f1 < (64u << 20) || f1 >= f0, "GPU memory fell %zu MiB over 200 cycles",
	      (f0 - f1) >> 20);
	printf("cycles: ok (free GPU memory %zu -> %zu MiB, daemon fds %d -> %d)\n", f0 >> 20,
	       f1 >> 20, fds0, fds1);
	gpured_close(g);
	daemon_stop(&d);

	/* IPC handles while the option is off */
	daemon_start(&d, "no");
	CHECK(gpured_connect(d.sock, &g) == 0, "connect");
	CHECK(gpured_map_cuda_ipc(g, &ih, cap, uuid, &bad) == -EINVAL &&
		      strstr(gpured_errmsg(g), "cuda_ipc is off"),
	      "ipc off: %s", gpured_errmsg(g));
	CHECK(gpured_map_cuda_fd(g, v.fd, cap, uuid, &id) == 0, "fd with ipc off: %s", gpured_errmsg(g));
	gpured_close(g);
	daemon_stop(&d);
	vmm_free(v);
	vmm_parts_free(vp);
	cudaFree(dm);
	printf("device map: ok\n");
	return 0;
}
