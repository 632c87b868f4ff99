/* The argmin/argmax kernel's launcher (argm.h). */
#include <climits>

#include <cuda_runtime.h>

#include "cuda/argm.cuh"

extern "C" size_t gr_argm_workspace_bytes(int sms)
{
	return 16 + (size_t)(sms > 0 ? sms : 1) * grargm::BLOCKS_PER_SM * sizeof(grargm::best);
}

extern "C" int gr_argm_launch(int dtype, int is_max, const void *data, uint64_t n,
			      gr_argm_result *out, void *workspace, int sms, void *stream)
{
	cudaStream_t st = (cudaStream_t)stream;
	if (n == 0)
		return (int)cudaErrorInvalidValue;
	switch (dtype) {
	case 0: return (int)grargm::launch<int32_t>(is_max, data, n, out, workspace, sms, st);
	case 1: return (int)grargm::launch<int64_t>(is_max, data, n, out, workspace, sms, st);
	case 2: return (int)grargm::launch<uint32_t>(is_max, data, n, out, workspace, sms, st);
	case 3: return (int)grargm::launch<uint64_t>(is_max, data, n, out, workspace, sms, st);
	case 4: return (int)grargm::launch<float>(is_max, data, n, out, workspace, sms, st);
	case 5: return (int)grargm::launch<double>(is_max, data, n, out, workspace, sms, st);
	}
	return (int)cudaErrorInvalidValue;
}
