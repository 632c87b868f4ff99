#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/ctl-progress.h"
#include "client/ctl-top.h"

/* A counter's growth; a counter that went back (it cannot while the
 * daemon runs) counts as none. */
static uint64_t delta(uint64_t now, uint64_t prev)
{
	return now >= prev ? now - prev : 0;
}

static double per_s(uint64_t d, double dt)
{
	return dt > 0 ? (double)d / dt : 0;
}

double ctl_top_quantile(const gpured_snapshot_t *prev, const gpured_snapshot_t *now, double q,
			bool *ret_over)
{
	unsigned n = now->nbuckets;
	uint64_t total, below = 0;
	double rank, lo = 0;

	if (ret_over)
		*ret_over = false;
	if (n == 0 || prev->nbuckets != n || !(q > 0 && q < 1))
		return NAN;
	/* the bounds are fixed for a daemon's life: others are another daemon */
	if (memcmp(prev->le_us, now->le_us, n * sizeof(now->le_us[0])) != 0)
		return NAN;
	total = delta(now->count, prev->count);
	if (total == 0)
		return NAN;
	rank = q * (double)total;
	for (unsigned i = 0; i < n; i++) {
		uint64_t c = delta(now->counts[i], prev->counts[i]);

		if ((double)c >= rank && c > below) {
			double hi = (double)now->le_us[i];

			return lo + (hi - lo) * (rank - (double)below) / (double)(c - below);
		}
		below = c;
		lo = (double)now->le_us[i];
	}
	if (ret_over)
		*ret_over = true;
	return (double)now->le_us[n - 1];
}

