/*
 * The descriptors fuzz-conn passes with its messages (fuzz-conn-fds.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/fuzz/fuzz-conn-fds.h"

static int make_memfd(fuzz_fds *h, size_t size, unsigned flags, unsigned seals, uint8_t seed)
{
	uint8_t pat[MEMFD_PATTERN_BYTES];
	int fd;

	if (size > MEMFD_BYTES_MAX)
		size = MEMFD_BYTES_MAX;
	if (h->memfd_bytes + size > MEMFD_TOTAL_MAX)
		size = 0;
	h->memfd_bytes += size;
	h->used_memfd = true;
	fd = memfd_create("gpured-fuzz-conn", MFD_CLOEXEC | flags);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, (off_t)size) == 0);
	/* allocated whole, as the daemon requires, except when the input
	 * asks for holes */
	if (size && !(seed & 1))
		CHECK(posix_fallocate(fd, 0, (off_t)size) == 0);
	uint64_t st = 0x9e3779b97f4a7c15ull ^ seed;
	for (size_t i = 0; i < sizeof(pat); i += 8) {
		uint64_t v = check_rng(&st);
		memcpy(pat + i, &v, 8);
	}
	size_t n = size < sizeof(pat) ? size : sizeof(pat);
	if (n)
		CHECK(pwrite(fd, pat, n, 0) == (ssize_t)n);
	if (seals)
		CHECK(fcntl(fd, F_ADD_SEALS, seals) == 0);
	return fd;
}

/* A sealed memfd opened again through /proc with other access. */
static int reopen(int fd, int how)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int r = open(p, how | O_CLOEXEC);
	CHECK(r >= 0);
	close(fd);
	return r;
}


int fuzz_make_fd(fuzz_fds *h, const uint8_t spec[3], bool *ret_self)
{
	size_t size = (size_t)(spec[1] | spec[2] << 8) << (spec[0] >> 5);
	int p[2], fd = -1;

	*ret_self = false;
	switch ((spec[0] & 31) % FD_KINDS) {
	case FD_MEMFD_SEALED:
	case FD_MEMFD_SEALED_2:
		return make_memfd(h, size, MFD_ALLOW_SEALING, F_SEAL_SHRINK, spec[1]);
	case FD_MEMFD_UNSEALED:
		return make_memfd(h, size, MFD_ALLOW_SEALING, 0, spec[1]);
	case FD_MEMFD_NO_SEALING:
		return make_memfd(h, size, 0, 0, spec[1]);
	case FD_MEMFD_ALL_SEALS:
		return make_memfd(h, size, MFD_ALLOW_SEALING,
				  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL, spec[1]);
	case FD_MEMFD_GROW_ONLY:
		return make_memfd(h, size, MFD_ALLOW_SEALING, F_SEAL_GROW, spec[1]);
	case FD_MEMFD_RDONLY:
		return reopen(make_memfd(h, size, MFD_ALLOW_SEALING, F_SEAL_SHRINK, spec[1]),
			      O_RDONLY);
	case FD_MEMFD_WRONLY:
		return reopen(make_memfd(h, size, MFD_ALLOW_SEALING, F_SEAL_SHRINK, spec[1]),
			      O_WRONLY);
	case FD_MEMFD_PATH:
		return reopen(make_memfd(h, size, MFD_ALLOW_SEALING, F_SEAL_SHRINK, spec[1]),
			      O_PATH);
	case FD_PIPE_READ:
	case FD_PIPE_WRITE:
		CHECK(pipe2(p, O_CLOEXEC) == 0);
		fd = p[(spec[0] & 31) % FD_KINDS == FD_PIPE_WRITE];
		close(p[(spec[0] & 31) % FD_KINDS != FD_PIPE_WRITE]);
		return fd;
	case FD_DEV_NULL:
		fd = open("/dev/null", O_RDWR | O_CLOEXEC);
		break;
	case FD_SOCKET:
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) == 0);
		close(p[1]);
		return p[0];
	case FD_SELF:
		*ret_self = true;
		return h->self;
	case FD_REGULAR:
		fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd >= 0 && size)
			CHECK(ftruncate(fd, (off_t)(size < MEMFD_BYTES_MAX ? size : MEMFD_BYTES_MAX)) == 0);
		if (fd < 0) /* no O_TMPFILE there */
			fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
		break;
	case FD_DIRECTORY:
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		break;
	case FD_EVENTFD:
		fd = eventfd(0, EFD_CLOEXEC);
		break;
	case FD_CLOSED:
		return -1;
	}
	CHECK(fd >= 0);
	return fd;
}
