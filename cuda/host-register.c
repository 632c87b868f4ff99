/*
 * Host memory outside staging that CUDA jobs read: clients' shared-memory
 * regions (daemon/region.h), pinned once when mapped so that each chunk
 * moves to the GPU by DMA, with no staging copy on the way, and so that
 * a kernel may read it, and write a writable one, where it lies (a host
 * region's prefix sums: GR_JOB_SCAN).
 */
#include <errno.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cuda/host-register.h"

int cuda_register_host(gr_backend *b, const void *p, size_t bytes, bool writable, void **ret_reg,
		       char *why, size_t whylen)
{
	(void)b;
	/* Every device's copies read it (portable); read-only where the
	 * daemon mapped it so, else the kernels write it too (a host
	 * cumsum's prefix sums, in place) */
	cudaError_t e = cudaHostRegister((void *)p, bytes,
					 cudaHostRegisterPortable |
						 (writable ? 0u : cudaHostRegisterReadOnly));
	if (e != cudaSuccess) {
		cudaGetLastError(); /* not sticky; clear it */
		snprintf(why, whylen, "cudaHostRegister of %zu bytes: %s", bytes,
			 cudaGetErrorString(e));
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
	}
	*ret_reg = (void *)p;
	return 0;
}

void cuda_unregister_host(gr_backend *b, void *reg)
{
	(void)b;
	if (cudaHostUnregister(reg) != cudaSuccess)
		cudaGetLastError();
}
