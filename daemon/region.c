#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "util/log.h"
#include "daemon/region.h"
#include "daemon/server.h"

/* What fd is, for a message saying it is not a memfd. */
static const char *fd_kind(const struct stat *st)
{
	switch (st->st_mode & S_IFMT) {
	case S_IFIFO:
		return "a pipe";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFDIR:
		return "a directory";
	case S_IFREG:
		return "a regular file";
	default:
		return "not a regular file";
	}
}

/* The checks a host region's descriptor must pass (and for writing too,
 * a writable one's); GR_OK or why not. */
static gr_err region_check_memfd(int fd, uint64_t bytes, bool writable, char *why, size_t whylen)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		snprintf(why, whylen, "cannot stat the file descriptor: %s", strerror(errno));
		return GR_ERR_INVALID_PARAMS;
	}
	/* Only memfds (and other shmem files) have seals; only a memfd made
	 * with MFD_ALLOW_SEALING can carry F_SEAL_SHRINK. */
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen,
			 "the file descriptor is %s, not a memfd (memfd_create with MFD_ALLOW_SEALING)",
			 fd_kind(&st));
		return GR_ERR_INVALID_PARAMS;
	}
	if (!(seals & F_SEAL_SHRINK)) {
		snprintf(why, whylen,
			 "the memfd is not sealed against shrinking (add F_SEAL_SHRINK with F_ADD_SEALS)");
		return GR_ERR_INVALID_PARAMS;
	}
	/* the daemon maps it for reading: a descriptor opened for writing
	 * only is the client's mistake, not the daemon's failure */
	int flags = fcntl(fd, F_GETFL);
	if (flags >= 0 && (flags & O_ACCMODE) == O_WRONLY) {
		snprintf(why, whylen, "the memfd is open for writing only; the daemon must read it");
		return GR_ERR_INVALID_PARAMS;
	}
	if (writable && (flags < 0 || (flags & O_ACCMODE) != O_RDWR)) {
		snprintf(why, whylen,
			 "'writable': the memfd is open for reading only; the daemon must write it too");
		return GR_ERR_INVALID_PARAMS;
	}
	if (writable && (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))) {
		snprintf(why, whylen, "'writable': the memfd is sealed against writing (%s)",
			 seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
		return GR_ERR_INVALID_PARAMS;
	}
	/* Sealed: from here on it can only grow. */
	if (st.st_size < 0 || (uint64_t)st.st_size < bytes) {
		snprintf(why, whylen, "'bytes' (%" PRIu64 ") is larger than the memfd (%lld bytes)",
			 bytes, (long long)st.st_size);
		return GR_ERR_INVALID_PARAMS;
	}
	struct statfs sf;
	if (fstatfs(fd, &sf) == 0 && sf.f_type == HUGETLBFS_MAGIC) {
		snprintf(why, whylen,
			 "the memfd is of huge pages (MFD_HUGETLB), which the daemon does not map; "
			 "make it without MFD_HUGETLB");
		return GR_ERR_INVALID_PARAMS;
	}
	/*
	 * Every page must be there already. Reading a hole of a memfd makes
	 * the reader allocate a page, which stays with the memfd, charged to
	 * the daemon, for as long as the client keeps it open: a sparse
	 * memfd would have the daemon allocate memory nobody counts. The
	 * whole file, not only the mapped part, since its blocks are all
	 * that can be told apart without moving the file offset it shares
	 * with the client.
	 */
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t need = ((uint64_t)st.st_size + page - 1) / page * page;
	if ((uint64_t)st.st_blocks * 512 < need) {
		snprintf(why, whylen,
			 "the memfd has holes: %" PRIu64 " of its %lld bytes are allocated; write "
			 "it whole, or fallocate() it, before mapping",
			 (uint64_t)st.st_blocks * 512, (long long)st.st_size);
		return GR_ERR_INVALID_PARAMS;
	}
	return GR_OK;
}

