#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/peer.h"
#include "engine/scheduler.h"
#include "math/reduce.h"

#define KiB ((uint64_t)1024)
#define MiB (KiB * 1024)
#define GiB (MiB * 1024)

void gr_config_init(gr_config *c)
{
	*c = (gr_config){
		.socket_mode = 0660,
		.backend = GR_BACKEND_AUTO,
		.max_request_bytes = 1 * GiB,
		.max_connections = 1024,
		.max_regions = 64,
		.max_mapped_bytes = 16 * GiB,
		.max_mapped_bytes_total = 64 * GiB,
		.max_connections_per_uid = 0,
		.max_inflight_bytes_per_uid = 256 * MiB,
		.max_mapped_bytes_per_uid = 0,
		.inline_max_bytes = SIZE_MAX,
		.small_max_bytes = 256 * KiB,
		.max_inflight_bytes = 16 * MiB,
		.request_chunks = 2,
		.max_unsent_bytes = 1 * MiB,
		.batch_max_bytes = 256 * KiB,
		.batch_max_requests = 4096,
		.busy_poll_us = 50,
		.direct_replies = true,
		.cpu_fallback = true,
		.route_cpu_max_bytes = GR_CONFIG_ROUTE_CPU_MAX_BYTES,
		.worker_nice = GR_CONFIG_WORKER_NICE,
		.shutdown_timeout_ms = 5000,
		.write_timeout_ms = 60000,
		.request_timeout_ms = 10000,
		.fd_timeout_ms = 10000,
		.max_device_regions = 4096,
		.pace_bytes_per_ms = 64 * KiB,
		.pace_cpu_pressure = 10,
	};
}

void gr_config_deinit(gr_config *c)
{
	free(c->socket_path);
	free(c->fault);
	free(c->metrics_listen);
	free(c->config_path);
	free(c->allow_uids);
	free(c->allow_gids);
	c->socket_path = c->fault = c->config_path = c->metrics_listen = NULL;
	c->allow_uids = c->allow_gids = NULL;
}

const char *gr_config_default_socket(char *buf, size_t len)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (geteuid() == 0 || !rt || !*rt)
		snprintf(buf, len, "/run/gpured.sock");
	else
		snprintf(buf, len, "%s/gpured.sock", rt);
	return buf;
}

/* "64M", "1GiB", "4096": bytes, with binary suffixes. */
static int parse_size(const char *s, uint64_t max, uint64_t *ret)
{
	char *end;
	uint64_t mult = 1;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case '\0':
		break;
	case 'K':
		mult = KiB;
		break;
	case 'M':
		mult = MiB;
		break;
	case 'G':
		mult = GiB;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
			end += strlen(end);
	}
	if (*end || v > max / mult)
		return -EINVAL;
	*ret = v * mult;
	return 0;
}

