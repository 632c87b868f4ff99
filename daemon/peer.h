/*
 * Who is connected: each connection's peer credentials (SO_PEERCRED, read
 * on accept), and what each user holds across all of their connections,
 * so that limits apply per user and not only per connection: one user
 * opening many connections gets no more than the per-user share.
 *
 * A gr_peer is one uid with connections open; it goes once the last of
 * them closes. The daemon may also admit only some users (--allow-uids,
 * --allow-gids) on top of the socket file's mode.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/quota.h"
#include "engine/backend.h"

typedef struct gr_peer {
	uid_t uid;
	unsigned conns;    /* connections open */
	/* what it holds of each pool (daemon/quota.h), its descriptors
	 * being closed off the loop among its fds */
	uint64_t held[GR_RES_N];
	/* descriptors of its handed to the closer thread and not yet closed
	 * (util/closer.h): that thread counts them down */
	_Atomic uint64_t closing;
	uint64_t closing_seen;  /* closing as the pool last counted it */
	unsigned stalled;  /* its connections waiting on its in-flight bound */
	/* the engines' time on its requests' jobs (gr_job.busy_ns), by
	 * GR_ENGINE_*, while it has connections */
	uint64_t busy_ns[GR_ENGINE_N];
} gr_peer;

typedef struct gr_peers {
	gr_peer **v;
	unsigned n, cap;
	gr_pool pool[GR_RES_N];
	/* operators' fixed caps per user on top of the shares (0: none) */
	uint64_t user_cap[GR_RES_N];
} gr_peers;

/* The user's entry, made on its first connection (NULL: out of memory). */
gr_peer *gr_peers_join(gr_peers *ps, uid_t uid);
/* One of the user's connections is gone: the entry goes with its last,
 * unless descriptors of its are still being closed (gr_peers_sweep). */
void gr_peers_leave(gr_peers *ps, gr_peer *p);
/* Free the entries of users with no connection left whose descriptors
 * are all closed now. */
void gr_peers_sweep(gr_peers *ps);
void gr_peers_deinit(gr_peers *ps);

/* May p take n more of r: its fair share (daemon/quota.h) and the
 * operator's cap per user allow it. */
bool gr_peer_may(const gr_peers *ps, const gr_peer *p, gr_res r, uint64_t n);
/* p takes n more of r, or gives n back; a pool's holders follow. */
void gr_peer_charge(gr_peers *ps, gr_peer *p, gr_res r, uint64_t n);
void gr_peer_discharge(gr_peers *ps, gr_peer *p, gr_res r, uint64_t n);
/* Descriptors counted in r = GR_RES_FDS for a closer that counts them
 * down on p->closing: charged to the pool now, discharged by sweep. */
void gr_peer_closing(gr_peers *ps, gr_peer *p, uint64_t n);

/* The peer's credentials of a connected Unix socket; false when the
 * kernel cannot tell (not a Unix socket). */
bool gr_peer_cred(int fd, uid_t *ret_uid, gid_t *ret_gid, pid_t *ret_pid);

/*
 * A list of ids, "1000,1001,www-data": numbers, or user (group) names
 * looked up now. Returns 0, or -EINVAL (and the bad item in bad[]) for an
 * unknown name or a malformed number.
 */
int gr_ids_parse(const char *s, bool groups, uint32_t **ret, unsigned *ret_n, char *bad,
		 size_t badlen);
bool gr_ids_contain(const uint32_t *ids, unsigned n, uint32_t id);