static gr_err region_check_count(gr_server *s, const gr_regions *set, char *why, size_t whylen)
{
	if (set->n >= s->cfg->max_regions) {
		snprintf(why, whylen, "this connection has %u regions mapped, the most it may have",
			 set->n);
		return GR_ERR_INVALID_PARAMS;
	}
	return GR_OK;
}

/* The user's share of a pool (daemon/quota.h) allows n more. */
static gr_err region_check_share(gr_server *s, const gr_regions *set, gr_res r, uint64_t n,
				 char *why, size_t whylen)
{
	gr_peers *ps = &s->peers;
	const gr_pool *pool = &ps->pool[r];

	if (!set->peer || gr_peer_may(ps, set->peer, r, n))
		return GR_OK;
	ps->pool[r].refused++;
	uint64_t held = set->peer->held[r], cap = ps->user_cap[r];
	if (cap && (n > cap || held > cap - n))
		snprintf(why, whylen,
			 "uid %u holds %" PRIu64 " %s, and %" PRIu64 " more would take it past "
			 "its limit of %" PRIu64,
			 (unsigned)set->peer->uid, held, gr_res_name(r), n, cap);
	else
		snprintf(why, whylen,
			 "uid %u holds %" PRIu64 " %s, and its share now allows %" PRIu64 " more, "
			 "not %" PRIu64 " (the daemon's %" PRIu64 " are %" PRIu64 " in use by %u "
			 "users; gpured(8) SECURITY)",
			 (unsigned)set->peer->uid, held, gr_res_name(r),
			 gr_quota_room(pool, held), n, pool->cap, pool->used, pool->holders);
	return GR_ERR_TOO_LARGE;
}

/* Host memory: the number of regions, then the bytes mapped. */
static gr_err region_check_limits(gr_server *s, const gr_regions *set, uint64_t bytes, char *why,
				  size_t whylen)
{
	const gr_config *cfg = s->cfg;
	gr_err e = region_check_count(s, set, why, whylen);

	if (e != GR_OK)
		return e;
	if (bytes > cfg->max_mapped_bytes || set->bytes + bytes > cfg->max_mapped_bytes) {
		snprintf(why, whylen,
			 "mapping %" PRIu64 " bytes would take this connection past its limit of %" PRIu64
			 " mapped bytes (%" PRIu64 " mapped now)",
			 bytes, cfg->max_mapped_bytes, set->bytes);
		return GR_ERR_TOO_LARGE;
	}
	return region_check_share(s, set, GR_RES_MAPPED, bytes, why, whylen);
}

/* What a region counts in its user's pools. */
static void region_charge(gr_server *s, gr_peer *p, const gr_region *r, bool charge)
{
	void (*f)(gr_peers *, gr_peer *, gr_res, uint64_t) =
		charge ? gr_peer_charge : gr_peer_discharge;

	if (!p)
		return;
	if (r->device < 0) {
		f(&s->peers, p, GR_RES_MAPPED, r->bytes);
	} else {
		f(&s->peers, p, GR_RES_DEVICE_REGIONS, 1);
		f(&s->peers, p, GR_RES_DEVICE_BYTES, r->bytes);
	}
}

static void region_add(gr_server *s, gr_regions *set, gr_region *r)
{
	r->next = set->head;
	set->head = r;
	set->n++;
	if (r->device < 0) {
		set->bytes += r->bytes;
		s->mapped_bytes += r->bytes;
	}
	region_charge(s, set->peer, r, /* charge= */ true);
	s->stats.regions++;
}

/*
 * Device memory (kind cuda: an exported allocation in fd; cuda_ipc: a
 * handle): imported by the backend, on the GPU that holds it. It counts
 * against the number of regions, not the mapped bytes, which bound the
 * host memory the daemon pins.
 */
