/*
 * gpured-benchmark: a load generator in the manner of redis-benchmark.
 *
 * All -c connections are driven by one thread with an epoll loop (or by
 * --threads N loops, connections dealt out among them), each connection
 * keeping up to -P reduce requests in flight until -n requests in all are
 * done (or -t seconds have passed). A load generator must cost less than
 * what it measures: one thread blocked per connection would make every
 * reply wake a thread, and that wake-up is charged to the daemon. So the
 * wire is spoken here directly, with the proto layer's writers and bounded
 * reader, over non-blocking sockets; requests freed up by one read of
 * replies go out together in one writev().
 *
 * Every request sends the same array, filled so that its result is known
 * exactly (small integers, whose float sums are exact in any order), so
 * every reply is checked; a wrong value counts as an error. Latency is per
 * request, from its submission to the read that brought its reply.
 *
 * The array repeats with a period of three elements but for two, so a
 * large one is sent out of one buffer of about --send-buffer bytes (1 MiB)
 * named again and again in the writev(), with the two odd elements spliced
 * in: the client's copies then come from its cache, as gpured-sockbw's
 * writes of one reused 1 MiB buffer do, and the two measure the daemon's
 * side of the socket alike. --send-buffer 0 sends from one flat array.
 *
 * Here: the options and the report. The connections and their threads
 * are bench-conn.c's, the array and its known result bench-data.c's, the
 * latency histogram bench-latency.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/bench-conn.h"
#include "bench/bench-data.h"
#include "bench/bench-latency.h"
#include "proto/types.h"

/* Slots are numbered in 16 bits of the msgid (conn_msgid(), bench-conn.c). */
#define BENCH_MAX_DEPTH 65536u
#define BENCH_MAX_CONNS 10000u
/* A large payload is sent out of a buffer of this many bytes, repeated. */
#define SEND_BUFFER_DEFAULT (1u << 20)
#define SEND_BUFFER_MIN 4096u

/* CPU time this process has used, user and system, in seconds. */
static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: gpured-benchmark [OPTIONS]\n"
		"\n"
		"Load the gpured daemon with reduce requests and report throughput and latency.\n"
		"\n"
		"  -s, --socket PATH    Daemon socket (default: $GPURED_SOCKET, else the daemon's default)\n"
		"  -c N                 Connections (default 8)\n"
		"      --threads N      Threads the connections are spread over (default 1)\n"
		"  -P N                 Requests in flight per connection (default 1)\n"
		"  -n N                 Total requests (default 100000; 0 with -t: no limit)\n"
		"  -d N                 Elements per request (default 256)\n"
		"      --dtype T        i32 i64 u32 u64 f32 f64, or f16 bf16 f8e4m3 f8e5m2\n"
		"                       i8 u8 i16 u16 (default f32)\n"
		"      --op OP          sum min max sumsq argmin argmax moments (default sum)\n"
		"  -t SECONDS           Stop after this long, even if fewer than -n are done\n"
		"      --send-buffer N  Send a larger payload out of one buffer of about N bytes,\n"
		"                       named again and again (default 1048576; at least 4096;\n"
		"                       0: out of one array as large as the payload)\n"
		"      --region         Put the array in a shared-memory region that each\n"
		"                       connection maps once; requests name it, not carry it\n"
		"      --json           Print the results as JSON\n"
		"  -h, --help           Show this help\n"
		"\n"
		"Every reply is checked against the known result; wrong values count as errors.\n"
		"Exit status: 0 no errors, 1 errors or failed connections, 2 usage error.\n");
}

static bool parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	/* Accept a k/M/G suffix, powers of 1024, for element counts. */
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'M')
		v <<= 20, end++;
	else if (*end == 'G')
		v <<= 30, end++;
	if (errno || *end)
		return false;
	*ret = v;
	return true;
}

