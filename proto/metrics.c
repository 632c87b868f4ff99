#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "metrics.h"

/* ---- from the stats and info replies ---- */

static uint64_t obj_uint(const gr_obj *o, const char *key)
{
	const gr_obj *v = gr_obj_get(o, key);

	if (!v)
		return 0;
	if (v->type == GR_MP_UINT)
		return v->v.u;
	if (v->type == GR_MP_INT && v->v.i > 0)
		return (uint64_t)v->v.i;
	return 0;
}

static double obj_float(const gr_obj *o, const char *key)
{
	const gr_obj *v = gr_obj_get(o, key);

	if (!v)
		return 0;
	if (v->type == GR_MP_FLOAT)
		return v->v.f;
	if (v->type == GR_MP_UINT)
		return (double)v->v.u;
	return 0;
}

static void obj_str(const gr_obj *o, const char *key, char *buf, size_t len)
{
	const gr_obj *v = gr_obj_get(o, key);

	if (v && v->type == GR_MP_STR)
		snprintf(buf, len, "%.*s", (int)v->len, v->v.str);
	else
		buf[0] = '\0';
}

/* An array of uints, at most max of them; the count taken. */
static unsigned obj_uints(const gr_obj *o, const char *key, uint64_t *dst, unsigned max)
{
	const gr_obj *v = gr_obj_get(o, key);
	unsigned n = 0;

	if (!v || v->type != GR_MP_ARRAY)
		return 0;
	for (uint32_t i = 0; i < v->len && n < max; i++)
		dst[n++] = v->v.items[i].type == GR_MP_UINT ? v->v.items[i].v.u : 0;
	return n;
}

int gr_metrics_from_obj(gr_metrics *m, const gr_obj *stats, const gr_obj *info)
{
	if (!stats || stats->type != GR_MP_MAP || !info || info->type != GR_MP_MAP)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	obj_str(info, "version", m->version, sizeof(m->version));
	m->uptime_s = obj_float(stats, "uptime_s");
	m->requests = obj_uint(stats, "requests");
	m->errors = obj_uint(stats, "errors");
	m->connections = obj_uint(stats, "connections");
	m->connections_total = obj_uint(stats, "connections_total");
	m->connections_refused = obj_uint(stats, "connections_refused");
	m->connections_timed_out = obj_uint(stats, "connections_timed_out");
	m->inflight = obj_uint(stats, "inflight");
	m->elements = obj_uint(stats, "elements");
	m->batches = obj_uint(stats, "batches");
	m->routed_cpu = obj_uint(stats, "routed_cpu");
	m->regions = obj_uint(stats, "regions");
	m->mapped_bytes = obj_uint(stats, "mapped_bytes");
	m->bytes_socket = obj_uint(stats, "bytes_in");
	m->bytes_shm = obj_uint(stats, "bytes_shm");
	m->bytes_device = obj_uint(stats, "bytes_device");

	const gr_obj *stalls = gr_obj_get(stats, "stalls");
	if (stalls && stalls->type == GR_MP_MAP) {
		m->stalls_staging = obj_uint(stalls, "staging");
		m->stalls_chunks = obj_uint(stalls, "chunks");
		m->stalls_limits = obj_uint(stalls, "limits");
	}

	const gr_obj *devs = gr_obj_get(info, "devices");
	if (devs && devs->type == GR_MP_ARRAY) {
		for (uint32_t i = 0; i < devs->len && m->ndevices < GR_METRICS_DEVICES_MAX; i++) {
			const gr_obj *d = &devs->v.items[i];
			gr_metrics_device *md = &m->devices[m->ndevices];
			const gr_obj *h = gr_obj_get(d, "healthy");

			if (d->type != GR_MP_MAP)
				continue;
			md->index = obj_uint(d, "index");
			obj_str(d, "kind", md->kind, sizeof(md->kind));
			obj_str(d, "name", md->name, sizeof(md->name));
			md->up = h && h->type == GR_MP_BOOL && h->v.b;
			md->jobs = obj_uint(d, "jobs");
			m->ndevices++;
		}
	}

	const gr_obj *hist = gr_obj_get(stats, "latency_hist");
	if (hist && hist->type == GR_MP_MAP) {
		unsigned nb = obj_uints(hist, "le_us", m->le_us, GR_METRICS_BUCKETS_MAX);
		unsigned nc = obj_uints(hist, "counts", m->counts, GR_METRICS_BUCKETS_MAX);
		/* a histogram that does not add up is left out, not rendered
		 * wrong */
		m->nbuckets = nb == nc ? nb : 0;
		m->sum_s = obj_float(hist, "sum_us") / 1e6;
		m->count = obj_uint(hist, "count");
		for (unsigned i = 0; i < m->nbuckets; i++)
			if ((i > 0 && (m->le_us[i] <= m->le_us[i - 1] || m->counts[i] < m->counts[i - 1])) ||
			    m->counts[i] > m->count)
				m->nbuckets = 0;
	}
	return 0;
}

/* ---- rendering ---- */


#define O(call)                    \
	do {                       \
		int r_ = (call);   \
		if (r_ < 0)        \
			return r_; \
	} while (0)

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, surrogates, past U+10FFFF */
	if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/*
 * A label value as the format wants it: quoted, with backslash, double
 * quote and line feed escaped. Values must be UTF-8: any other byte, and
 * other control characters, become '?'.
 */
