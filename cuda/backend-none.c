/* The CUDA constructor of a build without CUDA (-Dcuda=disabled or no nvcc). */
#include <errno.h>
#include <stdio.h>

#include "engine/backend.h"

int gr_backend_cuda_new(const gr_backend_config *cfg, gr_completion *cq, gr_backend **ret,
			char *errbuf, size_t errlen)
{
	(void)cfg;
	(void)cq;
	*ret = NULL;
	snprintf(errbuf, errlen, "gpured was built without CUDA");
	return -ENOTSUP;
}