static int parse_uint(const char *s, unsigned base, unsigned max, unsigned *ret)
{
	char *end;

	errno = 0;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	unsigned long v = strtoul(s, &end, base);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* Size options into the two field types they have; nothing is stored
 * unless the value parses. */
static int set_u64(const char *arg, uint64_t max, uint64_t *dst)
{
	uint64_t v;
	int r = parse_size(arg, max, &v);
	if (r == 0)
		*dst = v;
	return r;
}

static int set_size(const char *arg, uint64_t max, size_t *dst)
{
	uint64_t v;
	int r = parse_size(arg, max, &v);
	if (r == 0)
		*dst = (size_t)v;
	return r;
}

static int set_string(char **dst, const char *v)
{
	char *s = strdup(v);
	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

enum {
	OPT_SOCKET = 256,
	OPT_SOCKET_MODE,
	OPT_BACKEND,
	OPT_MAX_REQUEST_BYTES,
	OPT_MAX_CONNECTIONS,
	OPT_MAX_REGIONS,
	OPT_MAX_MAPPED_BYTES,
	OPT_MAX_MAPPED_BYTES_TOTAL,
	OPT_MAX_CONNECTIONS_PER_UID,
	OPT_MAX_INFLIGHT_BYTES_PER_UID,
	OPT_MAX_MAPPED_BYTES_PER_UID,
	OPT_ALLOW_UIDS,
	OPT_ALLOW_GIDS,
	OPT_STAGING_BYTES,
	OPT_CHUNK_BYTES,
	OPT_THREADS,
	OPT_WORKER_NICE,
	OPT_STREAMS,
	OPT_INLINE_MAX_BYTES,
	OPT_SMALL_MAX_BYTES,
	OPT_MAX_INFLIGHT_BYTES,
	OPT_REQUEST_CHUNKS,
	OPT_MAX_UNSENT_BYTES,
	OPT_BATCH_MAX_BYTES,
	OPT_BATCH_MAX_REQUESTS,
	OPT_BATCH_DELAY_US,
	OPT_BUSY_POLL_US,
	OPT_DIRECT_REPLIES,
	OPT_CPU_FALLBACK,
	OPT_ROUTE_CPU_MAX_BYTES,
	OPT_HOST_DATA,
	OPT_ALLOW_CUDA_IPC,
	OPT_SHUTDOWN_TIMEOUT_MS,
	OPT_WRITE_TIMEOUT_MS,
	OPT_REQUEST_TIMEOUT_MS,
	OPT_FIRST_REQUEST_TIMEOUT_MS,
	OPT_FD_TIMEOUT_MS,
	OPT_MAX_FDS,
	OPT_MAX_DEVICE_REGIONS,
	OPT_MAX_DEVICE_BYTES,
	OPT_ALLOW_CUDA_IPC_WRITABLE,
	OPT_PACE_BYTES_PER_MS,
	OPT_PACE_CPU_PRESSURE,
	OPT_METRICS_LISTEN,
	OPT_FAULT,
	OPT_CONFIG,
	OPT_HELP,
	OPT_VERSION,
	OPT_VERBOSE = 'v',
};

static const struct option options[] = {
	{"socket", required_argument, NULL, OPT_SOCKET},
	{"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"max-request-bytes", required_argument, NULL, OPT_MAX_REQUEST_BYTES},
	{"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
	{"max-regions", required_argument, NULL, OPT_MAX_REGIONS},
	{"max-mapped-bytes", required_argument, NULL, OPT_MAX_MAPPED_BYTES},
	{"max-mapped-bytes-total", required_argument, NULL, OPT_MAX_MAPPED_BYTES_TOTAL},
	{"max-connections-per-uid", required_argument, NULL, OPT_MAX_CONNECTIONS_PER_UID},
	{"max-inflight-bytes-per-uid", required_argument, NULL, OPT_MAX_INFLIGHT_BYTES_PER_UID},
	{"max-mapped-bytes-per-uid", required_argument, NULL, OPT_MAX_MAPPED_BYTES_PER_UID},
	{"allow-uids", required_argument, NULL, OPT_ALLOW_UIDS},
	{"allow-gids", required_argument, NULL, OPT_ALLOW_GIDS},
	{"staging-bytes", required_argument, NULL, OPT_STAGING_BYTES},
	{"chunk-bytes", required_argument, NULL, OPT_CHUNK_BYTES},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"worker-nice", required_argument, NULL, OPT_WORKER_NICE},
	{"streams", required_argument, NULL, OPT_STREAMS},
	{"inline-max-bytes", required_argument, NULL, OPT_INLINE_MAX_BYTES},
	{"small-max-bytes", required_argument, NULL, OPT_SMALL_MAX_BYTES},
	{"max-inflight-bytes", required_argument, NULL, OPT_MAX_INFLIGHT_BYTES},
	{"request-chunks", required_argument, NULL, OPT_REQUEST_CHUNKS},
	{"max-unsent-bytes", required_argument, NULL, OPT_MAX_UNSENT_BYTES},
	{"batch-max-bytes", required_argument, NULL, OPT_BATCH_MAX_BYTES},
	{"batch-max-requests", required_argument, NULL, OPT_BATCH_MAX_REQUESTS},
	{"batch-delay-us", required_argument, NULL, OPT_BATCH_DELAY_US},
	{"busy-poll-us", required_argument, NULL, OPT_BUSY_POLL_US},
	{"direct-replies", required_argument, NULL, OPT_DIRECT_REPLIES},
	{"cpu-fallback", required_argument, NULL, OPT_CPU_FALLBACK},
	{"route-cpu-max-bytes", required_argument, NULL, OPT_ROUTE_CPU_MAX_BYTES},
	{"host-data", required_argument, NULL, OPT_HOST_DATA},
	{"allow-cuda-ipc", required_argument, NULL, OPT_ALLOW_CUDA_IPC},
	{"shutdown-timeout-ms", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT_MS},
	{"write-timeout-ms", required_argument, NULL, OPT_WRITE_TIMEOUT_MS},
	{"request-timeout-ms", required_argument, NULL, OPT_REQUEST_TIMEOUT_MS},
	{"first-request-timeout-ms", required_argument, NULL, OPT_FIRST_REQUEST_TIMEOUT_MS},
	{"fd-timeout-ms", required_argument, NULL, OPT_FD_TIMEOUT_MS},
	{"max-fds", required_argument, NULL, OPT_MAX_FDS},
	{"max-device-regions", required_argument, NULL, OPT_MAX_DEVICE_REGIONS},
	{"max-device-bytes", required_argument, NULL, OPT_MAX_DEVICE_BYTES},
	{"allow-cuda-ipc-writable", required_argument, NULL, OPT_ALLOW_CUDA_IPC_WRITABLE},
	{"pace-bytes-per-ms", required_argument, NULL, OPT_PACE_BYTES_PER_MS},
	{"pace-cpu-pressure", required_argument, NULL, OPT_PACE_CPU_PRESSURE},
	{"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
	{"fault", required_argument, NULL, OPT_FAULT},
	{"config", required_argument, NULL, OPT_CONFIG},
	{"verbose", no_argument, NULL, OPT_VERBOSE},
	{"help", no_argument, NULL, OPT_HELP},
	{"version", no_argument, NULL, OPT_VERSION},
	{},
};

void gr_config_usage(FILE *f)
{
	fprintf(f,
		"Usage: gpured [OPTION]...\n"
		"Serve array reductions (sum, min, max, sumsq) on a Unix socket.\n\n"
		"  --socket PATH              listen here (default /run/gpured.sock as root,\n"
		"                             else $XDG_RUNTIME_DIR/gpured.sock)\n"
		"  --socket-mode MODE         octal mode of the socket file (default 0660)\n"
		"  --backend auto|cuda|cpu    compute backend (default auto: CUDA if a GPU works)\n"
		"  --max-request-bytes N      larger data is refused with too_large (default 1G)\n"
		"  --max-connections N        more connections get busy (default 1024)\n"
		"  --max-regions N            shared-memory regions one connection may map (64)\n"
		"  --max-mapped-bytes N       bytes one connection may map (16G)\n"
		"  --max-mapped-bytes-total N bytes all connections together may map (64G)\n"
		"  --max-connections-per-uid N  connections of one user (0: its fair share only)\n"
		"  --max-inflight-bytes-per-uid N  staged but unanswered, one user's (256M)\n"
		"  --max-mapped-bytes-per-uid N  bytes one user's regions may map (0: its share only)\n"
		"  --max-fds N                descriptors all users may hold (0: the open-files\n"
		"                             limit less 256)\n"
		"  --max-device-regions N     device-memory regions, all users (4096)\n"
		"  --max-device-bytes N       their bytes (0: no limit)\n"
		"  --allow-uids LIST          serve only these users (and --allow-gids groups)\n"
		"  --allow-gids LIST          serve only these groups (a peer's primary gid)\n"
		"  --staging-bytes N          staging memory (default: cpu 64M, cuda 256M)\n"
		"  --chunk-bytes N            slot and chunk size, a multiple of 256K\n"
		"  --threads N                CPU worker threads (default: one per CPU)\n"
		"  --worker-nice N            the CPU workers' nice above the daemon's, 0..19 (10)\n"
		"  --streams N                CUDA streams per GPU (default 4)\n"
		"  --cpu-fallback yes|no      CUDA: reduce on the CPU once no GPU is in service (yes)\n"
		"  --route-cpu-max-bytes N    CUDA: reduce requests this small on the CPU (1M; 0: none)\n"
		"  --host-data both|gpu|cpu   CUDA: where larger host data goes (both: the engine\n"
		"                             that finishes it first)\n"
		"  --allow-cuda-ipc yes|no    map kind cuda_ipc (legacy IPC handles; no)\n"
		"  --allow-cuda-ipc-writable yes|no  cuda_ipc regions may be \"writable\" (no)\n"
		"  --inline-max-bytes N       CPU: jobs this small run on the loop thread\n"
		"  --small-max-bytes N        data this small is packed into shared batches (256K)\n"
		"  --max-inflight-bytes N     per connection, staged but unanswered (16M)\n"
		"  --request-chunks N         chunks of one request in flight, 1-4 (2)\n"
		"  --max-unsent-bytes N       per connection, replies not yet written (1M)\n"
		"  --batch-max-bytes N        a batch goes out at this many bytes (256K)\n"
		"  --batch-max-requests N     ... or this many requests (4096)\n"
		"  --batch-delay-us N         hold a batch up to N us for more (default 0)\n"
		"  --busy-poll-us N           after a read or an answer, poll N us before sleeping (50)\n"
		"  --direct-replies yes|no    backend threads write small requests' replies (yes)\n"
		"  --shutdown-timeout-ms N    on SIGTERM, wait this long for requests (5000)\n"
		"  --write-timeout-ms N       close a client that reads no reply this long (60000; 0: never)\n"
		"  --request-timeout-ms N     close a client whose request gets no byte this long\n"
		"                             (10000; 0: never)\n"
		"  --first-request-timeout-ms N  close a client that completes no request this\n"
		"                             long after it connects (0: never)\n"
		"  --fd-timeout-ms N          close a client whose descriptors wait this long for\n"
		"                             their request (10000; 0: never)\n"
		"  --pace-bytes-per-ms N      a stream read while others are, on a host short of\n"
		"                             CPU, gets the engine time of N bytes of data of\n"
		"                             average cost a millisecond (64K; 0: never paced)\n"
		"  --pace-cpu-pressure PCT    short of CPU: some task waited for one PCT%% of the\n"
		"                             last 100 ms, per /proc/pressure/cpu (10; 0: always)\n"
		"  --metrics-listen [HOST:]PORT  serve Prometheus metrics at /metrics (a port\n"
		"                             alone: 127.0.0.1; default off)\n"
		"  --fault SPEC               inject backend faults (testing)\n"
		"  --config FILE              settings file (default " GR_CONFIG_DEFAULT_PATH ")\n"
		"  -v, --verbose              log debug messages\n"
		"      --help                 show this help\n"
		"      --version              show the version\n"
		"\nSizes take K, M and G suffixes (powers of 1024).\n");
}

/* a zeroed config's host_data is both */
_Static_assert(GR_SCHED_HOST_BOTH == 0, "the default --host-data is both");

static int parse_yes_no(const char *arg, bool *ret)
{
	if (!strcmp(arg, "yes"))
		*ret = true;
	else if (!strcmp(arg, "no"))
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

static int config_set(gr_config *c, int opt, const char *arg)
{
	int r;

	switch (opt) {
	case OPT_SOCKET:
		return *arg ? set_string(&c->socket_path, arg) : -EINVAL;
	case OPT_SOCKET_MODE:
		return parse_uint(arg, 8, 0777, &c->socket_mode);
	case OPT_BACKEND:
		if (!strcmp(arg, "auto"))
			c->backend = GR_BACKEND_AUTO;
		else if (!strcmp(arg, "cpu"))
			c->backend = GR_BACKEND_CPU;
		else if (!strcmp(arg, "cuda"))
			c->backend = GR_BACKEND_CUDA;
		else
			return -EINVAL;
		return 0;
	case OPT_MAX_REQUEST_BYTES:
		return set_u64(arg, UINT32_MAX, &c->max_request_bytes);
	case OPT_MAX_CONNECTIONS:
		return parse_uint(arg, 10, 1000000, &c->max_connections);
	case OPT_MAX_REGIONS:
		return parse_uint(arg, 10, 1000000, &c->max_regions);
	case OPT_MAX_MAPPED_BYTES:
		return set_u64(arg, UINT64_MAX, &c->max_mapped_bytes);
	case OPT_MAX_MAPPED_BYTES_TOTAL:
		return set_u64(arg, UINT64_MAX, &c->max_mapped_bytes_total);
	case OPT_MAX_CONNECTIONS_PER_UID:
		return parse_uint(arg, 10, 1000000, &c->max_connections_per_uid);
	case OPT_MAX_INFLIGHT_BYTES_PER_UID:
		return set_u64(arg, UINT64_MAX, &c->max_inflight_bytes_per_uid);
	case OPT_MAX_MAPPED_BYTES_PER_UID:
		return set_u64(arg, UINT64_MAX, &c->max_mapped_bytes_per_uid);
	case OPT_ALLOW_UIDS:
	case OPT_ALLOW_GIDS: {
		char bad[80];
		bool g = opt == OPT_ALLOW_GIDS;
		return gr_ids_parse(arg, g, g ? &c->allow_gids : &c->allow_uids,
				    g ? &c->n_allow_gids : &c->n_allow_uids, bad, sizeof(bad));
	}
	case OPT_STAGING_BYTES:
		return set_size(arg, 64 * GiB, &c->staging_bytes);
	case OPT_CHUNK_BYTES:
		return set_size(arg, 4 * GiB, &c->chunk_bytes);
	case OPT_THREADS:
		return parse_uint(arg, 10, 1024, &c->threads);
	case OPT_WORKER_NICE: {
		unsigned v;
		int pr = parse_uint(arg, 10, 19, &v);
		if (pr == 0)
			c->worker_nice = (int)v;
		return pr;
	}
	case OPT_STREAMS:
		return parse_uint(arg, 10, 64, &c->streams);
	case OPT_INLINE_MAX_BYTES:
		return set_size(arg, 1 * GiB, &c->inline_max_bytes);
	case OPT_SMALL_MAX_BYTES:
		return set_size(arg, 1 * GiB, &c->small_max_bytes);
	case OPT_MAX_INFLIGHT_BYTES:
		return set_u64(arg, 64 * GiB, &c->max_inflight_bytes);
	case OPT_REQUEST_CHUNKS:
		r = parse_uint(arg, 10, 4, &c->request_chunks);
		return r < 0 ? r : c->request_chunks ? 0 : -EINVAL;
	case OPT_MAX_UNSENT_BYTES:
		return set_size(arg, 1 * GiB, &c->max_unsent_bytes);
	case OPT_BATCH_MAX_BYTES:
		return set_size(arg, 4 * GiB, &c->batch_max_bytes);
	case OPT_BATCH_MAX_REQUESTS:
		return parse_uint(arg, 10, 1000000, &c->batch_max_requests);
	case OPT_BATCH_DELAY_US:
		return parse_uint(arg, 10, 1000000, &c->batch_delay_us);
	case OPT_BUSY_POLL_US:
		return parse_uint(arg, 10, 1000000, &c->busy_poll_us);
	case OPT_DIRECT_REPLIES:
		return parse_yes_no(arg, &c->direct_replies);
	case OPT_CPU_FALLBACK:
		return parse_yes_no(arg, &c->cpu_fallback);
	case OPT_ALLOW_CUDA_IPC:
		return parse_yes_no(arg, &c->allow_cuda_ipc);
	case OPT_ALLOW_CUDA_IPC_WRITABLE:
		return parse_yes_no(arg, &c->allow_cuda_ipc_writable);
	case OPT_ROUTE_CPU_MAX_BYTES:
		return set_size(arg, 1 * GiB, &c->route_cpu_max_bytes);
	case OPT_HOST_DATA:
		for (unsigned h = 0; h < GR_SCHED_HOST_N; h++)
			if (!strcmp(arg, gr_sched_host_name((gr_sched_host)h))) {
				c->host_data = h;
				return 0;
			}
		return -EINVAL;
	case OPT_SHUTDOWN_TIMEOUT_MS:
		return parse_uint(arg, 10, 3600000, &c->shutdown_timeout_ms);
	case OPT_WRITE_TIMEOUT_MS:
		return parse_uint(arg, 10, 86400000, &c->write_timeout_ms);
	case OPT_REQUEST_TIMEOUT_MS:
		return parse_uint(arg, 10, 86400000, &c->request_timeout_ms);
	case OPT_FIRST_REQUEST_TIMEOUT_MS:
		return parse_uint(arg, 10, 86400000, &c->first_request_timeout_ms);
	case OPT_FD_TIMEOUT_MS:
		return parse_uint(arg, 10, 86400000, &c->fd_timeout_ms);
	case OPT_MAX_FDS:
		return set_u64(arg, UINT32_MAX, &c->max_fds);
	case OPT_MAX_DEVICE_REGIONS:
		return parse_uint(arg, 10, 1000000, &c->max_device_regions);
	case OPT_MAX_DEVICE_BYTES:
		return set_u64(arg, UINT64_MAX, &c->max_device_bytes);
	case OPT_PACE_BYTES_PER_MS:
		return set_u64(arg, 64 * GiB, &c->pace_bytes_per_ms);
	case OPT_PACE_CPU_PRESSURE:
		return parse_uint(arg, 10, 100, &c->pace_cpu_pressure);
	case OPT_METRICS_LISTEN:
		/* [HOST:]PORT is checked where it is bound (daemon/exporter.c) */
		return *arg ? set_string(&c->metrics_listen, arg) : -EINVAL;
	case OPT_FAULT:
		return set_string(&c->fault, arg);
	case OPT_CONFIG:
		return set_string(&c->config_path, arg);
	case OPT_VERBOSE:
		c->verbosity++;
		return 0;
	default:
		return -EINVAL;
	}
}

static char *strip(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int config_load_file(gr_config *c, const char *path, bool must_exist, char *errbuf,
			    size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[4096];
	unsigned lineno = 0;

	if (!f) {
		if (errno == ENOENT && !must_exist)
			return 0;
		int r = -errno;
		snprintf(errbuf, errlen, "cannot read %s: %s", path, strerror(errno));
		return r;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *s = strip(line);
		if (!*s)
			continue;
		char *sep = s + strcspn(s, "= \t");
		char *val = sep + strspn(sep, " \t");
		if (*val == '=')
			val++;
		*sep = '\0';
		val = strip(val);

		const struct option *o = options;
		while (o->name && strcmp(o->name, s))
			o++;
		int r = -EINVAL;
		if (!o->name || o->val == OPT_CONFIG || o->val == OPT_HELP || o->val == OPT_VERSION)
			snprintf(errbuf, errlen, "%s:%u: unknown setting '%s'", path, lineno, s);
		else if (o->has_arg == no_argument && strcmp(val, "yes") && strcmp(val, "true"))
			snprintf(errbuf, errlen, "%s:%u: '%s' takes yes or true", path, lineno, s);
		else if ((r = config_set(c, o->val, val)) < 0)
			snprintf(errbuf, errlen, "%s:%u: invalid value '%s' for %s", path, lineno,
				 val, s);
		if (r < 0) {
			fclose(f);
			return r;
		}
	}
	fclose(f);
	return 0;
}

int gr_config_parse(gr_config *c, int argc, char **argv, char *errbuf, size_t errlen)
{
	int opt, r;

	/* First pass: only --config and --help/--version, so that the file is
	 * read before the rest of the command line overrides it. */
	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "v", options, NULL)) != -1) {
		if (opt == OPT_HELP) {
			gr_config_usage(stdout);
			return 1;
		}
		if (opt == OPT_VERSION) {
			printf("gpured %s\n", GPURED_VERSION);
			return 1;
		}
		if (opt == OPT_CONFIG && (r = set_string(&c->config_path, optarg)) < 0)
			return r;
	}
	r = config_load_file(c, c->config_path ? c->config_path : GR_CONFIG_DEFAULT_PATH,
			     /* must_exist= */ c->config_path != NULL, errbuf, errlen);
	if (r < 0)
		return r;

	optind = 1;
	int longindex = -1;
	while ((opt = getopt_long(argc, argv, "v", options, &longindex)) != -1) {
		if (opt == '?') {
			snprintf(errbuf, errlen, "unknown option or missing argument: %s",
				 argv[optind - 1]);
			return -EINVAL;
		}
		if (opt == OPT_CONFIG)
			continue;
		if (config_set(c, opt, optarg) < 0) {
			snprintf(errbuf, errlen, "invalid value '%s' for --%s", optarg ? optarg : "",
				 longindex >= 0 ? options[longindex].name : "?");
			return -EINVAL;
		}
		longindex = -1;
	}
	if (optind < argc) {
		snprintf(errbuf, errlen, "unexpected argument: %s", argv[optind]);
		return -EINVAL;
	}
	if (c->max_connections == 0 || c->max_request_bytes == 0) {
		snprintf(errbuf, errlen, "--max-connections and --max-request-bytes must be > 0");
		return -EINVAL;
	}
	/* Chunks end on block boundaries, so that chunking cannot change a
	 * result (math/reduce.h). */
	if (c->chunk_bytes % GR_REDUCE_ALIGN_BYTES != 0) {
		snprintf(errbuf, errlen, "--chunk-bytes must be a multiple of %zu KiB",
			 GR_REDUCE_ALIGN_BYTES >> 10);
		return -EINVAL;
	}
	if (c->staging_bytes && c->staging_bytes < (c->chunk_bytes ? c->chunk_bytes : GR_REDUCE_ALIGN_BYTES) + 4096) {
		snprintf(errbuf, errlen, "--staging-bytes must hold at least one chunk and 4 KiB");
		return -EINVAL;
	}
	if (!c->socket_path) {
		char buf[PATH_MAX];
		if ((r = set_string(&c->socket_path, gr_config_default_socket(buf, sizeof(buf)))) < 0)
			return r;
	}
	return 0;
}