static int label_value(gr_buf *b, const char *v)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t n = strlen(v);

	O(gr_buf_append(b, "\"", 1));
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(s + i, n - i);

		if (s[i] == '\\' || s[i] == '"')
			O(gr_buf_printf(b, "\\%c", s[i]));
		else if (s[i] == '\n')
			O(gr_buf_append(b, "\\n", 2));
		else if (k == 0 || s[i] < 0x20 || s[i] == 0x7f)
			O(gr_buf_append(b, "?", 1));
		else
			O(gr_buf_append(b, s + i, k));
		i += k ? k : 1;
	}
	return gr_buf_append(b, "\"", 1);
}

/* HELP and TYPE of a family (help text has no backslash or line feed). */
static int family(gr_buf *b, const char *name, const char *type, const char *help)
{
	return gr_buf_printf(b, "# HELP gpured_%s %s\n# TYPE gpured_%s %s\n", name, help, name, type);
}

static int one(gr_buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
	O(family(b, name, type, help));
	return gr_buf_printf(b, "gpured_%s %llu\n", name, (unsigned long long)v);
}

static int histogram(gr_buf *b, const gr_metrics *m)
{
	const char *name = "request_duration_seconds";

	if (m->nbuckets == 0)
		return 0;
	O(family(b, name, "histogram",
		 "Time from a reduce request's last byte to its response, since start."));
	for (unsigned i = 0; i < m->nbuckets; i++)
		O(gr_buf_printf(b, "gpured_%s_bucket{le=\"%g\"} %llu\n", name, (double)m->le_us[i] / 1e6,
		      (unsigned long long)m->counts[i]));
	O(gr_buf_printf(b, "gpured_%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)m->count));
	O(gr_buf_printf(b, "gpured_%s_sum %.15g\n", name, m->sum_s));
	return gr_buf_printf(b, "gpured_%s_count %llu\n", name, (unsigned long long)m->count);
}

int gr_metrics_render(const gr_metrics *m, gr_buf *b)
{
	O(family(b, "build_info", "gauge", "The daemon's version; the value is always 1."));
	O(gr_buf_printf(b, "gpured_build_info{version="));
	O(label_value(b, m->version));
	O(gr_buf_printf(b, "} 1\n"));
	O(family(b, "uptime_seconds", "gauge", "Seconds since the daemon started."));
	O(gr_buf_printf(b, "gpured_uptime_seconds %.3f\n", m->uptime_s));

	O(one(b, "requests_total", "counter", "Requests answered, errors included.", m->requests));
	O(one(b, "errors_total", "counter", "Requests answered with an error.", m->errors));
	O(one(b, "inflight_requests", "gauge", "Requests read but not yet answered.", m->inflight));
	O(one(b, "connections", "gauge", "Client connections open now.", m->connections));
	O(one(b, "connections_total", "counter", "Client connections accepted.",
	      m->connections_total));
	O(one(b, "connections_refused_total", "counter",
	      "Client connections refused with busy (at the connection limit, or stopping).",
	      m->connections_refused));
	O(one(b, "connections_timed_out_total", "counter",
	      "Client connections closed because they took no reply for the write timeout.",
	      m->connections_timed_out));
	O(one(b, "elements_total", "counter", "Array elements reduced.", m->elements));
	O(one(b, "batches_total", "counter",
	      "Backend submissions; several small requests may share one.", m->batches));
	O(one(b, "routed_cpu_total", "counter", "Jobs a CUDA daemon reduced on its CPU route.",
	      m->routed_cpu));
	O(one(b, "regions", "gauge", "Shared-memory regions mapped now.", m->regions));
	O(one(b, "mapped_bytes", "gauge", "Bytes of the shared-memory regions mapped now.",
	      m->mapped_bytes));

	O(family(b, "bytes_in_total", "counter",
		 "Request bytes by the path they came: read from the socket (all of a message), "
		 "reduced in place from shared memory, or from device memory."));
	O(gr_buf_printf(b, "gpured_bytes_in_total{path=\"socket\"} %llu\n",
	      (unsigned long long)m->bytes_socket));
	O(gr_buf_printf(b, "gpured_bytes_in_total{path=\"shm\"} %llu\n", (unsigned long long)m->bytes_shm));
	O(gr_buf_printf(b, "gpured_bytes_in_total{path=\"device\"} %llu\n",
	      (unsigned long long)m->bytes_device));

	O(family(b, "stalls_total", "counter",
		 "Times a connection stopped reading: no staging slot free, its request at its "
		 "chunks in flight, or over its in-flight or unsent bounds."));
	O(gr_buf_printf(b, "gpured_stalls_total{reason=\"staging\"} %llu\n",
	      (unsigned long long)m->stalls_staging));
	O(gr_buf_printf(b, "gpured_stalls_total{reason=\"chunks\"} %llu\n",
	      (unsigned long long)m->stalls_chunks));
	O(gr_buf_printf(b, "gpured_stalls_total{reason=\"limits\"} %llu\n",
	      (unsigned long long)m->stalls_limits));

	O(family(b, "device_up", "gauge", "1 while the device is in service, else 0."));
	for (unsigned i = 0; i < m->ndevices; i++) {
		const gr_metrics_device *d = &m->devices[i];
		O(gr_buf_printf(b, "gpured_device_up{index=\"%llu\",kind=", (unsigned long long)d->index));
		O(label_value(b, d->kind));
		O(gr_buf_printf(b, ",name="));
		O(label_value(b, d->name));
		O(gr_buf_printf(b, "} %d\n", d->up ? 1 : 0));
	}
	O(family(b, "device_jobs_total", "counter", "Jobs run on the device."));
	for (unsigned i = 0; i < m->ndevices; i++)
		O(gr_buf_printf(b, "gpured_device_jobs_total{index=\"%llu\"} %llu\n",
		      (unsigned long long)m->devices[i].index,
		      (unsigned long long)m->devices[i].jobs));

	return histogram(b, m);
}
