/*
 * libgpured's shared-memory regions: a sealed memfd mapped here and
 * handed to the daemon once (map), then reduced in place by region,
 * offset and count (PROTOCOL.md, "map").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/gpured-private.h"
#include "proto/message.h"
#include "proto/obj.h"

struct gpured_region {
	uint64_t id;
	void *data;
	size_t bytes;
	bool writable; /* the daemon maps it for writing too */
};

/* Write the request built in g->wbuf (entry e), with fd in SCM_RIGHTS when
 * fd >= 0, and wait for its reply; the entry is returned done (or NULL
 * and *ret_err). */
static pending *region_call(gpured_t *g, pending *e, int fd, int *ret_err)
{
	struct iovec iov = { .iov_base = g->wbuf.data, .iov_len = g->wbuf.len };
	uint32_t id = e->id;
	int r = client_send(g, &iov, 1, fd);

	if (r < 0) {
		*ret_err = r;
		return NULL;
	}
	return client_wait_entry(g, id, ret_err);
}

/* A new entry of method m and the start of its request's one map param,
 * of nkeys keys. */
static int region_begin(gpured_t *g, gr_method m, uint32_t nkeys, pending **ret)
{
	int r;

	if (g->dead)
		return client_dead(g);
	r = client_pending_add(g, m, GR_OP_SUM, GR_DT_I32, ret);
	if (r < 0)
		return r;
	g->wbuf.len = 0;
	r = gr_msg_write_request_header(&g->wbuf, (*ret)->id, m, 1);
	if (r >= 0)
		r = gr_mpw_map(&g->wbuf, nkeys);
	if (r < 0) {
		client_pending_unadd(g, *ret);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	return 0;
}

static int write_kv_uint(gr_buf *b, const char *k, uint64_t v)
{
	int r = gr_mpw_cstr(b, k);
	return r < 0 ? r : gr_mpw_uint(b, v);
}

/* A map request of kind (host, cuda with fd, cuda_ipc with handle);
 * writable asks for "writable": true. */
static int map_call(gpured_t *g, gr_map_kind kind, int fd, const void *handle, size_t bytes,
		    const char *device, bool writable, uint64_t *ret_region)
{
	gr_obj_tree tree = { 0 };
	pending *e;
	int r;

	if (bytes == 0 || (kind != GR_MAP_CUDA_IPC && fd < 0) || (kind != GR_MAP_HOST && !device))
		return client_error(g, -EINVAL, "a region needs at least one byte, and its "
				    "descriptor or handle and device");
	r = region_begin(g, GR_METHOD_MAP,
			 (kind == GR_MAP_HOST ? 1 : kind == GR_MAP_CUDA ? 3 : 4) + writable, &e);
	if (r < 0)
		return r;
	r = write_kv_uint(&g->wbuf, "bytes", bytes);
	if (r >= 0 && writable && (r = gr_mpw_cstr(&g->wbuf, "writable")) >= 0)
		r = gr_mpw_bool(&g->wbuf, true);
	if (r >= 0 && kind != GR_MAP_HOST) {
		if ((r = gr_mpw_cstr(&g->wbuf, "kind")) >= 0 &&
		    (r = gr_mpw_cstr(&g->wbuf, gr_map_kind_name(kind))) >= 0 &&
		    (r = gr_mpw_cstr(&g->wbuf, "device")) >= 0)
			r = gr_mpw_cstr(&g->wbuf, device);
		if (r >= 0 && kind == GR_MAP_CUDA_IPC && (r = gr_mpw_cstr(&g->wbuf, "handle")) >= 0)
			r = gr_mpw_bin(&g->wbuf, handle, 64);
	}
	if (r < 0) {
		client_pending_unadd(g, e);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	e = region_call(g, e, fd, &r);
	if (!e)
		return r;
	if (e->err == 0) {
		const gr_obj *id = NULL;
		if (gr_obj_parse(e->reply, e->reply_len, &gr_msg_response_limits, &tree) > 0)
			id = gr_obj_get(&tree.root->v.items[3], "region");
		if (id && id->type == GR_MP_UINT)
			*ret_region = id->v.u;
		else
			r = client_error(g, -EPROTO, "map answered without a region id");
		gr_obj_tree_deinit(&tree);
	}
	int c = client_collect(g, e, NULL);
	return r < 0 ? r : c;
}

int gpured_map_fd(gpured_t *g, int fd, size_t bytes, uint64_t *ret_region)
{
	return gpured_map_fd_flags(g, fd, bytes, 0, ret_region);
}

int gpured_map_fd_flags(gpured_t *g, int fd, size_t bytes, unsigned flags, uint64_t *ret_region)
{
	if (flags & ~(unsigned)GPURED_REGION_WRITABLE)
		return client_error(g, -EINVAL, "unknown region flags %#x", flags);
	return map_call(g, GR_MAP_HOST, fd, NULL, bytes, NULL, flags & GPURED_REGION_WRITABLE,
			ret_region);
}

int gpured_map_cuda_fd(gpured_t *g, int fd, size_t bytes, const char *device,
		       uint64_t *ret_region)
{
	return gpured_map_cuda_fd_flags(g, fd, bytes, device, 0, ret_region);
}

int gpured_map_cuda_fd_flags(gpured_t *g, int fd, size_t bytes, const char *device,
			     unsigned flags, uint64_t *ret_region)
{
	if (flags & ~(unsigned)GPURED_REGION_WRITABLE)
		return client_error(g, -EINVAL, "unknown region flags %#x", flags);
	return map_call(g, GR_MAP_CUDA, fd, NULL, bytes, device, flags & GPURED_REGION_WRITABLE,
			ret_region);
}

int gpured_map_cuda_ipc(gpured_t *g, const void *handle, size_t bytes, const char *device,
			uint64_t *ret_region)
{
	return gpured_map_cuda_ipc_flags(g, handle, bytes, device, 0, ret_region);
}

int gpured_map_cuda_ipc_flags(gpured_t *g, const void *handle, size_t bytes, const char *device,
			      unsigned flags, uint64_t *ret_region)
{
	if (flags & ~(unsigned)GPURED_REGION_WRITABLE)
		return client_error(g, -EINVAL, "unknown region flags %#x", flags);
	if (!handle)
		return client_error(g, -EINVAL, "no IPC handle");
	return map_call(g, GR_MAP_CUDA_IPC, -1, handle, bytes, device,
			flags & GPURED_REGION_WRITABLE, ret_region);
}

int gpured_unmap(gpured_t *g, uint64_t region)
{
	pending *e;
	int r;

	r = region_begin(g, GR_METHOD_UNMAP, 1, &e);
	if (r < 0)
		return r;
	if ((r = write_kv_uint(&g->wbuf, "region", region)) < 0) {
		client_pending_unadd(g, e);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	e = region_call(g, e, -1, &r);
	if (!e)
		return r;
	return client_collect(g, e, NULL);
}

int gpured_submit_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, uint32_t *ret_id)
{
	return client_submit_region(g, region, op, dt, offset, n, /* partial= */ false, /* ddof= */ 0,
				    ret_id);
}

int client_submit_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, bool partial, uint64_t ddof, uint32_t *ret_id)
{
	const bool moments = op == GPURED_OP_MOMENTS;
	pending *e;
	int r;

	if (g->dead)
		return client_dead(g);
	if ((unsigned)op >= GR_OP_N || (unsigned)dt >= GR_DT_N)
		return client_error(g, -EINVAL, "unknown op or dtype");
	r = client_pending_add(g, GR_METHOD_REDUCE, (gr_op)op, (gr_dtype)dt, &e);
	if (r < 0)
		return r;
	if (partial) {
		e->partial = true;
		g->n_live_partial++;
	}
	g->wbuf.len = 0;
	if ((r = gr_msg_write_request_header(&g->wbuf, e->id, GR_METHOD_REDUCE, 1)) < 0 ||
	    (r = gr_mpw_map(&g->wbuf, 5 + partial + moments)) < 0 ||
	    (partial && ((r = gr_mpw_cstr(&g->wbuf, "partial")) < 0 ||
			 (r = gr_mpw_bool(&g->wbuf, true)) < 0)) ||
	    (r = gr_mpw_cstr(&g->wbuf, "op")) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, gr_op_name((gr_op)op))) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, "dtype")) < 0 ||
	    (r = gr_mpw_cstr(&g->wbuf, gr_dtype_name((gr_dtype)dt))) < 0 ||
	    (r = write_kv_uint(&g->wbuf, "region", region)) < 0 ||
	    (r = write_kv_uint(&g->wbuf, "offset", offset)) < 0 ||
	    (r = write_kv_uint(&g->wbuf, "count", n)) < 0 ||
	    (moments && (r = write_kv_uint(&g->wbuf, "ddof", ddof)) < 0)) {
		client_pending_unadd(g, e);
		return client_error(g, r, "cannot write the request: %s", gpured_strerror(r));
	}
	uint32_t id = e->id;
	struct iovec iov = { .iov_base = g->wbuf.data, .iov_len = g->wbuf.len };
	r = client_send(g, &iov, 1, -1);
	if (r < 0)
		return r;
	*ret_id = id;
	return 0;
}