/* A latency in us, in the unit that suits it. */
static const char *latency_text(char *buf, size_t size, double us, bool over)
{
	const char *gt = over ? "> " : "";

	if (isnan(us))
		snprintf(buf, size, "-");
	else if (us < 10)
		snprintf(buf, size, "%s%.1f us", gt, us);
	else if (us < 1000)
		snprintf(buf, size, "%s%.0f us", gt, us);
	else if (us < 1e6)
		snprintf(buf, size, "%s%.2f ms", gt, us / 1e3);
	else
		snprintf(buf, size, "%s%.2f s", gt, us / 1e6);
	return buf;
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A number for JSON: null when it is not one. */
static void json_number(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	else
		fputs("null", f);
}

/* What one refresh shows, from two snapshots. */
typedef struct top_view {
	double dt;
	double requests_s, errors_s;
	double socket_s, shm_s, device_s, in_s; /* bytes per second */
	uint64_t reductions;                    /* latencies recorded */
	double p50, p99;
	bool p50_over, p99_over;
} top_view;

static void view(top_view *v, const gpured_snapshot_t *prev, const gpured_snapshot_t *now,
		 double dt)
{
	uint64_t req = delta(now->requests, prev->requests);

	v->dt = dt;
	v->requests_s = per_s(delta(req, CTL_TOP_OWN_REQUESTS), dt);
	v->errors_s = per_s(delta(now->errors, prev->errors), dt);
	v->socket_s = per_s(delta(now->bytes_socket, prev->bytes_socket), dt);
	v->shm_s = per_s(delta(now->bytes_shm, prev->bytes_shm), dt);
	v->device_s = per_s(delta(now->bytes_device, prev->bytes_device), dt);
	v->in_s = v->socket_s + v->shm_s + v->device_s;
	v->reductions = delta(now->count, prev->count);
	v->p50 = ctl_top_quantile(prev, now, 0.50, &v->p50_over);
	v->p99 = ctl_top_quantile(prev, now, 0.99, &v->p99_over);
}

/* The device of now at position i, in prev: matched by index. */
static const gpured_device_snapshot_t *prev_device(const gpured_snapshot_t *prev, uint64_t index)
{
	for (unsigned i = 0; i < prev->ndevices; i++)
		if (prev->devices[i].index == index)
			return &prev->devices[i];
	return NULL;
}

static void render_json(FILE *f, const top_view *v, const gpured_snapshot_t *prev,
			const gpured_snapshot_t *now)
{
	fprintf(f, "{\"version\":");
	json_string(f, now->version);
	fprintf(f, ",\"uptime_s\":%.3f,\"interval_s\":%.6g", now->uptime_s, v->dt);
	fprintf(f, ",\"requests\":%llu,\"requests_per_s\":", (unsigned long long)now->requests);
	json_number(f, v->requests_s);
	fprintf(f, ",\"errors\":%llu,\"errors_per_s\":", (unsigned long long)now->errors);
	json_number(f, v->errors_s);
	fprintf(f, ",\"inflight\":%llu,\"connections\":%llu", (unsigned long long)now->inflight,
		(unsigned long long)now->connections);
	fprintf(f, ",\"bytes_in\":{\"socket\":%llu,\"shm\":%llu,\"device\":%llu}",
		(unsigned long long)now->bytes_socket, (unsigned long long)now->bytes_shm,
		(unsigned long long)now->bytes_device);
	fprintf(f, ",\"in_gb_per_s\":");
	json_number(f, v->in_s / 1e9);
	fprintf(f, ",\"in_gb_per_s_by_path\":{\"socket\":");
	json_number(f, v->socket_s / 1e9);
	fprintf(f, ",\"shm\":");
	json_number(f, v->shm_s / 1e9);
	fprintf(f, ",\"device\":");
	json_number(f, v->device_s / 1e9);
	fprintf(f, "},\"reductions\":%llu,\"latency_p50_us\":", (unsigned long long)v->reductions);
	json_number(f, v->p50);
	fprintf(f, ",\"latency_p99_us\":");
	json_number(f, v->p99);
	fprintf(f, ",\"latency_over\":%s", v->p50_over || v->p99_over ? "true" : "false");
	fprintf(f, ",\"regions\":%llu,\"mapped_bytes\":%llu,\"devices\":[",
		(unsigned long long)now->regions, (unsigned long long)now->mapped_bytes);
	for (unsigned i = 0; i < now->ndevices; i++) {
		const gpured_device_snapshot_t *d = &now->devices[i], *p = prev_device(prev, d->index);

		fprintf(f, "%s{\"index\":%llu,\"kind\":", i ? "," : "", (unsigned long long)d->index);
		json_string(f, d->kind);
		fprintf(f, ",\"name\":");
		json_string(f, d->name);
		fprintf(f, ",\"healthy\":%s,\"jobs\":%llu,\"jobs_per_s\":", d->healthy ? "true" : "false",
			(unsigned long long)d->jobs);
		json_number(f, p ? per_s(delta(d->jobs, p->jobs), v->dt) : NAN);
		fprintf(f, ",\"regions\":%llu,\"region_bytes\":%llu}", (unsigned long long)d->regions,
			(unsigned long long)d->region_bytes);
	}
	fprintf(f, "]}\n");
}

static void render_text(FILE *f, const top_view *v, const gpured_snapshot_t *prev,
			const gpured_snapshot_t *now, const ctl_top_options *o, const char *eol)
{
	char b1[32], b2[32];
	unsigned long up = isfinite(now->uptime_s) && now->uptime_s > 0 ? (unsigned long)now->uptime_s : 0;

	fprintf(f, "gpured %s at %s, up %lu:%02lu:%02lu, every %.3g s%s", now->version[0] ? now->version : "?",
		o->where ? o->where : "?", up / 3600, up / 60 % 60, up % 60, v->dt, eol);
	fprintf(f, "requests  %10.1f/s  errors %.1f/s  in flight %llu  connections %llu  (%llu since start)%s",
		v->requests_s, v->errors_s, (unsigned long long)now->inflight,
		(unsigned long long)now->connections, (unsigned long long)now->requests, eol);
	fprintf(f, "in        %10.3f GB/s  socket %.3f  shm %.3f  device %.3f%s", v->in_s / 1e9,
		v->socket_s / 1e9, v->shm_s / 1e9, v->device_s / 1e9, eol);
	fprintf(f, "latency   p50 %s  p99 %s  of %llu reductions%s",
		latency_text(b1, sizeof(b1), v->p50, v->p50_over),
		latency_text(b2, sizeof(b2), v->p99, v->p99_over), (unsigned long long)v->reductions, eol);
	fprintf(f, "regions   %llu mapped, %s of shared memory%s", (unsigned long long)now->regions,
		ctl_progress_bytes(b1, sizeof(b1), (double)now->mapped_bytes), eol);
	fprintf(f, "%-6s %-5s %-5s %10s %12s %8s %10s  %s%s", "DEVICE", "KIND", "STATE", "JOBS/S",
		"JOBS", "REGIONS", "BYTES", "NAME", eol);
	for (unsigned i = 0; i < now->ndevices; i++) {
		const gpured_device_snapshot_t *d = &now->devices[i], *p = prev_device(prev, d->index);
		char rate[24] = "-";

		if (p)
			snprintf(rate, sizeof(rate), "%.1f", per_s(delta(d->jobs, p->jobs), v->dt));
		fprintf(f, "%-6llu %-5s %-5s %10s %12llu %8llu %10s  %s%s", (unsigned long long)d->index,
			d->kind, d->healthy ? "up" : "DOWN", rate, (unsigned long long)d->jobs,
			(unsigned long long)d->regions,
			ctl_progress_bytes(b1, sizeof(b1), (double)d->region_bytes), d->name, eol);
	}
}

int ctl_top_render(FILE *f, const gpured_snapshot_t *prev, const gpured_snapshot_t *now,
		   double dt, const ctl_top_options *o)
{
	top_view v;

	view(&v, prev, now, dt);
	if (o->json)
		render_json(f, &v, prev, now);
	else
		render_text(f, &v, prev, now, o, "\n");
	return ferror(f) ? CTL_TOP_WRITE_FAILED : 0;
}

/* ---- the loop ---- */

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Wait until the monotonic clock reads until, a signal, or the daemon's
 * end of the connection closing (then the next snapshot fails and says
 * so). The socket is only polled, never read.
 */
static void wait_until(int fd, double until)
{
	bool watch = true;

	while (!stop_signal) {
		double left = until - now_s();
		struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };
		int ms, k;

		if (left <= 0)
			return;
		ms = left > 3600 ? 3600 * 1000 : (int)ceil(left * 1000);
		k = poll(&pfd, watch ? 1 : 0, ms);
		if (k > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
			return;
		if (k > 0)
			watch = false; /* bytes nobody asked for: the snapshot deals with them */
	}
}

/* On a terminal: from the top left, each line erased to its end, and
 * what is below the block erased, so nothing is left of a longer one. */
static int show_tty(FILE *out, const gpured_snapshot_t *prev, const gpured_snapshot_t *now,
		    double dt, const ctl_top_options *o)
{
	top_view v;

	view(&v, prev, now, dt);
	fputs("\033[H", out);
	render_text(out, &v, prev, now, o, "\033[K\n");
	fputs("\033[J", out);
	return fflush(out) == 0 && !ferror(out) ? 0 : CTL_TOP_WRITE_FAILED;
}

int ctl_top_run(gpured_t *g, const ctl_top_options *o, FILE *out, int *ret_signal)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { .sa_handler = on_signal }, old[3];
	gpured_snapshot_t snap[2];
	bool tty = !o->json && isatty(fileno(out));
	double next, t_prev, t_now;
	unsigned cur = 0;
	int r;

	*ret_signal = 0;
	stop_signal = 0;
	/* no SA_RESTART: poll() returns at once on a signal */
	sigemptyset(&sa.sa_mask);
	for (unsigned i = 0; i < 3; i++)
		sigaction(sigs[i], &sa, &old[i]);

	r = gpured_snapshot(g, &snap[cur]);
	t_prev = now_s();
	next = t_prev + o->interval_s;
	if (r == 0 && tty) {
		fputs("\033[H\033[2J", out);
		fflush(out);
	}
	for (unsigned long n = 0; r == 0 && (o->iterations == 0 || n < o->iterations); n++) {
		const gpured_snapshot_t *prev = &snap[cur], *now = &snap[cur ^ 1];
		double dt;

		wait_until(gpured_fd(g), next);
		if (stop_signal)
			break;
		r = gpured_snapshot(g, &snap[cur ^ 1]);
		if (r < 0)
			break;
		t_now = now_s();
		/* the daemon's clock times its counters; ours where it has none */
		dt = now->uptime_s - prev->uptime_s;
		if (!(dt > 0))
			dt = t_now - t_prev;
		if (tty) {
			r = show_tty(out, prev, now, dt, o);
		} else {
			r = ctl_top_render(out, prev, now, dt, o);
			if (r == 0 && !o->json && (o->iterations == 0 || n + 1 < o->iterations))
				fputc('\n', out);
			if (r == 0 && fflush(out) != 0)
				r = CTL_TOP_WRITE_FAILED;
		}
		cur ^= 1;
		t_prev = t_now;
		/* on schedule, unless a refresh fell a whole interval behind */
		next += o->interval_s;
		if (next < t_now)
			next = t_now + o->interval_s;
	}
	for (unsigned i = 0; i < 3; i++)
		sigaction(sigs[i], &old[i], NULL);
	*ret_signal = stop_signal;
	return r;
}
