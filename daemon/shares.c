/*
 * The pools users share (daemon/quota.h), sized from the daemon's
 * settings and limits when it starts, and shown in stats.
 */
#include <inttypes.h>
#include <stdatomic.h>

#include "util/log.h"
#include "util/nofile.h"
#include "daemon/server.h"

/* Descriptors left to the daemon's own use: listener, loop, threads,
 * devices, logs. */
#define SHARES_OWN_FDS 256u

#define W(call) GR_MPW_TRY(call)
#define write_kv_uint gr_mpw_kv_uint

/*
 * What users share (daemon/quota.h): connections, descriptors (the
 * open-files limit less a margin for the daemon's own: listener, loop,
 * threads, devices), staging, mapped host bytes, device regions and
 * their bytes; and the operators' fixed caps per user.
 */
void gr_shares_init(gr_server *s)
{
	const gr_config *cfg = s->cfg;
	gr_peers *ps = &s->peers;
	uint64_t fds = cfg->max_fds;

	if (!fds) {
		uint64_t lim = gr_nofile_limit();
		if (lim > UINT32_MAX)
			lim = UINT32_MAX;
		fds = lim > 2 * SHARES_OWN_FDS ? lim - SHARES_OWN_FDS : lim / 2;
	}
	ps->pool[GR_RES_CONNECTIONS].cap = cfg->max_connections;
	ps->pool[GR_RES_FDS].cap = fds;
	/* the slots chunks may take: the allocator keeps the rest for
	 * batches of small requests (engine/staging.h) */
	ps->pool[GR_RES_STAGING].cap =
		(uint64_t)(s->staging.nslots - s->staging.reserve) * s->staging.slot_bytes;
	ps->pool[GR_RES_STAGING].unit = s->staging.slot_bytes;
	ps->pool[GR_RES_FDS].unit = GR_CONN_FDS;
	ps->pool[GR_RES_MAPPED].cap = cfg->max_mapped_bytes_total;
	ps->pool[GR_RES_DEVICE_REGIONS].cap = cfg->max_device_regions;
	ps->pool[GR_RES_DEVICE_BYTES].cap = cfg->max_device_bytes;
	ps->user_cap[GR_RES_CONNECTIONS] = cfg->max_connections_per_uid;
	ps->user_cap[GR_RES_MAPPED] = cfg->max_mapped_bytes_per_uid;
	uint64_t per_conn = GR_CONN_FDS;
	if (fds / per_conn < cfg->max_connections)
		log_warning("%" PRIu64 " descriptors hold %" PRIu64 " connections with what they "
			    "may send, not --max-connections %u: raise the open-files limit "
			    "(LimitNOFILE=)",
			    fds, fds / per_conn, cfg->max_connections);
}

/* One user's holdings: {"uid", "connections", "closing_fds", "held": {...},
 * "busy_s": {"gpu", "cpu"}}. */
static int write_user(gr_buf *b, const gr_peer *p)
{
	W(gr_mpw_map(b, 5));
	W(write_kv_uint(b, "uid", p->uid));
	W(write_kv_uint(b, "connections", p->conns));
	W(write_kv_uint(b, "closing_fds", atomic_load(&p->closing)));
	W(gr_mpw_cstr(b, "held"));
	W(gr_mpw_map(b, GR_RES_N));
	for (unsigned r = 0; r < GR_RES_N; r++)
		W(write_kv_uint(b, gr_res_name((gr_res)r), p->held[r]));
	W(gr_mpw_cstr(b, "busy_s"));
	W(gr_mpw_map(b, 2));
	W(gr_mpw_cstr(b, "gpu"));
	W(gr_mpw_f64(b, (double)p->busy_ns[GR_ENGINE_GPU] / 1e9));
	W(gr_mpw_cstr(b, "cpu"));
	W(gr_mpw_f64(b, (double)p->busy_ns[GR_ENGINE_CPU] / 1e9));
	return 0;
}

/* The pools users share: {name: {"cap", "used", "users", "refused"}}, and
 * what users hold: every user's for root and the daemon's own user, the
 * asker's alone for others. */
int gr_shares_write(gr_server *s, gr_buf *b, const gr_peer *asker, bool all)
{
	const gr_peers *ps = &s->peers;

	W(gr_mpw_cstr(b, "shares"));
	W(gr_mpw_map(b, GR_RES_N));
	for (unsigned r = 0; r < GR_RES_N; r++) {
		const gr_pool *pool = &ps->pool[r];
		W(gr_mpw_cstr(b, gr_res_name((gr_res)r)));
		W(gr_mpw_map(b, 4));
		W(write_kv_uint(b, "cap", pool->cap));
		W(write_kv_uint(b, "used", pool->used));
		W(write_kv_uint(b, "users", pool->holders));
		W(write_kv_uint(b, "refused", pool->refused));
	}
	W(gr_mpw_cstr(b, "users"));
	if (!all) {
		W(gr_mpw_array(b, asker ? 1 : 0));
		return asker ? write_user(b, asker) : 0;
	}
	W(gr_mpw_array(b, ps->n));
	for (unsigned i = 0; i < ps->n; i++)
		W(write_user(b, ps->v[i]));
	return 0;
}
