/*
 * What the server reports: the stats and info methods' results
 * (PROTOCOL.md, "stats" and "info"), and the one line systemd shows.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server.h"
#include "proto/offsets.h"

#define W(call) GR_MPW_TRY(call)
#define write_kv_uint gr_mpw_kv_uint

static int write_kv_str(gr_buf *b, const char *k, const char *v)
{
	W(gr_mpw_cstr(b, k));
	return gr_mpw_cstr(b, v);
}

/* The cumulative latency histogram (PROTOCOL.md, stats.latency_hist). */
static int write_latency_hist(gr_buf *b, const gr_stats *st)
{
	uint64_t cum[GR_STATS_HIST_BOUNDS];
	uint64_t count = gr_stats_hist_cumulative(st, cum);

	W(gr_mpw_cstr(b, "latency_hist"));
	W(gr_mpw_map(b, 4));
	W(gr_mpw_cstr(b, "le_us"));
	W(gr_mpw_array(b, GR_STATS_HIST_BOUNDS));
	for (unsigned i = 0; i < GR_STATS_HIST_BOUNDS; i++)
		W(gr_mpw_uint(b, gr_stats_hist_le_us[i]));
	W(gr_mpw_cstr(b, "counts"));
	W(gr_mpw_array(b, GR_STATS_HIST_BOUNDS));
	for (unsigned i = 0; i < GR_STATS_HIST_BOUNDS; i++)
		W(gr_mpw_uint(b, cum[i]));
	W(gr_mpw_cstr(b, "sum_us"));
	W(gr_mpw_f64(b, (double)st->hist_sum_ns / 1e3));
	return write_kv_uint(b, "count", count);
}

/* Host data that either engine may take (PROTOCOL.md, stats.host_data):
 * the mode, and each engine's share. */
static int write_host_data(gr_buf *b, const gr_sched *sc)
{
	static const char *const names[2] = { "gpu", "cpu" };

	W(gr_mpw_cstr(b, "host_data"));
	W(gr_mpw_map(b, 3));
	W(write_kv_str(b, "mode", gr_sched_host_name(sc->host)));
	for (unsigned e = 0; e < 2; e++) {
		const gr_sched_share *sh = &sc->share[e];
		W(gr_mpw_cstr(b, names[e]));
		W(gr_mpw_map(b, 5));
		W(write_kv_uint(b, "bytes", sh->bytes));
		W(write_kv_uint(b, "jobs", sh->jobs));
		W(write_kv_uint(b, "inflight_bytes", sh->inflight));
		W(gr_mpw_cstr(b, "busy_s"));
		W(gr_mpw_f64(b, (double)sh->busy_ns / 1e9));
		W(gr_mpw_cstr(b, "rate_gbps"));
		W(gr_mpw_f64(b, sh->rate));
	}
	return 0;
}

