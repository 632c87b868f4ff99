#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fdpass.h"

void gr_fdq_drop(gr_fdq *q, int fd)
{
	if (fd < 0)
		return;
	if (q->drop)
		q->drop(q->userdata, fd);
	else
		close(fd);
}

void gr_fdq_clear(gr_fdq *q)
{
	for (unsigned i = 0; i < q->n; i++)
		gr_fdq_drop(q, q->e[(q->head + i) % GR_FDQ_MAX].fd);
	q->head = q->n = q->nfd = 0;
}

unsigned gr_fdq_take(gr_fdq *q, uint64_t end, int *ret_fd)
{
	unsigned got = 0;

	*ret_fd = -1;
	while (q->n > 0) {
		gr_fdq_entry *e = &q->e[q->head];
		if (e->pos >= end)
			break;
		if (e->fd >= 0)
			q->nfd--;
		if (got == 0)
			*ret_fd = e->fd;
		else
			gr_fdq_drop(q, e->fd);
		got++;
		q->head = (q->head + 1) % GR_FDQ_MAX;
		q->n--;
	}
	return got;
}

/* What to queue for a descriptor that arrived (fdpass.h: sockets are
 * let go at once). */
static int fdpass_keep(gr_fdq *q, int fd)
{
	struct stat st;

	if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
		gr_fdq_drop(q, fd);
		return GR_FDQ_SOCKET;
	}
	return fd;
}

static bool fdq_push(gr_fdq *q, int fd, uint64_t pos)
{
	if (q->n == GR_FDQ_MAX)
		return false;
	q->e[(q->head + q->n) % GR_FDQ_MAX] = (gr_fdq_entry){ .fd = fd, .pos = pos };
	q->n++;
	if (fd >= 0)
		q->nfd++;
	return true;
}

ssize_t gr_fdpass_recv(int fd, void *buf, size_t len, gr_fdq *q, uint64_t pos)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(GR_FDPASS_PER_READ * sizeof(int))];
	} cm;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cm.space,
		.msg_controllen = sizeof(cm.space),
	};
	ssize_t n;

	do
		n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (mh.msg_controllen == 0 && !(mh.msg_flags & MSG_CTRUNC))
		return n;

	/* Every descriptor is either queued or let go here, whatever else
	 * goes wrong. */
	uint64_t at = n > 0 ? pos + (uint64_t)n - 1 : pos;
	bool full = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			f = fdpass_keep(q, f);
			if (full || !fdq_push(q, f, at)) {
				full = true;
				gr_fdq_drop(q, f);
			}
		}
	}
	if ((mh.msg_flags & MSG_CTRUNC) && !full && !fdq_push(q, GR_FDQ_DROPPED, at))
		full = true;
	return full ? -EMFILE : n;
}
