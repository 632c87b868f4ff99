#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/bench-region.h"
#include "proto/message.h"
#include "proto/obj.h"

int bench_region_memfd(size_t bytes, int *ret_fd, void **ret_map)
{
	int fd = memfd_create("gpured-benchmark", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *p;

	if (bytes == 0)
		bytes = 1;
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes) < 0 || (errno = posix_fallocate(fd, 0, (off_t)bytes)) != 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0 ||
	    (p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
		int r = -errno;
		close(fd);
		return r;
	}
	*ret_fd = fd;
	*ret_map = p;
	return 0;
}

int bench_region_map(int sock, int memfd, size_t bytes, uint64_t *ret_id)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} cm;
	gr_buf b;
	int r;

	gr_buf_init(&b);
	if ((r = gr_msg_write_request_header(&b, 1, GR_METHOD_MAP, 1)) < 0 ||
	    (r = gr_mpw_map(&b, 1)) < 0 || (r = gr_mpw_cstr(&b, "bytes")) < 0 ||
	    (r = gr_mpw_uint(&b, bytes ? bytes : 1)) < 0) {
		gr_buf_deinit(&b);
		return r;
	}
	struct iovec iov = { b.data, b.len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.space,
			     .msg_controllen = sizeof(cm.space) };
	memset(&cm, 0, sizeof(cm));
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &memfd, sizeof(int));
	ssize_t k = sendmsg(sock, &mh, MSG_NOSIGNAL);
	r = k == (ssize_t)b.len ? 0 : k < 0 ? -errno : -EIO;
	gr_buf_deinit(&b);
	if (r < 0)
		return r;

	/* the reply, read whole */
	uint8_t buf[512];
	size_t have = 0;
	for (;;) {
		gr_obj_tree tree = { 0 };
		long n = have ? gr_obj_parse(buf, have, &gr_msg_response_limits, &tree) : 0;
		if (n < 0)
			return -EPROTO;
		if (n > 0) {
			const gr_obj *root = tree.root, *id = NULL;
			if (root->type == GR_MP_ARRAY && root->len == 4 &&
			    root->v.items[2].type == GR_MP_NIL)
				id = gr_obj_get(&root->v.items[3], "region");
			r = id && id->type == GR_MP_UINT ? 0 : -EPROTO;
			if (r == 0)
				*ret_id = id->v.u;
			gr_obj_tree_deinit(&tree);
			return r;
		}
		if (have == sizeof(buf))
			return -EPROTO;
		k = recv(sock, buf + have, sizeof(buf) - have, 0);
		if (k <= 0)
			return k < 0 ? -errno : -ECONNRESET;
		have += (size_t)k;
	}
}

int bench_region_request(gr_buf *b, gr_op op, gr_dtype dt, size_t n, size_t *ret_id_at)
{
	static const uint8_t id0[9] = { 0xcf };
	int r;

	if ((r = gr_msg_write_request_header(b, 0x10000, GR_METHOD_REDUCE, 1)) < 0 ||
	    (r = gr_mpw_map(b, 5)) < 0 || (r = gr_mpw_cstr(b, "op")) < 0 ||
	    (r = gr_mpw_cstr(b, gr_op_name(op))) < 0 || (r = gr_mpw_cstr(b, "dtype")) < 0 ||
	    (r = gr_mpw_cstr(b, gr_dtype_name(dt))) < 0 || (r = gr_mpw_cstr(b, "region")) < 0)
		return r;
	*ret_id_at = b->len + 1;
	if ((r = gr_buf_append(b, id0, sizeof(id0))) < 0 || (r = gr_mpw_cstr(b, "offset")) < 0 ||
	    (r = gr_mpw_uint(b, 0)) < 0 || (r = gr_mpw_cstr(b, "count")) < 0)
		return r;
	return gr_mpw_uint(b, n);
}
