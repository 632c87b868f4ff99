/*
 * The descriptors fuzz-conn passes with its messages: memfds sealed and
 * not, opened again read-only, write-only or O_PATH, pipes, /dev/null, a
 * socket, the connection's own end, a regular file, a directory, an
 * eventfd, and a closed one.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A memfd's bytes at most, and all of an input's together. */
#define MEMFD_BYTES_MAX ((size_t)4 << 20)
#define MEMFD_TOTAL_MAX ((size_t)16 << 20)
/* The pattern written at the start of each memfd. */
#define MEMFD_PATTERN_BYTES 4096u

enum {
	FD_MEMFD_SEALED,          /* what map wants */
	FD_MEMFD_SEALED_2,        /* the same, more likely */
	FD_MEMFD_UNSEALED,
	FD_MEMFD_NO_SEALING,      /* made without MFD_ALLOW_SEALING */
	FD_MEMFD_ALL_SEALS,       /* shrink, grow, write and seal */
	FD_MEMFD_GROW_ONLY,       /* sealed, but not against shrinking */
	FD_MEMFD_RDONLY,          /* sealed, opened again read-only */
	FD_MEMFD_WRONLY,          /* sealed, opened again write-only */
	FD_MEMFD_PATH,            /* sealed, opened again O_PATH */
	FD_PIPE_READ,
	FD_PIPE_WRITE,
	FD_DEV_NULL,
	FD_SOCKET,                /* one end of a socketpair */
	FD_SELF,                  /* the connection's own client end */
	FD_REGULAR,               /* an unlinked regular file */
	FD_DIRECTORY,
	FD_EVENTFD,
	FD_CLOSED,                /* not open: sendmsg() refuses it */
	FD_KINDS,
};

typedef struct fuzz_fds {
	int self;           /* the connection's client end */
	size_t memfd_bytes; /* the input's memfds' bytes so far */
	bool used_memfd;
} fuzz_fds;

/* A descriptor of the kind spec[0] names, modulo FD_KINDS (-1: a closed
 * one; *ret_self: the connection's own end, not to be closed here); a
 * memfd's size is (spec[1] | spec[2] << 8) << (spec[0] >> 5) bytes, at
 * most MEMFD_BYTES_MAX, and 0 once the input's add up to
 * MEMFD_TOTAL_MAX. */
int fuzz_make_fd(fuzz_fds *f, const uint8_t spec[3], bool *ret_self);
