#include <errno.h>
#include <sys/resource.h>

#include "util/nofile.h"

static uint64_t rlim_u64(rlim_t r)
{
	return r == RLIM_INFINITY ? UINT64_MAX : (uint64_t)r;
}

int gr_nofile_raise(uint64_t *ret_soft, uint64_t *ret_hard)
{
	struct rlimit rl;
	int r = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
		*ret_soft = *ret_hard = UINT64_MAX;
		return -errno;
	}
	/* Nothing here uses select() (libuv and the HTTP server use epoll),
	 * and the daemon starts no child that could inherit the limit. */
	if (rl.rlim_cur != rl.rlim_max) {
		struct rlimit want = { .rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max };

		if (setrlimit(RLIMIT_NOFILE, &want) < 0)
			r = -errno;
		else
			rl = want;
	}
	*ret_soft = rlim_u64(rl.rlim_cur);
	*ret_hard = rlim_u64(rl.rlim_max);
	return r;
}

uint64_t gr_nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return UINT64_MAX;
	return rlim_u64(rl.rlim_cur);
}