int gr_server_write_stats(gr_server *s, gr_buf *b, const gr_peer *asker, bool all)
{
	uint32_t p50, p99, max;
	gr_backend *be = s->backend;
	unsigned ndevices = gr_backend_ndevices(be), healthy = 0;

	for (unsigned i = 0; i < ndevices; i++) {
		gr_device_info d = {0};
		be->ops->describe(be, i, &d);
		healthy += d.healthy;
	}
	gr_stats_percentiles(&s->stats, &p50, &p99, &max);
	W(gr_mpw_map(b, 27));
	W(gr_mpw_cstr(b, "uptime_s"));
	W(gr_mpw_f64(b, (double)(uv_hrtime() - s->stats.start_ns) / 1e9));
	W(write_kv_str(b, "backend", be->name));
	W(write_kv_uint(b, "connections", s->stats.connections));
	W(write_kv_uint(b, "connections_total", s->stats.connections_total));
	W(write_kv_uint(b, "connections_refused", s->stats.connections_refused));
	W(write_kv_uint(b, "connections_timed_out", s->stats.write_timeouts));
	W(write_kv_uint(b, "requests_timed_out", s->stats.request_timeouts));
	W(gr_shares_write(s, b, asker, all));
	W(write_kv_uint(b, "requests", s->stats.requests));
	W(write_kv_uint(b, "errors", s->stats.errors));
	W(write_kv_uint(b, "bytes_in", s->stats.bytes_in));
	W(write_kv_uint(b, "bytes_shm", s->stats.bytes_shm));
	W(write_kv_uint(b, "bytes_device", s->stats.bytes_device));
	W(write_kv_uint(b, "regions", s->stats.regions));
	W(write_kv_uint(b, "mapped_bytes", s->mapped_bytes));
	W(write_kv_uint(b, "elements", s->stats.elements));
	W(write_kv_uint(b, "batches", be->batches));
	W(write_kv_uint(b, "routed_cpu", s->sched.routed));
	W(write_host_data(b, &s->sched));
	W(gr_mpw_cstr(b, "batch_mean"));
	W(gr_mpw_f64(b, be->batches ? (double)be->batched_jobs / (double)be->batches : 0.0));
	W(write_kv_uint(b, "inflight", s->stats.inflight));
	W(write_kv_uint(b, "devices", ndevices));
	W(write_kv_uint(b, "devices_healthy", healthy));
	W(gr_mpw_cstr(b, "stalls"));
	W(gr_mpw_map(b, 5));
	W(write_kv_uint(b, "staging", s->stats.stalls_staging));
	W(write_kv_uint(b, "fds", s->stats.stalls_fds));
	W(write_kv_uint(b, "chunks", s->stats.stalls_chunks));
	W(write_kv_uint(b, "limits", s->stats.stalls_limits));
	W(write_kv_uint(b, "paced", s->stats.stalls_paced));
	W(gr_mpw_cstr(b, "latency_us"));
	W(gr_mpw_map(b, 4));
	W(write_kv_uint(b, "p50", p50));
	W(write_kv_uint(b, "p99", p99));
	W(write_kv_uint(b, "max", max));
	W(write_kv_uint(b, "window", s->stats.lat_n < GR_STATS_WINDOW ? s->stats.lat_n
								       : GR_STATS_WINDOW));
	return write_latency_hist(b, &s->stats);
}

/* Device memory regions mapped on device index: how many, how large. */
static void device_regions(gr_server *s, int index, uint64_t *ret_n, uint64_t *ret_bytes)
{
	*ret_n = *ret_bytes = 0;
	for (gr_link *l = s->conns.next; l != &s->conns; l = l->next) {
		gr_conn *c = gr_container_of(l, gr_conn, link);
		for (gr_region *r = c->regions.head; r; r = r->next)
			if (r->device == index) {
				(*ret_n)++;
				*ret_bytes += r->bytes;
			}
	}
}

static int write_device(gr_server *s, gr_buf *b, const gr_device_info *d)
{
	bool cuda = !strcmp(d->kind, "cuda");
	uint64_t nreg, reg_bytes;

	device_regions(s, d->index, &nreg, &reg_bytes);
	W(gr_mpw_map(b, cuda ? 15 : 10));
	W(write_kv_uint(b, "regions", nreg));
	W(write_kv_uint(b, "region_bytes", reg_bytes));
	W(write_kv_uint(b, "index", (uint64_t)d->index));
	W(write_kv_str(b, "kind", d->kind));
	W(write_kv_str(b, "name", d->name));
	W(gr_mpw_cstr(b, "healthy"));
	W(gr_mpw_bool(b, d->healthy));
	W(write_kv_str(b, "health", d->health));
	W(write_kv_uint(b, cuda ? "sms" : "threads", d->units));
	W(write_kv_uint(b, "memory_bytes", d->memory_bytes));
	W(write_kv_uint(b, "jobs", d->jobs));
	if (cuda) {
		W(write_kv_str(b, "compute_capability", d->compute_capability));
		W(write_kv_uint(b, "driver_version", (uint64_t)d->driver_version));
		W(write_kv_uint(b, "runtime_version", (uint64_t)d->runtime_version));
		W(write_kv_str(b, "pci_bus_id", d->pci_bus_id));
		W(write_kv_str(b, "uuid", d->uuid));
	}
	return 0;
}