int main(int argc, char **argv)
{
	enum { OPT_DTYPE = 256, OPT_OP, OPT_JSON, OPT_THREADS, OPT_SEND_BUFFER, OPT_REGION };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "op", required_argument, NULL, OPT_OP },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "send-buffer", required_argument, NULL, OPT_SEND_BUFFER },
		{ "region", no_argument, NULL, OPT_REGION },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bench_opts o = {
		.conns = 8, .threads = 1, .depth = 1, .requests = 100000, .elements = 256,
		.dtype = GR_DT_F32, .op = GR_OP_SUM, .send_buffer = SEND_BUFFER_DEFAULT,
	};
	bench_data d = { 0 };
	uint64_t v, done = 0, errors = 0, mismatches = 0, t0, t1;
	bench_latency *lat;
	worker *w;
	conn *cs;
	unsigned failed = 0;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "s:c:P:n:d:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'c':
			if (!parse_u64(optarg, &v) || v == 0 || v > BENCH_MAX_CONNS)
				goto bad;
			o.conns = (unsigned)v;
			break;
		case OPT_THREADS:
			if (!parse_u64(optarg, &v) || v == 0 || v > 1024)
				goto bad;
			o.threads = (unsigned)v;
			break;
		case 'P':
			if (!parse_u64(optarg, &v) || v == 0 || v > BENCH_MAX_DEPTH)
				goto bad;
			o.depth = (unsigned)v;
			break;
		case 'n':
			if (!parse_u64(optarg, &o.requests))
				goto bad;
			break;
		case 'd':
			if (!parse_u64(optarg, &o.elements))
				goto bad;
			break;
		case 't':
			errno = 0;
			o.seconds = strtod(optarg, &end);
			if (errno || *end || !(o.seconds > 0))
				goto bad;
			break;
		case OPT_DTYPE:
			if (!gr_dtype_parse(optarg, strlen(optarg), &o.dtype))
				goto bad;
			break;
		case OPT_OP:
			if (!gr_op_parse(optarg, strlen(optarg), &o.op))
				goto bad;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_REGION:
			o.region = true;
			break;
		case OPT_SEND_BUFFER:
			if (!parse_u64(optarg, &v) || (v != 0 && v < SEND_BUFFER_MIN))
				goto bad;
			o.send_buffer = v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'gpured-benchmark --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpured-benchmark: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.elements > UINT32_MAX || o.elements * gr_dtype_size(o.dtype) > UINT32_MAX) {
		fprintf(stderr, "gpured-benchmark: -d %llu: a request holds less than 4 GiB\n",
			(unsigned long long)o.elements);
		return 2;
	}
	if (o.threads > o.conns)
		o.threads = o.conns;
	/* A connection the daemon closes must fail its requests, not kill us. */
	signal(SIGPIPE, SIG_IGN);

	c = bench_data_fill(&o, &d);
	if (c < 0) {
		fprintf(stderr, "gpured-benchmark: cannot build the request: %s\n", strerror(-c));
		return 1;
	}
	w = calloc(o.threads, sizeof(*w));
	cs = calloc(o.conns, sizeof(*cs));
	if (!w || !cs) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < o.conns; i++) {
		cs[i].fd = -1;
		if (o.requests == 0 && o.seconds > 0)
			cs[i].quota = UINT64_MAX;
		else
			cs[i].quota = o.requests / o.conns + (i < o.requests % o.conns);
	}
	if (o.seconds > 0)
		bench_deadline_ns = bench_now_ns() + (uint64_t)(o.seconds * 1e9);
	if (pthread_barrier_init(&bench_start_barrier, NULL, o.threads) != 0) {
		fprintf(stderr, "gpured-benchmark: cannot create a barrier\n");
		return 1;
	}
	double cpu0 = cpu_seconds();
	/* Thread i takes a contiguous share of the connections. */
	for (unsigned i = 0, first = 0; i < o.threads; i++) {
		w[i].o = &o;
		w[i].d = &d;
		w[i].epfd = -1;
		w[i].conns = cs + first;
		w[i].n_conns = o.conns / o.threads + (i < o.conns % o.threads);
		first += w[i].n_conns;
		if (pthread_create(&w[i].thread, NULL, bench_worker_run, &w[i]) != 0) {
			fprintf(stderr, "gpured-benchmark: cannot start thread\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < o.threads; i++)
		pthread_join(w[i].thread, NULL);
	t1 = bench_now_ns();
	double cpu = cpu_seconds() - cpu0;
	pthread_barrier_destroy(&bench_start_barrier);

	lat = calloc(1, sizeof(*lat));
	if (!lat) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	t0 = t1;
	for (unsigned i = 0; i < o.threads; i++) {
		if (w[i].t_start && w[i].t_start < t0)
			t0 = w[i].t_start;
		done += w[i].done;
		errors += w[i].errors;
		mismatches += w[i].mismatches;
		if (w[i].fail) {
			if (failed++ == 0)
				fprintf(stderr, "gpured-benchmark: thread %u: %s\n", i, w[i].failmsg);
		}
		bench_latency_merge(lat, &w[i].lat);
		if (w[i].epfd >= 0)
			close(w[i].epfd);
	}
	for (unsigned i = 0; i < o.conns; i++) {
		if (cs[i].fail) {
			if (failed++ == 0)
				fprintf(stderr, "gpured-benchmark: connection %u: %s\n", i, cs[i].failmsg);
		}
		bench_conn_deinit(&cs[i]);
	}

	double secs = (double)(t1 - t0) / 1e9;
	double rps = secs > 0 ? (double)done / secs : 0;
	double bytes = (double)done * (double)d.nbytes;
	double gbps = secs > 0 ? bytes / secs / 1e9 : 0;
	double p50 = bench_latency_pct_us(lat, 50), p99 = bench_latency_pct_us(lat, 99);
	double p999 = bench_latency_pct_us(lat, 99.9), pmax = (double)lat->max_ns / 1e3;

	if (o.json) {
		printf("{\"op\":\"%s\",\"dtype\":\"%s\",\"elements\":%llu,\"connections\":%u,"
		       "\"threads\":%u,\"pipeline\":%u,\"requests\":%llu,\"errors\":%llu,"
		       "\"mismatches\":%llu,\"failed_connections\":%u,\"seconds\":%.6f,"
		       "\"requests_per_s\":%.1f,\"payload_gb_per_s\":%.4f,\"latency_us\":"
		       "{\"p50\":%.1f,\"p99\":%.1f,\"p99_9\":%.1f,\"max\":%.1f},"
		       "\"client_cpu_s\":%.3f}\n",
		       gr_op_name(o.op), gr_dtype_name(o.dtype), (unsigned long long)d.n,
		       o.conns, o.threads, o.depth, (unsigned long long)done,
		       (unsigned long long)errors, (unsigned long long)mismatches, failed, secs, rps,
		       gbps, p50, p99, p999, pmax, cpu);
	} else {
		printf("====== %s %s, %llu elements (%zu bytes) ======\n", gr_op_name(o.op),
		       gr_dtype_name(o.dtype), (unsigned long long)d.n, d.nbytes);
		printf("  %llu requests completed in %.3f seconds\n", (unsigned long long)done, secs);
		printf("  %u connections on %u thread%s, pipeline %u\n", o.conns, o.threads,
		       o.threads == 1 ? "" : "s", o.depth);
		printf("  errors: %llu (wrong results: %llu), failed connections: %u\n",
		       (unsigned long long)errors, (unsigned long long)mismatches, failed);
		printf("\n  throughput: %.1f requests per second, %.3f GB/s of payload\n", rps, gbps);
		printf("  latency (us): p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", p50, p99, p999, pmax);
		printf("  this client's CPU time: %.3f s (%.2f us per request)\n", cpu,
		       done ? cpu * 1e6 / (double)done : 0);
	}
	free(lat);
	free(cs);
	free(w);
	free(d.segs);
	if (d.memfd >= 0) {
		munmap(d.data, d.nbytes ? d.nbytes : 1);
		close(d.memfd);
	} else {
		free(d.data);
	}
	return errors || failed ? 1 : 0;

bad:
	fprintf(stderr, "gpured-benchmark: invalid value for option: '%s'\n", optarg);
	return 2;
}
