/*
 * gpured-benchmark: a load generator in the manner of redis-benchmark.
 *
 * Each of -c connections runs on its own thread and keeps up to -P reduce
 * requests in flight through libgpured's pipelined API, until -n requests
 * in all are done (or -t seconds have passed). Every request sends the
 * same array, filled so that its result is known exactly (small integers,
 * whose float sums are exact in any order), so every reply is checked; a
 * wrong value counts as an error. Latency is per request, from submit to
 * the reply's collection.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/gpured.h"

typedef struct bench_opts {
	const char *socket;
	unsigned conns;
	unsigned depth;
	uint64_t requests;
	uint64_t elements;
	gpured_dtype dtype;
	gpured_op op;
	double seconds; /* 0: no limit */
	bool json;
} bench_opts;

/* The array every request sends, and what every reply must say. */
typedef struct bench_data {
	void *data;
	size_t n;
	gpured_value expect;
	double tolerance; /* for floats: allowed |got - expect| */
} bench_data;

/*
 * Latencies in a log-linear histogram: 64 sub-buckets per power of two of
 * nanoseconds, so a percentile is within 1/64 (1.6%) of the true value and
 * a run of any length needs the same 32 KiB per connection.
 */
#define LAT_SUB_BITS 6
#define LAT_BUCKETS (64 << LAT_SUB_BITS)

typedef struct latency_hist {
	uint64_t count[LAT_BUCKETS];
	uint64_t n;
	uint64_t max_ns;
} latency_hist;

static unsigned lat_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < (1u << LAT_SUB_BITS))
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	/* The power of two, then the LAT_SUB_BITS bits below the top one. */
	return ((msb - LAT_SUB_BITS + 1) << LAT_SUB_BITS) |
	       (unsigned)((ns >> (msb - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1));
}

/* The middle of a bucket's range, in nanoseconds. */
static double lat_bucket_mid(unsigned b)
{
	unsigned e = b >> LAT_SUB_BITS, m = b & ((1u << LAT_SUB_BITS) - 1);

	if (e == 0)
		return m;
	/* Bucket (e, m) holds [(64 + m) << (e - 1), (65 + m) << (e - 1)). */
	return ((double)(64 + m) + 0.5) * (double)(1ull << (e - 1));
}

static void lat_add(latency_hist *h, uint64_t ns)
{
	h->count[lat_bucket(ns)]++;
	h->n++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

static double lat_pct_us(const latency_hist *h, double p)
{
	uint64_t rank, seen = 0;

	if (h->n == 0)
		return 0;
	rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < LAT_BUCKETS; b++) {
		seen += h->count[b];
		if (seen >= rank) {
			double mid = lat_bucket_mid(b);

			/* Never report more than the largest sample. */
			return (mid < (double)h->max_ns ? mid : (double)h->max_ns) / 1e3;
		}
	}
	return (double)h->max_ns / 1e3;
}

/* id -> submit time, open addressing with linear probing. */
typedef struct inflight_map {
	uint32_t *ids; /* 0: empty */
	uint64_t *t0;
	size_t mask;
} inflight_map;

typedef struct worker {
	pthread_t thread;
	const bench_opts *o;
	const bench_data *d;
	uint64_t quota;
	uint64_t done;
	uint64_t errors;
	uint64_t mismatches;
	latency_hist lat;
	uint64_t t_start;   /* when this connection started sending */
	int fail;           /* connection-level failure, 0 if none */
	char failmsg[256];
} worker;

static atomic_bool stop_flag;
static pthread_barrier_t start_barrier;
static uint64_t t_deadline_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int inflight_init(inflight_map *m, unsigned depth)
{
	size_t cap = 16;

	while (cap < 2 * (size_t)depth)
		cap *= 2;
	m->ids = calloc(cap, sizeof(*m->ids));
	m->t0 = calloc(cap, sizeof(*m->t0));
	m->mask = cap - 1;
	return m->ids && m->t0 ? 0 : -ENOMEM;
}

static void inflight_deinit(inflight_map *m)
{
	free(m->ids);
	free(m->t0);
}

static size_t inflight_slot(uint32_t id, size_t mask)
{
	return (size_t)(id * 2654435761u) & mask;
}