static gr_err region_map_device(gr_server *s, gr_regions *set, const gr_req *req, int fd,
				gr_region **ret, char *why, size_t whylen)
{
	gr_backend *be = s->backend;
	gr_err e = GR_ERR_INVALID_PARAMS;
	gr_region *r = NULL;

	/* Anyone who learns an IPC handle can open it: writing through one
	 * would write into whichever process made it (gpured(8) SECURITY). */
	if (req->kind == GR_MAP_CUDA_IPC && req->writable && !s->cfg->allow_cuda_ipc_writable) {
		snprintf(why, whylen, "kind cuda_ipc cannot be mapped \"writable\": the daemon "
			 "cannot tell that the handle is the client's own; export the allocation "
			 "as a file descriptor (kind cuda), or the operator allows it "
			 "(--allow-cuda-ipc-writable yes)");
		goto out;
	}
	if (!be->ops->map_device) {
		snprintf(why, whylen, "this daemon reduces on the %s and cannot map device memory "
			 "(kind %s)", be->name, gr_map_kind_name(req->kind));
		goto out;
	}
	if (req->kind == GR_MAP_CUDA_IPC && !s->cfg->allow_cuda_ipc) {
		snprintf(why, whylen, "kind cuda_ipc is off: the daemon cannot tell that an IPC handle "
			 "is the client's own; export the allocation as a file descriptor (kind "
			 "cuda), or the operator allows IPC handles (--allow-cuda-ipc yes)");
		goto out;
	}
	if (region_check_count(s, set, why, whylen) != GR_OK)
		goto out;
	if ((e = region_check_share(s, set, GR_RES_DEVICE_REGIONS, 1, why, whylen)) != GR_OK ||
	    (e = region_check_share(s, set, GR_RES_DEVICE_BYTES, req->bytes, why, whylen)) != GR_OK)
		goto out;
	e = GR_ERR_INVALID_PARAMS;
	if (req->bytes > SIZE_MAX || !(r = calloc(1, sizeof(*r)))) {
		snprintf(why, whylen, "out of memory");
		e = GR_ERR_INTERNAL;
		goto out;
	}
	bool in_parts = req->has_part_bytes && req->part_bytes < req->bytes;
	if (in_parts && !be->ops->map_device_part) {
		snprintf(why, whylen, "this daemon cannot build a range of several allocations");
		free(r);
		goto out;
	}
	gr_device_map m = {
		.kind = req->kind,
		.fd = fd,
		.handle = req->handle,
		.bytes = req->bytes,
		.part_bytes = in_parts ? req->part_bytes : req->bytes,
		.device = req->device,
		.writable = req->writable,
	};
	if (be->ops->map_device(be, &m, &r->dev, why, whylen) < 0) {
		free(r);
		goto out;
	}
	r->srv = s;
	r->id = ++s->last_region_id;
	r->refs = 1;
	r->kind = req->kind;
	r->base = r->dev.ptr;
	r->bytes = (size_t)req->bytes;
	r->mapped = (size_t)m.part_bytes;
	r->in_parts = in_parts;
	r->device = r->dev.device;
	r->writable = req->writable;
	region_add(s, set, r);
	*ret = r;
	e = GR_OK;
out:
	return e;
}

gr_err gr_region_map(gr_server *s, gr_regions *set, const gr_req *req, int fd, gr_region **ret,
		     char *why, size_t whylen)
{
	gr_err e;

	if (req->kind != GR_MAP_HOST)
		return region_map_device(s, set, req, fd, ret, why, whylen);
	if ((e = region_check_memfd(fd, req->bytes, req->writable, why, whylen)) != GR_OK ||
	    (e = region_check_limits(s, set, req->bytes, why, whylen)) != GR_OK)
		goto fail;
	if (req->bytes > SIZE_MAX) {
		snprintf(why, whylen, "'bytes' is larger than this machine can map");
		e = GR_ERR_TOO_LARGE;
		goto fail;
	}

	gr_region *r = calloc(1, sizeof(*r));
	if (!r) {
		snprintf(why, whylen, "out of memory");
		e = GR_ERR_INTERNAL;
		goto fail;
	}
	/* Not populated here: its pages are all there (region_check_memfd),
	 * so the threads that first read it only map them, and the loop
	 * serves others meanwhile. */
	int prot = req->writable ? PROT_READ | PROT_WRITE : PROT_READ;
	void *p = mmap(NULL, (size_t)req->bytes, prot, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		int err = errno;
		snprintf(why, whylen, "cannot map the memfd: %s", strerror(err));
		free(r);
		e = err == ENOMEM ? GR_ERR_TOO_LARGE : GR_ERR_INTERNAL;
		goto fail;
	}
	r->srv = s;
	r->id = ++s->last_region_id;
	r->refs = 1;
	r->kind = req->kind;
	r->base = p;
	r->bytes = (size_t)req->bytes;
	r->mapped = r->bytes;
	r->device = -1;
	r->writable = req->writable;
	/* a backend that registers it does so off the loop (region-pin.c) */
	region_add(s, set, r);
	*ret = r;
	return GR_OK;

fail:
	return e;
}

