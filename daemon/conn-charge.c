/*
 * What a connection holds, counted against its user's shares
 * (daemon/quota.h): its place and its descriptors, reserved when it is
 * accepted; the descriptors it passes, closed off the loop
 * (util/closer.h); what the parser holds for a request as its bytes
 * come; and the replies it has not yet taken. All of it is given back
 * when it closes.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "proto/request.h"


/* A user with this many descriptors waiting for the closer (whose
 * closes may hang: util/closer.h) is not read until they are closed. */
#define GR_CLOSING_PER_UID 64u

/* A descriptor the connection lets go: closed by the closer, counted
 * against its user until it is. */
void gr_conn_fdq_drop(void *userdata, int fd)
{
	gr_conn *c = userdata;
	gr_server *s = c->srv;

	if (fd < 0)
		return;
	if (!c->peer) {
		gr_closer_close(s->closer, fd, c->uid, NULL);
		return;
	}
	gr_peer_closing(&s->peers, c->peer, 1);
	gr_closer_close(s->closer, fd, c->uid, &c->peer->closing);
}

void gr_conn_drop_fd(gr_conn *c, int fd)
{
	gr_conn_fdq_drop(c, fd);
}

/* Note since when descriptors are parked (their count is in the
 * connection's reservation: gr_conn_share_take). */
void gr_conn_fds_sync(gr_conn *c)
{
	gr_server *s = c->srv;

	c->fds_seen = c->fds.n;
	if (c->fds.n == 0)
		c->fds_since_ns = 0;
	else if (c->fds_since_ns == 0)
		c->fds_since_ns = s->now_ns ? s->now_ns : uv_hrtime();
}

/* Take the descriptors of the bytes parsed so far (fdpass.h). */
unsigned gr_conn_fds_take(gr_conn *c, int *ret_fd)
{
	unsigned n = gr_fdq_take(&c->fds, c->in_parsed, ret_fd);
	gr_conn_fds_sync(c);
	return n;
}

/*
 * Whether c is not to be read now: its user has too many descriptors
 * waiting for the closer, or has some and the daemon's descriptors are so
 * nearly all in use that one more message's worth might not fit. The
 * timeouts' sweep reads it again later.
 */
bool gr_conn_fds_blocked(gr_conn *c)
{
	const gr_peers *ps = &c->srv->peers;
	const gr_pool *pool = &ps->pool[GR_RES_FDS];
	const gr_peer *p = c->peer;

	if (!p)
		return false;
	uint64_t closing = atomic_load(&p->closing);
	if (closing >= GR_CLOSING_PER_UID)
		return true;
	return closing > 0 && pool->cap && pool->used + GR_FDPASS_PER_READ > pool->cap;
}

/*
 * Count what the parser holds for the request being parsed (its offsets,
 * as their bytes come) in the connection's and its user's in-flight
 * bytes; a request that would take its user past its bound is refused
 * then, not once its client has sent all of it.
 */
void gr_conn_parser_charge(gr_conn *c)
{
	const gr_config *cfg = c->srv->cfg;
	uint64_t held = gr_req_parser_held(c->parser);

	if (held == c->parser_charged)
		return;
	if (held > c->parser_charged) {
		gr_conn_charge(c, held - c->parser_charged);
		if (c->peer->held[GR_RES_INFLIGHT] > cfg->max_inflight_bytes_per_uid) {
			char msg[200];
			snprintf(msg, sizeof(msg),
				 "uid %u holds %" PRIu64 " bytes in flight, past its bound of %" PRIu64
				 " (--max-inflight-bytes-per-uid): 'offsets' refused",
				 (unsigned)c->uid, c->peer->held[GR_RES_INFLIGHT],
				 cfg->max_inflight_bytes_per_uid);
			/* the parser skips the rest; the answer is ours to send */
			gr_req_parser_reject(c->parser, GR_ERR_TOO_LARGE, "%s", msg);
			if (c->cur) {
				gr_request *req = c->cur;
				c->cur = NULL;
				gr_request_fail(req, /* reply= */ true, GR_ERR_TOO_LARGE, msg);
			} else {
				const gr_req *preq = gr_req_parser_req(c->parser);
				gr_conn_reply_error(c, preq->msgid, GR_ERR_TOO_LARGE, "%s", msg);
			}
		}
	} else {
		gr_conn_discharge(c, c->parser_charged - held);
	}
	c->parser_charged = held;
	/* a refusal frees the offsets at once */
	held = gr_req_parser_held(c->parser);
	if (held < c->parser_charged) {
		gr_conn_discharge(c, c->parser_charged - held);
		c->parser_charged = held;
	}
}

/* Replies not yet written count in the user's in-flight bytes: one
 * connection's are bounded (--max-unsent-bytes) only at request
 * boundaries, and a user's connections together by this. */
void gr_conn_unsent_charge(gr_conn *c)
{
	gr_server *s = c->srv;
	uint64_t n = c->wbuf.len + c->writing_bytes;

	if (!c->peer || n == c->unsent_charged)
		return;
	if (n > c->unsent_charged)
		gr_peer_charge(&s->peers, c->peer, GR_RES_INFLIGHT, n - c->unsent_charged);
	else
		gr_peer_discharge_inflight(s, c->peer, c->unsent_charged - n);
	c->unsent_charged = n;
}

bool gr_conn_share_take(gr_conn *c, char *why, size_t whylen)
{
	gr_peers *ps = &c->srv->peers;
	gr_res short_of = GR_RES_N;

	if (!gr_peer_may(ps, c->peer, GR_RES_CONNECTIONS, 1))
		short_of = GR_RES_CONNECTIONS;
	else if (!gr_peer_may(ps, c->peer, GR_RES_FDS, GR_CONN_FDS))
		short_of = GR_RES_FDS;
	if (short_of != GR_RES_N) {
		const gr_pool *pool = &ps->pool[short_of];
		ps->pool[short_of].refused++;
		snprintf(why, whylen,
			 "too many connections: uid %u holds %" PRIu64 " of the daemon's %" PRIu64
			 " %s (%" PRIu64 " in use by %u users; a user's share is what the others "
			 "leave, gpured(8) SECURITY)",
			 (unsigned)c->uid, c->peer->held[short_of], pool->cap, gr_res_name(short_of),
			 pool->used, pool->holders);
		return false;
	}
	gr_peer_charge(ps, c->peer, GR_RES_CONNECTIONS, 1);
	gr_peer_charge(ps, c->peer, GR_RES_FDS, GR_CONN_FDS);
	c->charged = true;
	return true;
}

void gr_conn_share_release(gr_conn *c)
{
	gr_peers *ps = &c->srv->peers;

	/* what its requests still hold is no longer theirs to wait on */
	gr_peer_discharge(ps, c->peer, GR_RES_INFLIGHT, c->staged_bytes);
	gr_peer_discharge(ps, c->peer, GR_RES_STAGING, c->staging_bytes);
	gr_peer_discharge(ps, c->peer, GR_RES_INFLIGHT, c->unsent_charged);
	c->unsent_charged = 0;
	if (c->charged) {
		gr_peer_discharge(ps, c->peer, GR_RES_CONNECTIONS, 1);
		gr_peer_discharge(ps, c->peer, GR_RES_FDS, GR_CONN_FDS);
		c->charged = false;
	}
	if (c->rfd >= 0) {
		/* its socket, till the closer has closed it */
		gr_peer_closing(ps, c->peer, 1);
		c->rfd_counter = &c->peer->closing;
	}
}
