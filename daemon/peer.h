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
#include <stdint.h>
#include <sys/types.h>

typedef struct gr_peer {
	uid_t uid;
	unsigned conns;    /* connections open */
	uint64_t inflight; /* bytes its requests hold in staging or in flight from regions */
	uint64_t mapped;   /* bytes its regions map */
	unsigned stalled;  /* its connections waiting on its in-flight bound */
} gr_peer;

typedef struct gr_peers {
	gr_peer **v;
	unsigned n, cap;
} gr_peers;

/* The user's entry, made on its first connection (NULL: out of memory). */
gr_peer *gr_peers_join(gr_peers *ps, uid_t uid);
/* One of the user's connections is gone: the entry goes with its last. */
void gr_peers_leave(gr_peers *ps, gr_peer *p);
void gr_peers_deinit(gr_peers *ps);

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