gr_err gr_region_map_part(gr_server *s, gr_regions *set, const gr_req *req, int fd,
			  gr_region **ret, char *why, size_t whylen)
{
	gr_backend *be = s->backend;
	gr_region *r = gr_region_find(set, req->region);

	if (!r) {
		snprintf(why, whylen, "unknown region %" PRIu64 " (none such is mapped on this "
			 "connection)", req->region);
		return GR_ERR_INVALID_PARAMS;
	}
	if (!r->in_parts) {
		snprintf(why, whylen, "region %" PRIu64 " is not a range of several allocations "
			 "(map it with kind cuda and part_bytes)", r->id);
		return GR_ERR_INVALID_PARAMS;
	}
	if (r->mapped == r->bytes) {
		snprintf(why, whylen, "region %" PRIu64 " is whole already (%zu bytes)", r->id,
			 r->bytes);
		return GR_ERR_INVALID_PARAMS;
	}
	if (req->bytes > r->bytes - r->mapped) {
		snprintf(why, whylen, "a part of %" PRIu64 " bytes would reach past the end of region "
			 "%" PRIu64 " (%zu of its %zu bytes are mapped)",
			 req->bytes, r->id, r->mapped, r->bytes);
		return GR_ERR_INVALID_PARAMS;
	}
	int e = be->ops->map_device_part(be, &r->dev, fd, r->mapped, req->bytes, why, whylen);
	if (e < 0)
		return e == -ENOMEM ? GR_ERR_INTERNAL : GR_ERR_INVALID_PARAMS;
	r->mapped += (size_t)req->bytes;
	*ret = r;
	return GR_OK;
}

bool gr_region_whole(const gr_region *r, char *why, size_t whylen)
{
	if (r->mapped == r->bytes)
		return true;
	snprintf(why, whylen, "region %" PRIu64 " is not whole: %zu of its %zu bytes are mapped "
		 "(map_part brings the rest)", r->id, r->mapped, r->bytes);
	return false;
}

gr_region *gr_region_find(gr_regions *set, uint64_t id)
{
	for (gr_region *r = set->head; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

bool gr_region_unmap(gr_regions *set, uint64_t id)
{
	for (gr_region **pp = &set->head; *pp; pp = &(*pp)->next) {
		gr_region *r = *pp;
		if (r->id != id)
			continue;
		*pp = r->next;
		r->next = NULL;
		set->n--;
		if (r->device < 0)
			set->bytes -= r->bytes;
		region_charge(set->srv, set->peer, r, /* charge= */ false);
		gr_region_unref(r);
		return true;
	}
	return false;
}

void gr_regions_release(gr_regions *set)
{
	while (set->head)
		gr_region_unmap(set, set->head->id);
}

gr_region *gr_region_unref(gr_region *r)
{
	if (!r || --r->refs > 0)
		return NULL;
	gr_server *s = r->srv;
	gr_backend *be = s->backend;
	if (r->device >= 0) {
		if (be && be->ops->unmap_device)
			be->ops->unmap_device(be, &r->dev);
		s->stats.regions--;
		free(r);
		return NULL;
	}
	if (gr_region_unpin(r))
		return NULL; /* the pool unregisters, unmaps and frees it */
	if (r->reg && be && be->ops->unregister_host)
		be->ops->unregister_host(be, r->reg);
	munmap((void *)r->base, r->bytes);
	s->mapped_bytes -= r->bytes;
	s->stats.regions--;
	free(r);
	return NULL;
}
