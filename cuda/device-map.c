/*
 * Device memory clients hand over (PROTOCOL.md, "map", kinds cuda and
 * cuda_ipc), imported once on the GPU that holds it:
 *
 *   - cuda: a virtual-memory allocation exported as a POSIX file
 *     descriptor (cuMemExportToShareableHandle). The descriptor is the
 *     capability: it is imported, mapped into a range of this process's
 *     device address space and given read access on its device (read and
 *     write with "writable").
 *   - cuda_ipc: a legacy cudaIpcMemHandle_t (what cudaMalloc memory
 *     exports), opened with cudaIpcOpenMemHandle. Anyone who knows the 64
 *     bytes can open it, so the daemon serves this kind only when the
 *     operator allows it (--allow-cuda-ipc).
 *
 * The driver API's calls are looked up through the runtime
 * (cudaGetDriverEntryPointByVersion), so the daemon links nothing of the
 * driver and starts on hosts without one. The GPU is found by its UUID or
 * PCI bus id, whatever CUDA_VISIBLE_DEVICES numbers it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "cuda/device-map.h"

typedef CUresult (*fn_import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
typedef CUresult (*fn_props)(CUmemAllocationProp *, CUmemGenericAllocationHandle);
typedef CUresult (*fn_gran)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*fn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*fn_free)(CUdeviceptr, size_t);
typedef CUresult (*fn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
			   unsigned long long);
typedef CUresult (*fn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*fn_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*fn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*fn_range)(CUdeviceptr *, size_t *, CUdeviceptr);
typedef CUresult (*fn_errstr)(CUresult, const char **);

static struct {
	bool tried, ok;
	fn_import import;
	fn_props props;
	fn_gran gran;
	fn_reserve reserve;
	fn_free free;
	fn_map map;
	fn_unmap unmap;
	fn_access access;
	fn_release release;
	fn_range range;
	fn_errstr errstr;
} drv;

/* The driver calls, looked up once (loop thread). */
static bool drv_load(void)
{
	if (drv.tried)
		return drv.ok;
	drv.tried = true;
	struct {
		const char *name;
		void **fn;
	} want[] = {
		{ "cuMemImportFromShareableHandle", (void **)&drv.import },
		{ "cuMemGetAllocationPropertiesFromHandle", (void **)&drv.props },
		{ "cuMemGetAllocationGranularity", (void **)&drv.gran },
		{ "cuMemAddressReserve", (void **)&drv.reserve },
		{ "cuMemAddressFree", (void **)&drv.free },
		{ "cuMemMap", (void **)&drv.map },
		{ "cuMemUnmap", (void **)&drv.unmap },
		{ "cuMemSetAccess", (void **)&drv.access },
		{ "cuMemRelease", (void **)&drv.release },
		{ "cuMemGetAddressRange", (void **)&drv.range },
		{ "cuGetErrorString", (void **)&drv.errstr },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		enum cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion(want[i].name, want[i].fn, 12000, cudaEnableDefault,
						     &q) != cudaSuccess ||
		    q != cudaDriverEntryPointSuccess || !*want[i].fn) {
			cudaGetLastError();
			return false;
		}
	}
	drv.ok = true;
	return true;
}

static const char *drv_err(CUresult r)
{
	const char *s = NULL;
	if (drv.errstr)
		drv.errstr(r, &s);
	return s ? s : "unknown driver error";
}

/* The device a client named, by UUID or PCI bus id; -1 if none. */
static int find_device(cuda_backend *be, const char *name)
{
	for (unsigned i = 0; i < be->ndev; i++) {
		cuda_dev *d = &be->devs[i];
		if (!strcasecmp(name, d->uuid) || !strcasecmp(name, d->pci))
			return (int)i;
		/* a bus id without its domain, as some tools write it */
		if (strlen(d->pci) > 5 && !strcasecmp(name, d->pci + 5) && strlen(name) >= 7)
			return (int)i;
	}
	return -1;
}

typedef struct dev_map {
	gr_map_kind kind;
	CUdeviceptr ptr;
	size_t size;                       /* reserved and mapped (cuda) */
	CUmemGenericAllocationHandle h;    /* cuda */
	void *ipc;                         /* cuda_ipc: what cudaIpcOpenMemHandle gave */
} dev_map;

static int map_vmm(int dev, const gr_device_map *m, dev_map *dm, char *why, size_t whylen)
{
	CUmemAllocationProp prop;
	size_t gran = 0;
	CUresult r;

	r = drv.import(&dm->h, (void *)(intptr_t)m->fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen,
			 "the file descriptor is not a CUDA allocation exported as a POSIX file "
			 "descriptor (cuMemImportFromShareableHandle: %s)",
			 drv_err(r));
		return -EINVAL;
	}
	memset(&prop, 0, sizeof(prop));
	if ((r = drv.props(&prop, dm->h)) != CUDA_SUCCESS ||
	    (r = drv.gran(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "cannot read the allocation's properties: %s", drv_err(r));
		goto fail_release;
	}
	if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != dev) {
		snprintf(why, whylen, "the allocation is not on device %s", m->device);
		r = CUDA_ERROR_INVALID_VALUE;
		goto fail_release;
	}
	dm->size = (size_t)((m->bytes + gran - 1) / gran * gran);
	if ((r = drv.reserve(&dm->ptr, dm->size, gran, 0, 0)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "cuMemAddressReserve of %zu bytes: %s", dm->size, drv_err(r));
		goto fail_release;
	}
	if ((r = drv.map(dm->ptr, dm->size, 0, dm->h, 0)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "'bytes' (%llu) is beyond the allocation (cuMemMap: %s)",
			 (unsigned long long)m->bytes, drv_err(r));
		goto fail_free;
	}
	CUmemAccessDesc acc = {
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev },
		.flags = m->writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ,
	};
	if ((r = drv.access(dm->ptr, dm->size, &acc, 1)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "cuMemSetAccess: %s", drv_err(r));
		drv.unmap(dm->ptr, dm->size);
		goto fail_free;
	}
	return 0;