int gr_server_write_info(gr_server *s, gr_buf *b)
{
	gr_backend *be = s->backend;
	const gr_config *cfg = s->cfg;
	unsigned ndevices = gr_backend_ndevices(be);

	W(gr_mpw_map(b, 7));
	W(write_kv_str(b, "version", GPURED_VERSION));
	W(write_kv_str(b, "backend", be->name));
	W(write_kv_str(b, "socket", s->path ? s->path : ""));
	W(gr_mpw_cstr(b, "dtypes"));
	W(gr_mpw_array(b, GR_DT_N));
	for (unsigned i = 0; i < GR_DT_N; i++)
		W(gr_mpw_cstr(b, gr_dtype_name((gr_dtype)i)));
	W(gr_mpw_cstr(b, "devices"));
	W(gr_mpw_array(b, ndevices));
	for (unsigned i = 0; i < ndevices; i++) {
		gr_device_info d = {0};
		be->ops->describe(be, i, &d);
		W(write_device(s, b, &d));
	}
	W(gr_mpw_cstr(b, "routing"));
	W(gr_mpw_map(b, 1));
	W(write_kv_uint(b, "cpu_max_bytes", s->sched.route_max));
	W(gr_mpw_cstr(b, "limits"));
	W(gr_mpw_map(b, 28));
	W(write_kv_uint(b, "request_timeout_ms", cfg->request_timeout_ms));
	W(write_kv_uint(b, "first_request_timeout_ms", cfg->first_request_timeout_ms));
	W(write_kv_uint(b, "fd_timeout_ms", cfg->fd_timeout_ms));
	W(write_kv_uint(b, "max_fds", s->peers.pool[GR_RES_FDS].cap));
	W(write_kv_uint(b, "max_staging_bytes", s->peers.pool[GR_RES_STAGING].cap));
	W(write_kv_uint(b, "max_device_regions", cfg->max_device_regions));
	W(write_kv_uint(b, "max_device_bytes", cfg->max_device_bytes));
	W(write_kv_uint(b, "fds_per_connection", GR_CONN_FDS));
	W(gr_mpw_cstr(b, "allow_cuda_ipc_writable"));
	W(gr_mpw_bool(b, cfg->allow_cuda_ipc_writable));
	W(write_kv_uint(b, "max_request_bytes", cfg->max_request_bytes));
	W(write_kv_uint(b, "max_segments", GR_OFFSETS_DEFAULT_MAX_SEGMENTS));
	W(write_kv_uint(b, "max_connections_per_uid", cfg->max_connections_per_uid));
	W(write_kv_uint(b, "max_inflight_bytes_per_uid", cfg->max_inflight_bytes_per_uid));
	W(write_kv_uint(b, "max_mapped_bytes_per_uid", cfg->max_mapped_bytes_per_uid));
	W(gr_mpw_cstr(b, "allow_uids"));
	W(gr_mpw_array(b, cfg->n_allow_uids));
	for (unsigned i = 0; i < cfg->n_allow_uids; i++)
		W(gr_mpw_uint(b, cfg->allow_uids[i]));
	W(gr_mpw_cstr(b, "allow_gids"));
	W(gr_mpw_array(b, cfg->n_allow_gids));
	for (unsigned i = 0; i < cfg->n_allow_gids; i++)
		W(gr_mpw_uint(b, cfg->allow_gids[i]));
	W(write_kv_uint(b, "max_connections", cfg->max_connections));
	W(write_kv_uint(b, "max_regions", cfg->max_regions));
	W(write_kv_uint(b, "max_mapped_bytes", cfg->max_mapped_bytes));
	W(write_kv_uint(b, "max_mapped_bytes_total", cfg->max_mapped_bytes_total));
	W(write_kv_uint(b, "staging_bytes", be->staging_bytes));
	W(write_kv_uint(b, "chunk_bytes", s->staging.slot_bytes));
	W(write_kv_uint(b, "small_max_bytes", s->small_max));
	W(write_kv_uint(b, "max_inflight_bytes", cfg->max_inflight_bytes));
	W(write_kv_uint(b, "max_unsent_bytes", cfg->max_unsent_bytes));
	W(write_kv_uint(b, "write_timeout_ms", cfg->write_timeout_ms));
	W(write_kv_uint(b, "pace_bytes_per_ms", cfg->pace_bytes_per_ms));
	W(write_kv_uint(b, "pace_cpu_pressure", cfg->pace_cpu_pressure));
	return 0;
}

void gr_server_status(gr_server *s, char *buf, size_t len)
{
	static uint64_t last_ns, last_requests;
	uint64_t now = uv_hrtime();
	unsigned ndevices = gr_backend_ndevices(s->backend);
	double rate = 0;

	if (last_ns && now > last_ns)
		rate = (double)(s->stats.requests - last_requests) * 1e9 / (double)(now - last_ns);
	last_ns = now;
	last_requests = s->stats.requests;
	snprintf(buf, len, "backend %s, %u device%s, %llu connection%s, %.0f req/s",
		 s->backend->name, ndevices, ndevices == 1 ? "" : "s",
		 (unsigned long long)s->stats.connections, s->stats.connections == 1 ? "" : "s",
		 rate);
}
