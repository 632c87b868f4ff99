/*
 * The limit on open descriptors. Every client connection, descriptor a
 * client passes and region it maps holds descriptors, and a soft limit of
 * 1024 (the usual default, kept low for programs that use select()) would
 * be reached long before the limits the daemon sets for its users: the
 * daemon takes all that the service manager allows (LimitNOFILE=, or what
 * it inherited), and sizes its users' pool of descriptors from that
 * (daemon/quota.h).
 */
#pragma once

#include <stdint.h>

/*
 * Raise the soft RLIMIT_NOFILE to the hard one. Returns 0, or a negative
 * errno when it could not be raised; either way *ret_soft and *ret_hard
 * are the limits in effect after (UINT64_MAX: none). Once, at start-up,
 * before any thread is started.
 */
int gr_nofile_raise(uint64_t *ret_soft, uint64_t *ret_hard);

/* The soft limit in effect (UINT64_MAX: none). */
uint64_t gr_nofile_limit(void);