fail_free:
	drv.free(dm->ptr, dm->size);
fail_release:
	drv.release(dm->h);
	return -EINVAL;
}

static int map_ipc(const gr_device_map *m, dev_map *dm, char *why, size_t whylen)
{
	cudaIpcMemHandle_t h;
	CUdeviceptr base = 0;
	size_t size = 0;
	CUresult r;

	memcpy(&h, m->handle, sizeof(h));
	cudaError_t e = cudaIpcOpenMemHandle(&dm->ipc, h, cudaIpcMemLazyEnablePeerAccess);
	if (e != cudaSuccess) {
		cudaGetLastError();
		snprintf(why, whylen,
			 "cannot open the IPC handle (memory freed, its process gone, or not a "
			 "handle): cudaIpcOpenMemHandle: %s",
			 cudaGetErrorString(e));
		return -EINVAL;
	}
	dm->ptr = (CUdeviceptr)(uintptr_t)dm->ipc;
	if ((r = drv.range(&base, &size, dm->ptr)) != CUDA_SUCCESS ||
	    m->bytes > size - (size_t)(dm->ptr - base)) {
		snprintf(why, whylen, "'bytes' (%llu) is beyond the allocation (%zu bytes)",
			 (unsigned long long)m->bytes, r == CUDA_SUCCESS ? size : (size_t)0);
		cudaIpcCloseMemHandle(dm->ipc);
		return -EINVAL;
	}
	return 0;
}

int cuda_map_device(gr_backend *b, const gr_device_map *m, gr_device_region *ret, char *why,
		    size_t whylen)
{
	cuda_backend *be = (cuda_backend *)b;
	int dev = find_device(be, m->device);
	int r;

	if (dev < 0) {
		snprintf(why, whylen, "this daemon serves no GPU '%s' (info lists each GPU's uuid and "
			 "pci_bus_id)", m->device);
		return -ENODEV;
	}
	if (!__atomic_load_n(&be->devs[dev].healthy, __ATOMIC_RELAXED)) {
		snprintf(why, whylen, "device %d (%s) is out of service", dev, m->device);
		return -ENODEV;
	}
	if (!drv_load()) {
		snprintf(why, whylen, "the CUDA driver's memory calls are not available");
		return -ENOTSUP;
	}
	dev_map *dm = calloc(1, sizeof(*dm));
	if (!dm) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	dm->kind = m->kind;
	cudaError_t e = cudaSetDevice(dev);
	if (e != cudaSuccess) {
		snprintf(why, whylen, "cudaSetDevice(%d): %s", dev, cudaGetErrorString(e));
		free(dm);
		return -EIO;
	}
	r = m->kind == GR_MAP_CUDA ? map_vmm(dev, m, dm, why, whylen) : map_ipc(m, dm, why, whylen);
	if (r < 0) {
		free(dm);
		return r;
	}
	ret->device = dev;
	ret->ptr = (const void *)(uintptr_t)dm->ptr;
	ret->priv = dm;
	return 0;
}

int cuda_copy_to_host(gr_backend *b, int device, void *dst, const void *src, size_t bytes,
		      char *why, size_t whylen)
{
	cuda_backend *be = (cuda_backend *)b;
	cudaError_t e;

	if (device < 0 || (unsigned)device >= be->ndev) {
		snprintf(why, whylen, "no device %d", device);
		return -ENODEV;
	}
	if (!__atomic_load_n(&be->devs[device].healthy, __ATOMIC_RELAXED)) {
		snprintf(why, whylen, "device %d (%s) is out of service", device,
			 be->devs[device].name);
		return -ENODEV;
	}
	if ((e = cudaSetDevice(device)) != cudaSuccess ||
	    (e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
		cudaGetLastError();
		snprintf(why, whylen, "cudaMemcpy (device to host) on device %d (%s): %s", device,
			 be->devs[device].name, cudaGetErrorString(e));
		return -EIO;
	}
	return 0;
}

void cuda_unmap_device(gr_backend *b, gr_device_region *r)
{
	dev_map *dm = r->priv;
	(void)b;
	if (!dm)
		return;
	cudaSetDevice(r->device);
	if (dm->kind == GR_MAP_CUDA) {
		drv.unmap(dm->ptr, dm->size);
		drv.free(dm->ptr, dm->size);
		drv.release(dm->h);
	} else {
		cudaIpcCloseMemHandle(dm->ipc);
	}
	free(dm);
	r->priv = NULL;
}
