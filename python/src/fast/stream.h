/* Waiting for a CUDA stream (stream.c). */
#pragma once

#include "fast.h"

/* cuda_calls(the addresses of cuStreamQuery, cuStreamSynchronize,
 * cuCtxGetCurrent, cuCtxPushCurrent_v2, cuCtxPopCurrent_v2) */
PyObject *fast_cuda_calls(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

/* stream_sync(stream, ctx=0): the CUresult of waiting for it, with
 * context ctx current (0: whichever is) */
PyObject *fast_stream_sync(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
