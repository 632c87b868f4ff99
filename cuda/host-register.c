/*
 * Host memory outside staging that CUDA jobs read: clients' shared-memory
 * regions (daemon/region.h), pinned once when mapped so that each chunk
 * moves to the GPU by DMA, with no staging copy on the way.
 */
#include <errno.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cuda/host-register.h"

int cuda_register_host(gr_backend *b, const void *p, size_t bytes, void **ret_reg, char *why,
		       size_t whylen)
{
	(void)b;
	/* Every device's copies read it (portable); read-only, as the daemon
	 * mapped it. */
	cudaError_t e = cudaHostRegister((void *)p, bytes,
					 cudaHostRegisterPortable | cudaHostRegisterReadOnly);
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
