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

#include "client/call.h"
#include "client/cleanup.h"
#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"

struct gpured_region {
	uint64_t id;
	void *data;
	size_t bytes;
	bool writable; /* the daemon maps it for writing too */
};

/* A new entry of method m and the start of its request's one map param,
 * of nkeys keys. */
static int region_begin(gpured_t *g, gr_method m, uint32_t nkeys, pending **ret)
{
	int r;

	if (g->dead)
		return client_dead(g);
	r = client_pending_add(g, m, GR_OP_SUM, GR_DT_I32, &client_kind_reply, ret);
	if (r < 0)
		return r;
	g->wbuf.len = 0;
	r = gr_msg_write_request_header(&g->wbuf, (*ret)->id, m, 1);
	if (r >= 0)
		r = gr_mpw_map(&g->wbuf, nkeys);
	if (r < 0)
		return client_pending_unwritten(g, *ret, r);
	return 0;
}

/* A map request's keys: bytes, writable, and the kind's (cuda: kind
 * and device; cuda_ipc: the handle too). */
static int write_map_keys(gr_buf *b, gr_map_kind kind, const void *handle, size_t bytes,
			  const char *device, bool writable)
{
	GR_MPW_TRY(gr_mpw_kv_uint(b, "bytes", bytes));
	if (writable) {
		GR_MPW_TRY(gr_mpw_cstr(b, "writable"));
		GR_MPW_TRY(gr_mpw_bool(b, true));
	}
	if (kind == GR_MAP_HOST)
		return 0;
	GR_MPW_TRY(gr_mpw_cstr(b, "kind"));
	GR_MPW_TRY(gr_mpw_cstr(b, gr_map_kind_name(kind)));
	GR_MPW_TRY(gr_mpw_cstr(b, "device"));
	GR_MPW_TRY(gr_mpw_cstr(b, device));
	if (kind == GR_MAP_CUDA_IPC) {
		GR_MPW_TRY(gr_mpw_cstr(b, "handle"));
		GR_MPW_TRY(gr_mpw_bin(b, handle, 64));
	}
	return 0;
}

/* The region id of a map's reply, whole in bytes[0..len): 0 or -EPROTO. */
static int read_region_id(const uint8_t *bytes, size_t len, uint64_t *ret)
{
	_cleanup_(gr_obj_tree_deinitp) gr_obj_tree tree = { 0 };
	const gr_obj *id = NULL;

	if (gr_obj_parse(bytes, len, &gr_msg_response_limits, &tree) > 0)
		id = gr_obj_get(&tree.root->v.items[3], "region");
	if (!id || id->type != GR_MP_UINT)
		return -EPROTO;
	*ret = id->v.u;
	return 0;
}

/* A map request of kind (host, cuda with fd, cuda_ipc with handle);
 * writable asks for "writable": true; part_bytes, where less than bytes,
 * maps the first of several allocations (kind cuda). */
static int map_call(gpured_t *g, gr_map_kind kind, int fd, const void *handle, size_t bytes,
		    size_t part_bytes, const char *device, bool writable, uint64_t *ret_region)
{
	bool parts = part_bytes < bytes;
	pending *e;
	int r, c;

	if (bytes == 0 || (kind != GR_MAP_CUDA_IPC && fd < 0) || (kind != GR_MAP_HOST && !device))
		return client_error(g, -EINVAL, "a region needs at least one byte, and its "
				    "descriptor or handle and device");
	r = region_begin(g, GR_METHOD_MAP,
			 (kind == GR_MAP_HOST ? 1 : kind == GR_MAP_CUDA ? 3 : 4) + writable + parts,
			 &e);
	if (r < 0)
		return r;
	r = write_map_keys(&g->wbuf, kind, handle, bytes, device, writable);
	if (r >= 0 && parts)
		r = gr_mpw_kv_uint(&g->wbuf, "part_bytes", part_bytes);
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	e = client_call_send(g, e, fd, &r);
	if (!e)
		return r;
	if (e->err == 0 && read_region_id(e->u.reply, e->u.reply_len, ret_region) < 0)
		r = client_error(g, -EPROTO, "map answered without a region id");
	c = client_collect(g, e, NULL);
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
	return map_call(g, GR_MAP_HOST, fd, NULL, bytes, bytes, NULL,
			flags & GPURED_REGION_WRITABLE, ret_region);
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
	return map_call(g, GR_MAP_CUDA, fd, NULL, bytes, bytes, device,
			flags & GPURED_REGION_WRITABLE, ret_region);
}

