/*
 * Waiting for a CUDA stream before the daemon reads what it wrote
 * (gpured._device._Driver.stream_sync): with the stream's context made
 * current where it is not (the legacy default stream of a device's
 * primary context, PyTorch's default), the driver's cuStreamQuery, and
 * only when work is still queued its cuStreamSynchronize, which is the
 * one call that lets go of the GIL while it waits. Through ctypes each
 * of these calls lets go of the GIL and takes it back, which costs
 * microseconds when another thread (the client's reader) wants it; a
 * stream with nothing queued, the usual case, costs a query here.
 *
 * The driver's functions come in once, by address, from the libcuda.so.1
 * that _device's ctypes loaded (cuda_calls()).
 */
#include "stream.h"

#include <stdint.h>

/* CUresult (*)(CUstream), as cuda.h declares the stream calls; the
 * context calls' CUcontext is a pointer too */
typedef int (*stream_call)(void *);
typedef int (*ctx_out_call)(void **);

#define CUDA_ERROR_NOT_READY 600

static struct {
	stream_call query, sync, ctx_push;
	ctx_out_call ctx_get, ctx_pop;
} cu;

static void *take_addr(PyObject *v)
{
	unsigned long long a = PyLong_AsUnsignedLongLong(v);

	if (a == (unsigned long long)-1 && PyErr_Occurred())
		return NULL;
	if (a == 0) {
		PyErr_SetString(PyExc_ValueError, "cuda_calls() needs the functions' addresses");
		return NULL;
	}
	return (void *)(uintptr_t)a;
}

PyObject *fast_cuda_calls(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	void *a[5];

	(void)mod;
	if (nargs != 5) {
		PyErr_SetString(PyExc_TypeError,
				"cuda_calls(cuStreamQuery, cuStreamSynchronize, cuCtxGetCurrent, "
				"cuCtxPushCurrent_v2, cuCtxPopCurrent_v2): their addresses");
		return NULL;
	}
	for (int i = 0; i < 5; i++)
		if ((a[i] = take_addr(args[i])) == NULL)
			return NULL;
	cu.query = (stream_call)a[0];
	cu.sync = (stream_call)a[1];
	cu.ctx_get = (ctx_out_call)a[2];
	cu.ctx_push = (stream_call)a[3];
	cu.ctx_pop = (ctx_out_call)a[4];
	Py_RETURN_NONE;
}

static int take_handle(PyObject *v, void **ret)
{
	unsigned long long h = PyLong_AsUnsignedLongLong(v);

	if (h == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	*ret = (void *)(uintptr_t)h;
	return 0;
}

PyObject *fast_stream_sync(PyObject *mod, PyObject *const *args, Py_ssize_t nargs)
{
	void *stream, *ctx = NULL, *cur = NULL, *popped;
	int r, pushed = 0;

	(void)mod;
	if (cu.query == NULL) {
		PyErr_SetString(PyExc_RuntimeError, "stream_sync() before cuda_calls()");
		return NULL;
	}
	if (nargs < 1 || nargs > 2) {
		PyErr_SetString(PyExc_TypeError, "stream_sync(stream, ctx=0)");
		return NULL;
	}
	if (take_handle(args[0], &stream) < 0 || (nargs == 2 && take_handle(args[1], &ctx) < 0))
		return NULL;
	if (ctx != NULL) {
		r = cu.ctx_get(&cur);
		if (r == 0 && cur != ctx) {
			r = cu.ctx_push(ctx);
			pushed = r == 0;
		}
		if (r != 0)
			return PyLong_FromLong(r);
	}
	r = cu.query(stream);
	if (r == CUDA_ERROR_NOT_READY) {
		Py_BEGIN_ALLOW_THREADS
		r = cu.sync(stream);
		Py_END_ALLOW_THREADS
	}
	if (pushed)
		cu.ctx_pop(&popped);
	return PyLong_FromLong(r);
}