static void inflight_put(inflight_map *m, uint32_t id, uint64_t t0)
{
	size_t i = inflight_slot(id, m->mask);

	while (m->ids[i])
		i = (i + 1) & m->mask;
	m->ids[i] = id;
	m->t0[i] = t0;
}

/* Remove id and return its submit time (0 if unknown). */
static uint64_t inflight_take(inflight_map *m, uint32_t id)
{
	size_t i = inflight_slot(id, m->mask), j;
	uint64_t t0;

	while (m->ids[i] && m->ids[i] != id)
		i = (i + 1) & m->mask;
	if (!m->ids[i])
		return 0;
	t0 = m->t0[i];
	m->ids[i] = 0;
	/* Backward-shift deletion keeps every probe chain unbroken. */
	j = i;
	for (;;) {
		size_t k;

		j = (j + 1) & m->mask;
		if (!m->ids[j])
			break;
		k = inflight_slot(m->ids[j], m->mask);
		/* Move j to i unless its home k lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		m->ids[i] = m->ids[j];
		m->t0[i] = m->t0[j];
		m->ids[j] = 0;
		i = j;
	}
	return t0;
}

static bool value_ok(const bench_data *d, const gpured_value *v)
{
	if (v->count != d->n || v->kind != d->expect.kind)
		return false;
	switch (v->kind) {
	case GPURED_KIND_I64:
		return v->v.i == d->expect.v.i;
	case GPURED_KIND_U64:
		return v->v.u == d->expect.v.u;
	case GPURED_KIND_F64:
		return fabs(v->v.f - d->expect.v.f) <= d->tolerance;
	}
	return false;
}

static bool time_up(void)
{
	if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
		return true;
	if (t_deadline_ns && now_ns() >= t_deadline_ns) {
		atomic_store(&stop_flag, true);
		return true;
	}
	return false;
}

static void *worker_run(void *arg)
{
	worker *w = arg;
	const bench_opts *o = w->o;
	inflight_map m = { 0 };
	uint64_t submitted = 0;
	gpured_t *g = NULL;
	int r;

	r = gpured_connect(o->socket, &g);
	/* Start together, so the wall time covers all connections busy. */
	pthread_barrier_wait(&start_barrier);
	w->t_start = now_ns();
	if (r < 0) {
		w->fail = r;
		snprintf(w->failmsg, sizeof(w->failmsg), "connect: %s", gpured_strerror(r));
		return NULL;
	}
	if (inflight_init(&m, o->depth) < 0) {
		w->fail = -ENOMEM;
		snprintf(w->failmsg, sizeof(w->failmsg), "out of memory");
		goto out;
	}

	while (w->done + w->errors < submitted || (submitted < w->quota && !time_up())) {
		gpured_value v;
		uint32_t id;

		while (submitted < w->quota && gpured_outstanding(g) < o->depth && !time_up()) {
			uint64_t t0 = now_ns();

			r = gpured_submit(g, o->op, o->dtype, w->d->data, w->d->n, &id);
			if (r < 0)
				goto broken;
			inflight_put(&m, id, t0);
			submitted++;
		}
		if (gpured_outstanding(g) == 0)
			break;
		r = gpured_wait(g, &id, &v);
		if (r < 0 && id == 0)
			goto broken;
		uint64_t t0 = inflight_take(&m, id);
		if (t0)
			lat_add(&w->lat, now_ns() - t0);
		if (r < 0) {
			w->errors++;
		} else if (!value_ok(w->d, &v)) {
			w->errors++;
			w->mismatches++;
		} else {
			w->done++;
		}
	}
	goto out;

broken:
	w->fail = r;
	snprintf(w->failmsg, sizeof(w->failmsg), "%s", gpured_errmsg(g));
	/* What was submitted and not answered failed. */
	w->errors += submitted - w->done - w->errors;
out:
	inflight_deinit(&m);
	gpured_close(g);
	return NULL;
}

/* Small integers, one distinct minimum and maximum: exact results. */
static int bench_data_fill(const bench_opts *o, bench_data *d)
{
	size_t esz = gpured_dtype_size(o->dtype), n = o->elements;
	bool is_unsigned = o->dtype == GPURED_U32 || o->dtype == GPURED_U64;
	long double sum = 0, sumsq = 0, mn = INFINITY, mx = -INFINITY;
	uint8_t *p;

	p = malloc(n ? n * esz : 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int x = (int)((i * 7) % 3) - (is_unsigned ? 0 : 1);

		if (n > 2 && i == n / 3)
			x = is_unsigned ? 0 : -2;
		if (n > 2 && i == 2 * n / 3)
			x = 3;
		switch (o->dtype) {
		case GPURED_I32: { int32_t v = x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_I64: { int64_t v = x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U32: { uint32_t v = (uint32_t)x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U64: { uint64_t v = (uint64_t)x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F32: { float v = (float)x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F64: { double v = x; memcpy(p + i * esz, &v, esz); break; }
		}
		sum += x;
		sumsq += (long double)x * x;
		if (x < mn)
			mn = x;
		if (x > mx)
			mx = x;
	}
	d->data = p;
	d->n = n;
	d->expect.kind = gpured_result_kind(o->op, o->dtype);
	d->expect.count = n;
	long double e = o->op == GPURED_OP_SUM ? sum : o->op == GPURED_OP_SUMSQ ? sumsq :
			o->op == GPURED_OP_MIN ? mn : mx;
	if ((o->op == GPURED_OP_MIN || o->op == GPURED_OP_MAX) && n == 0)
		e = 0; /* the server answers "empty": counted as errors */
	switch (d->expect.kind) {
	case GPURED_KIND_I64:
		d->expect.v.i = (int64_t)e;
		break;
	case GPURED_KIND_U64:
		d->expect.v.u = (uint64_t)e;
		break;
	case GPURED_KIND_F64:
		d->expect.v.f = (double)e;
		break;
	}
	/* Partial sums of these values stay below 2^24 in magnitude when n
	 * does, so even float32 accumulation is exact; past that, allow the
	 * rounding of a float32 pairwise sum. */
	d->tolerance = n <= (1u << 24) ? 0 : 1e-6 * (double)(sumsq > 0 ? sumsq : 1);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: gpured-benchmark [OPTIONS]\n"
		"\n"
		"Load the gpured daemon with reduce requests and report throughput and latency.\n"
		"\n"
		"  -s, --socket PATH    Daemon socket (default: $GPURED_SOCKET, else the daemon's default)\n"
		"  -c N                 Connections, one thread each (default 8)\n"
		"  -P N                 Requests in flight per connection (default 1)\n"
		"  -n N                 Total requests (default 100000; 0 with -t: no limit)\n"
		"  -d N                 Elements per request (default 256)\n"
		"      --dtype T        i32 i64 u32 u64 f32 f64 (default f32)\n"
		"      --op OP          sum min max sumsq (default sum)\n"
		"  -t SECONDS           Stop after this long, even if fewer than -n are done\n"
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
	enum { OPT_DTYPE = 256, OPT_OP, OPT_JSON };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "op", required_argument, NULL, OPT_OP },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bench_opts o = {
		.conns = 8, .depth = 1, .requests = 100000, .elements = 256,
		.dtype = GPURED_F32, .op = GPURED_OP_SUM,
	};
	bench_data d = { 0 };
	uint64_t v, done = 0, errors = 0, mismatches = 0, t0, t1;
	latency_hist *lat;
	worker *w;
	unsigned failed = 0;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "s:c:P:n:d:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'c':
			if (!parse_u64(optarg, &v) || v == 0 || v > 10000)
				goto bad;
			o.conns = (unsigned)v;
			break;
		case 'P':
			if (!parse_u64(optarg, &v) || v == 0 || v > GPURED_MAX_OUTSTANDING)
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
			if (gpured_dtype_parse(optarg, &o.dtype) < 0)
				goto bad;
			break;
		case OPT_OP:
			if (gpured_op_parse(optarg, &o.op) < 0)
				goto bad;
			break;
		case OPT_JSON:
			o.json = true;
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
	if (o.elements > UINT32_MAX || o.elements * gpured_dtype_size(o.dtype) > UINT32_MAX) {
		fprintf(stderr, "gpured-benchmark: -d %llu: a request holds less than 4 GiB\n",
			(unsigned long long)o.elements);
		return 2;
	}

	if (bench_data_fill(&o, &d) < 0) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	w = calloc(o.conns, sizeof(*w));
	if (!w) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	if (o.seconds > 0)
		t_deadline_ns = now_ns() + (uint64_t)(o.seconds * 1e9);
	if (pthread_barrier_init(&start_barrier, NULL, o.conns) != 0) {
		fprintf(stderr, "gpured-benchmark: cannot create a barrier\n");
		return 1;
	}
	for (unsigned i = 0; i < o.conns; i++) {
		w[i].o = &o;
		w[i].d = &d;
		if (o.requests == 0 && o.seconds > 0)
			w[i].quota = UINT64_MAX;
		else
			w[i].quota = o.requests / o.conns + (i < o.requests % o.conns);
		if (pthread_create(&w[i].thread, NULL, worker_run, &w[i]) != 0) {
			fprintf(stderr, "gpured-benchmark: cannot start thread\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < o.conns; i++)
		pthread_join(w[i].thread, NULL);
	t1 = now_ns();
	pthread_barrier_destroy(&start_barrier);

	t0 = t1;
	for (unsigned i = 0; i < o.conns; i++) {
		if (w[i].t_start && w[i].t_start < t0)
			t0 = w[i].t_start;
		done += w[i].done;
		errors += w[i].errors;
		mismatches += w[i].mismatches;
		if (w[i].fail) {
			if (failed++ == 0)
				fprintf(stderr, "gpured-benchmark: connection %u: %s\n", i, w[i].failmsg);
		}
	}
	lat = calloc(1, sizeof(*lat));
	if (!lat) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < o.conns; i++) {
		for (unsigned b = 0; b < LAT_BUCKETS; b++)
			lat->count[b] += w[i].lat.count[b];
		lat->n += w[i].lat.n;
		if (w[i].lat.max_ns > lat->max_ns)
			lat->max_ns = w[i].lat.max_ns;
	}

	double secs = (double)(t1 - t0) / 1e9;
	double rps = secs > 0 ? (double)done / secs : 0;
	double bytes = (double)done * (double)d.n * (double)gpured_dtype_size(o.dtype);
	double gbps = secs > 0 ? bytes / secs / 1e9 : 0;
	double p50 = lat_pct_us(lat, 50), p99 = lat_pct_us(lat, 99);
	double p999 = lat_pct_us(lat, 99.9), pmax = (double)lat->max_ns / 1e3;

	if (o.json) {
		printf("{\"op\":\"%s\",\"dtype\":\"%s\",\"elements\":%llu,\"connections\":%u,"
		       "\"pipeline\":%u,\"requests\":%llu,\"errors\":%llu,\"mismatches\":%llu,"
		       "\"failed_connections\":%u,\"seconds\":%.6f,\"requests_per_s\":%.1f,"
		       "\"payload_gb_per_s\":%.4f,\"latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
		       "\"p99_9\":%.1f,\"max\":%.1f}}\n",
		       gpured_op_name(o.op), gpured_dtype_name(o.dtype), (unsigned long long)d.n,
		       o.conns, o.depth, (unsigned long long)done, (unsigned long long)errors,
		       (unsigned long long)mismatches, failed, secs, rps, gbps, p50, p99, p999, pmax);
	} else {
		printf("====== %s %s, %llu elements (%.0f bytes) ======\n", gpured_op_name(o.op),
		       gpured_dtype_name(o.dtype), (unsigned long long)d.n,
		       (double)d.n * (double)gpured_dtype_size(o.dtype));
		printf("  %llu requests completed in %.3f seconds\n", (unsigned long long)done, secs);
		printf("  %u connections, pipeline %u\n", o.conns, o.depth);
		printf("  errors: %llu (wrong results: %llu), failed connections: %u\n",
		       (unsigned long long)errors, (unsigned long long)mismatches, failed);
		printf("\n  throughput: %.1f requests per second, %.3f GB/s of payload\n", rps, gbps);
		printf("  latency (us): p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", p50, p99, p999, pmax);
	}
	free(lat);
	free(w);
	free(d.data);
	return errors || failed ? 1 : 0;

bad:
	fprintf(stderr, "gpured-benchmark: invalid value for option: '%s'\n", optarg);
	return 2;
}