/* One map_part request: the next n bytes of region, from fd's allocation. */
static int map_part_call(gpured_t *g, uint64_t region, int fd, size_t n)
{
	pending *e;
	int r;

	r = region_begin(g, GR_METHOD_MAP_PART, 2, &e);
	if (r < 0)
		return r;
	if ((r = gr_mpw_kv_uint(&g->wbuf, "region", region)) < 0 ||
	    (r = gr_mpw_kv_uint(&g->wbuf, "bytes", n)) < 0)
		return client_pending_unwritten(g, e, r);
	e = client_call_send(g, e, fd, &r);
	if (!e)
		return r;
	return client_collect(g, e, NULL);
}

int gpured_map_cuda_fds(gpured_t *g, const int *fds, const size_t *sizes, size_t n,
			const char *device, unsigned flags, uint64_t *ret_region)
{
	size_t bytes = 0;
	uint64_t id;
	int r;

	if (flags & ~(unsigned)GPURED_REGION_WRITABLE)
		return client_error(g, -EINVAL, "unknown region flags %#x", flags);
	if (n == 0 || !fds || !sizes)
		return client_error(g, -EINVAL, "a range needs at least one allocation");
	for (size_t i = 0; i < n; i++) {
		if (sizes[i] == 0 || sizes[i] > SIZE_MAX - bytes)
			return client_error(g, -EINVAL, "allocation %zu of the range: %zu bytes", i,
					    sizes[i]);
		bytes += sizes[i];
	}
	r = map_call(g, GR_MAP_CUDA, fds[0], NULL, bytes, sizes[0], device,
		     flags & GPURED_REGION_WRITABLE, &id);
	if (r < 0)
		return r;
	for (size_t i = 1; i < n; i++) {
		if ((r = map_part_call(g, id, fds[i], sizes[i])) < 0) {
			/* the message the caller reads stays the map_part's */
			char msg[sizeof(g->errmsg)], code[sizeof(g->errcode)];
			memcpy(msg, g->errmsg, sizeof(msg));
			memcpy(code, g->errcode, sizeof(code));
			gpured_unmap(g, id);
			memcpy(g->errmsg, msg, sizeof(msg));
			memcpy(g->errcode, code, sizeof(code));
			return r;
		}
	}
	*ret_region = id;
	return 0;
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
	return map_call(g, GR_MAP_CUDA_IPC, -1, handle, bytes, bytes, device,
			flags & GPURED_REGION_WRITABLE, ret_region);
}

int gpured_unmap(gpured_t *g, uint64_t region)
{
	pending *e;
	int r;

	r = region_begin(g, GR_METHOD_UNMAP, 1, &e);
	if (r < 0)
		return r;
	r = gr_mpw_kv_uint(&g->wbuf, "region", region);
	if (r < 0)
		return client_pending_unwritten(g, e, r);
	e = client_call_send(g, e, -1, &r);
	if (!e)
		return r;
	return client_collect(g, e, NULL);
}

/* ---- the region object ---- */

int gpured_region_new(gpured_t *g, size_t bytes, gpured_region_t **ret)
{
	return gpured_region_new_flags(g, bytes, 0, ret);
}

/* Our side of a region, however far it was made: its mapping and itself. */
static gpured_region_t *region_drop(gpured_region_t *rg)
{
	if (rg && rg->data)
		munmap(rg->data, rg->bytes);
	free(rg);
	return NULL;
}

static void region_dropp(gpured_region_t **rg)
{
	region_drop(*rg);
}

int gpured_region_new_flags(gpured_t *g, size_t bytes, unsigned flags, gpured_region_t **ret)
{
	_cleanup_(region_dropp) gpured_region_t *rg = NULL;
	_cleanup_(closep) int fd = -1;
	void *data;
	int r;

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
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		return client_error(g, -errno, "preparing the memfd: %s", strerror(errno));
	rg = calloc(1, sizeof(*rg));
	if (!rg)
		return client_error(g, -ENOMEM, "out of memory");
	rg->bytes = bytes;
	rg->writable = flags & GPURED_REGION_WRITABLE;
	data = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (data == MAP_FAILED)
		return client_error(g, -errno, "mmap: %s", strerror(errno));
	rg->data = data;
	r = gpured_map_fd_flags(g, fd, bytes, flags, &rg->id);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(rg);
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
	region_drop(rg);
	return r;
}