int gpured_reduce_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, gpured_value *ret)
{
	uint32_t id;
	int r = gpured_submit_region(g, region, op, dt, offset, n, &id);

	return r < 0 ? r : gpured_wait_id(g, id, ret);
}

/* ---- the region object ---- */

int gpured_region_new(gpured_t *g, size_t bytes, gpured_region_t **ret)
{
	return gpured_region_new_flags(g, bytes, 0, ret);
}

int gpured_region_new_flags(gpured_t *g, size_t bytes, unsigned flags, gpured_region_t **ret)
{
	gpured_region_t *rg;
	int fd, r;

	if (flags & ~(unsigned)GPURED_REGION_WRITABLE)
		return client_error(g, -EINVAL, "unknown region flags %#x", flags);
	if (bytes == 0)
		return client_error(g, -EINVAL, "a region needs at least one byte");
	fd = memfd_create("gpured-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return client_error(g, -errno, "memfd_create: %s", strerror(errno));
	/* Allocated whole (the daemon maps no memfd with holes, whose pages
	 * its reads would allocate) and sealed against shrinking, which the
	 * daemon requires; growing stays allowed but is of no use. */
	if (ftruncate(fd, (off_t)bytes) < 0 || (errno = posix_fallocate(fd, 0, (off_t)bytes)) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		r = client_error(g, -errno, "preparing the memfd: %s", strerror(errno));
		close(fd);
		return r;
	}
	rg = calloc(1, sizeof(*rg));
	if (!rg) {
		close(fd);
		return client_error(g, -ENOMEM, "out of memory");
	}
	rg->bytes = bytes;
	rg->writable = flags & GPURED_REGION_WRITABLE;
	rg->data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rg->data == MAP_FAILED) {
		r = client_error(g, -errno, "mmap: %s", strerror(errno));
		close(fd);
		free(rg);
		return r;
	}
	r = gpured_map_fd_flags(g, fd, bytes, flags, &rg->id);
	close(fd);
	if (r < 0) {
		munmap(rg->data, bytes);
		free(rg);
		return r;
	}
	*ret = rg;
	return 0;
}

void *gpured_region_data(const gpured_region_t *rg)
{
	return rg->data;
}

size_t gpured_region_size(const gpured_region_t *rg)
{
	return rg->bytes;
}

uint64_t gpured_region_id(const gpured_region_t *rg)
{
	return rg->id;
}

int gpured_region_writable(const gpured_region_t *rg)
{
	return rg->writable;
}

int gpured_region_reduce(gpured_t *g, const gpured_region_t *rg, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, gpured_value *ret)
{
	return gpured_reduce_region(g, rg->id, op, dt, offset, n, ret);
}

int gpured_region_submit(gpured_t *g, const gpured_region_t *rg, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, uint32_t *ret_id)
{
	return gpured_submit_region(g, rg->id, op, dt, offset, n, ret_id);
}

int gpured_region_free(gpured_t *g, gpured_region_t *rg)
{
	int r = 0;

	if (!rg)
		return 0;
	/* The daemon keeps its own mapping until its requests are done; ours
	 * goes at once. A dead connection released the region already. */
	if (g && !g->dead)
		r = gpured_unmap(g, rg->id);
	munmap(rg->data, rg->bytes);
	free(rg);
	return r;
}
