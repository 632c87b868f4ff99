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

/* One allocation of a range, mapped at off for size (whole granules). */
typedef struct dev_part {
	CUmemGenericAllocationHandle h;
	size_t off, size;
} dev_part;

typedef struct dev_map {
	gr_map_kind kind;
	CUdeviceptr ptr;
	size_t size;                       /* cuda: reserved */
	size_t gran;                       /* cuda: the allocation granule */
	uint64_t bytes;                    /* cuda: the range the client named */
	bool writable;
	unsigned nparts, cap;              /* cuda: the allocations mapped, in order */
	dev_part *parts;
	void *ipc;                         /* cuda_ipc: what cudaIpcOpenMemHandle gave */
} dev_map;

/* Import fd's allocation and check that it is on dev: its handle, and
 * its allocation granule in *ret_gran. */
static int import_part(int dev, int fd, const char *device, CUmemGenericAllocationHandle *ret,
		       size_t *ret_gran, char *why, size_t whylen)
{
	CUmemAllocationProp prop;
	CUresult r;

	r = drv.import(ret, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (r != CUDA_SUCCESS) {
		snprintf(why, whylen,
			 "the file descriptor is not a CUDA allocation exported as a POSIX file "
			 "descriptor (cuMemImportFromShareableHandle: %s)",
			 drv_err(r));
		return -EINVAL;
	}
	memset(&prop, 0, sizeof(prop));
	*ret_gran = 0;
	if ((r = drv.props(&prop, *ret)) != CUDA_SUCCESS ||
	    (r = drv.gran(ret_gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) != CUDA_SUCCESS ||
	    *ret_gran == 0) {
		snprintf(why, whylen, "cannot read the allocation's properties: %s", drv_err(r));
		drv.release(*ret);
		return -EINVAL;
	}
	if (prop.location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop.location.id != dev) {
		snprintf(why, whylen, "the allocation is not on device %s", device);
		drv.release(*ret);
		return -EINVAL;
	}
	return 0;
}

/* Map bytes of the allocation h (imported; released here on failure) at
 * off of dm's reserved range. */
static int map_part(int dev, dev_map *dm, CUmemGenericAllocationHandle h, size_t off,
		    uint64_t bytes, char *why, size_t whylen)
{
	CUresult r;

	if (dm->nparts == dm->cap) {
		unsigned cap = dm->cap ? dm->cap * 2 : 1;
		dev_part *p = realloc(dm->parts, cap * sizeof(*p));
		if (!p) {
			snprintf(why, whylen, "out of memory");
			drv.release(h);
			return -ENOMEM;
		}
		dm->parts = p;
		dm->cap = cap;
	}
	size_t size = (size_t)((bytes + dm->gran - 1) / dm->gran * dm->gran);
	if ((r = drv.map(dm->ptr + off, size, 0, h, 0)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "'bytes' (%llu) is beyond the allocation (cuMemMap: %s)",
			 (unsigned long long)bytes, drv_err(r));
		goto fail_release;
	}
	CUmemAccessDesc acc = {
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev },
		.flags = dm->writable ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
				      : CU_MEM_ACCESS_FLAGS_PROT_READ,
	};
	if ((r = drv.access(dm->ptr + off, size, &acc, 1)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "cuMemSetAccess: %s", drv_err(r));
		drv.unmap(dm->ptr + off, size);
		goto fail_release;
	}
	dm->parts[dm->nparts++] = (dev_part){ .h = h, .off = off, .size = size };
	return 0;
fail_release:
	drv.release(h);
	return -EINVAL;
}

/* Every part's mapping and handle, and the reserved range. */
static void unmap_vmm(dev_map *dm)
{
	for (unsigned i = dm->nparts; i-- > 0;) {
		drv.unmap(dm->ptr + dm->parts[i].off, dm->parts[i].size);
		drv.release(dm->parts[i].h);
	}
	drv.free(dm->ptr, dm->size);
	free(dm->parts);
	dm->parts = NULL;
	dm->nparts = dm->cap = 0;
}

/* "each part but the last ...", or NULL when bytes at off may be a part. */
static bool part_whole(const dev_map *dm, size_t off, uint64_t bytes, char *why, size_t whylen)
{
	if (off + bytes < dm->bytes && bytes % dm->gran) {
		snprintf(why, whylen,
			 "a part that does not end the range must be a whole number of the device's "
			 "allocation granules (%zu bytes), not %llu bytes",
			 dm->gran, (unsigned long long)bytes);
		return false;
	}
	return true;
}

static int map_vmm(int dev, const gr_device_map *m, dev_map *dm, char *why, size_t whylen)
{
	CUmemGenericAllocationHandle h;
	size_t gran;
	CUresult r;
	int e;

	if ((e = import_part(dev, m->fd, m->device, &h, &gran, why, whylen)) < 0)
		return e;
	dm->gran = gran;
	dm->bytes = m->bytes;
	dm->writable = m->writable;
	if (!part_whole(dm, 0, m->part_bytes, why, whylen)) {
		drv.release(h);
		return -EINVAL;
	}
	dm->size = (size_t)((m->bytes + gran - 1) / gran * gran);
	if ((r = drv.reserve(&dm->ptr, dm->size, gran, 0, 0)) != CUDA_SUCCESS) {
		snprintf(why, whylen, "cuMemAddressReserve of %zu bytes: %s", dm->size, drv_err(r));
		drv.release(h);
		return -EINVAL;
	}
	if ((e = map_part(dev, dm, h, 0, m->part_bytes, why, whylen)) < 0)
		unmap_vmm(dm);
	return e;
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
		unmap_vmm(dm);
	} else {
		cudaIpcCloseMemHandle(dm->ipc);
	}
	free(dm);
	r->priv = NULL;
}

int cuda_map_device_part(gr_backend *b, gr_device_region *r, int fd, uint64_t offset,
			 uint64_t bytes, char *why, size_t whylen)
{
	cuda_backend *be = (cuda_backend *)b;
	dev_map *dm = r->priv;

	if (!dm || dm->kind != GR_MAP_CUDA || offset > dm->bytes || bytes > dm->bytes - offset ||
	    offset % dm->gran) {
		snprintf(why, whylen, "no room for a part of %llu bytes at %llu in this range",
			 (unsigned long long)bytes, (unsigned long long)offset);
		return -EINVAL;
	}
	if (!__atomic_load_n(&be->devs[r->device].healthy, __ATOMIC_RELAXED)) {
		snprintf(why, whylen, "device %d (%s) is out of service", r->device,
			 be->devs[r->device].name);
		return -ENODEV;
	}
	if (!part_whole(dm, (size_t)offset, bytes, why, whylen))
		return -EINVAL;
	cudaError_t e = cudaSetDevice(r->device);
	if (e != cudaSuccess) {
		snprintf(why, whylen, "cudaSetDevice(%d): %s", r->device, cudaGetErrorString(e));
		return -EIO;
	}
	CUmemGenericAllocationHandle h;
	size_t gran;
	int err = import_part(r->device, fd, be->devs[r->device].uuid, &h, &gran, why, whylen);
	if (err < 0)
		return err;
	if (gran > dm->gran || dm->gran % gran) {
		snprintf(why, whylen, "the allocation's granule (%zu bytes) differs from the first "
			 "part's (%zu bytes)", gran, dm->gran);
		drv.release(h);
		return -EINVAL;
	}
	return map_part(r->device, dm, h, (size_t)offset, bytes, why, whylen);
}
