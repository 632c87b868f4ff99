/*
 * The real daemon, driven the way a user drives it: started on a temporary
 * socket with the CPU backend, then used through libgpured and gpuredctl.
 *
 *   test-client-daemon SCENARIO GPURED GPUREDCTL
 *
 * Scenarios: reduce (every op x dtype x size against a reference computed
 * here), chunks (sizes around the chunk and staging boundaries of a daemon
 * with small ones), pipeline (hundreds in flight, collected out of order),
 * regions (shared-memory regions through the library), connections
 * (many clients at once), ctl (gpuredctl), segments (segmented reduces
 * through the library and gpuredctl, against each segment reduced alone),
 * sigterm (a request in flight is answered, then the daemon exits 0 and
 * removes its socket).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/check.h"
#include "client/gpured.h"

/* The backend under test: the CPU unless $GPURED_TEST_BACKEND says
 * otherwise (the GPU host runs these tests with "cuda"). */
static const char *test_backend(void)
{
	const char *b = getenv("GPURED_TEST_BACKEND");
	return b && *b ? b : "cpu";
}

static const char *gpured_path;
static const char *gpuredctl_path;

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
static const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

/* ---- the daemon ------------------------------------------------------ */

typedef struct daemon_proc {
	pid_t pid;
	char dir[64];
	char sock[96];
	char log[96];
} daemon_proc;

static daemon_proc the_daemon;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static char *slurp(const char *path, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(buf);
	if (fd >= 0) {
		for (;;) {
			ssize_t k;

			if (len == cap) {
				cap *= 2;
				buf = realloc(buf, cap + 1);
				CHECK(buf);
			}
			k = read(fd, buf + len, cap - len);
			if (k <= 0)
				break;
			len += (size_t)k;
		}
		close(fd);
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	return buf;
}

static void daemon_dump_log(const daemon_proc *d)
{
	char *log = slurp(d->log, NULL);

	fprintf(stderr, "--- daemon stderr ---\n%s--- end ---\n", log);
	free(log);
}

/* Start gpured on a fresh socket with extra arguments; wait until it
 * accepts connections. */
static void daemon_start(daemon_proc *d, const char *const *extra)
{
	const char *argv[24];
	int n = 0;
	uint64_t deadline;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "%s/gpured-test-XXXXXX", tmp_base());
	CHECK(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/gpured.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/stderr.log", d->dir);

	argv[n++] = gpured_path;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--backend";
	argv[n++] = test_backend();
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	d->pid = fork();
	CHECK(d->pid >= 0);
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(127);
		/* Not started by systemd, whatever the test runner's
		 * environment says. */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("WATCHDOG_USEC");
		execv(gpured_path, (char *const *)argv);
		_exit(127);
	}

	deadline = now_ms() + 10000;
	for (;;) {
		gpured_t *g = NULL;
		int status;

		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon exited before accepting (status %d)", status);
		}
		if (access(d->sock, F_OK) == 0 && gpured_connect(d->sock, &g) == 0) {
			gpured_close(g);
			break;
		}
		if (now_ms() > deadline) {
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon did not accept on %s within 10 s", d->sock);
		}
		usleep(10000);
	}
	char *log = slurp(d->log, NULL);
	if (!strstr(log, "listening on")) {
		fprintf(stderr, "--- daemon stderr ---\n%s--- end ---\n", log);
		CHECK_MSG(false, "daemon accepts but did not say \"listening on\"");
	}
	free(log);
}

/* SIGTERM and wait up to 10 s; returns the wait status. */
static int daemon_stop(daemon_proc *d)
{
	uint64_t deadline = now_ms() + 10000;
	int status = 0;

	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGTERM);
	for (;;) {
		pid_t p = waitpid(d->pid, &status, WNOHANG);

		if (p == d->pid)
			break;
		if (now_ms() > deadline) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon did not exit within 10 s of SIGTERM");
		}
		usleep(5000);
	}
	d->pid = 0;
	return status;
}

static void daemon_cleanup(daemon_proc *d)
{
	char p[128];

	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
	unlink(d->sock);
	unlink(d->log);
	snprintf(p, sizeof(p), "%s/input", d->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/out", d->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/err", d->dir);
	unlink(p);
	rmdir(d->dir);
}

/* A failing check exits; take the daemon down with the test. */
static void at_exit_cleanup(void)
{
	daemon_cleanup(&the_daemon);
}

static gpured_t *connect_or_die(const daemon_proc *d)
{
	gpured_t *g = NULL;
	int r = gpured_connect(d->sock, &g);

	CHECK_MSG(r == 0, "connect %s: %s", d->sock, gpured_strerror(r));
	return g;
}

/* ---- data and references ---------------------------------------------- */

typedef struct rng {
	uint64_t s;
} rng;

static uint64_t rng_next(rng *r)
{
	/* xorshift64* */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ull;
}

static void *random_array(rng *r, gpured_dtype dt, size_t n)
{
	size_t esz = gpured_dtype_size(dt);
	uint8_t *p = malloc(n ? n * esz : 1);

	CHECK(p);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(r);

		switch (dt) {
		case GPURED_I32: { int32_t v = (int32_t)(uint32_t)x; memcpy(p + i * esz, &v, esz); break; }
		/* 64-bit values kept below 2^40 so that sums of millions
		 * cannot overflow and the reference stays exact. */
		case GPURED_I64: { int64_t v = (int64_t)(x >> 23) - ((int64_t)1 << 40); memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U32: { uint32_t v = (uint32_t)x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U64: { uint64_t v = x >> 24; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F32: { float v = (float)((double)(int64_t)(x >> 11) / (double)(1ull << 52) - 1.0) * 1000.0f; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F64: { double v = ((double)(x >> 11) / (double)(1ull << 52) - 1.0) * 1e3; memcpy(p + i * esz, &v, esz); break; }
		}
	}
	return p;
}

typedef struct expect {
	int err; /* 0 or the error the daemon must answer */
	gpured_value v;
	double tol; /* allowed |got - want| for float results */
} expect;

static long double element(gpured_dtype dt, const void *data, size_t i)
{
	const uint8_t *p = data;

	switch (dt) {
	case GPURED_I32: { int32_t v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_I64: { int64_t v; memcpy(&v, p + i * 8, 8); return (long double)v; }
	case GPURED_U32: { uint32_t v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_U64: { uint64_t v; memcpy(&v, p + i * 8, 8); return (long double)v; }
	case GPURED_F32: { float v; memcpy(&v, p + i * 4, 4); return v; }
	case GPURED_F64: { double v; memcpy(&v, p + i * 8, 8); return v; }
	}
	return 0;
}

static expect reference(gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	expect e = { .v.kind = gpured_result_kind(op, dt), .v.count = n };
	bool is_float = dt == GPURED_F32 || dt == GPURED_F64;
	long double sum = 0, sumabs = 0, sumsq = 0, mn = 0, mx = 0;
	int64_t isum = 0, imn = INT64_MAX, imx = INT64_MIN;
	uint64_t usum = 0, umn = UINT64_MAX, umx = 0;
	size_t imin = 0, imax = 0; /* first indexes of mn and mx */

	for (size_t i = 0; i < n; i++) {
		long double x = element(dt, data, i);

		sum += x;
		sumabs += fabsl(x);
		sumsq += x * x;
		if (i == 0 || x < mn) {
			mn = x;
			imin = i;
		}
		if (i == 0 || x > mx) {
			mx = x;
			imax = i;
		}
		if (dt == GPURED_I32 || dt == GPURED_I64) {
			int64_t v = (int64_t)x;

			isum += v;
			imn = v < imn ? v : imn;
			imx = v > imx ? v : imx;
		} else if (dt == GPURED_U32 || dt == GPURED_U64) {
			uint64_t v = (uint64_t)x;

			usum += v;
			umn = v < umn ? v : umn;
			umx = v > umx ? v : umx;
		}
	}
	if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX) {
		e.v.index = op == GPURED_OP_ARGMIN ? imin : imax;
		op = op == GPURED_OP_ARGMIN ? GPURED_OP_MIN : GPURED_OP_MAX;
	}
	/* gpured_reduce() gives moments' sum; it has none of no elements */
	if (op == GPURED_OP_MOMENTS)
		op = n == 0 ? GPURED_OP_MIN : GPURED_OP_SUM;
	if ((op == GPURED_OP_MIN || op == GPURED_OP_MAX) && n == 0) {
		e.err = -ENODATA;
		return e;
	}
	switch (op) {
	case GPURED_OP_SUM:
		if (is_float) {
			e.v.v.f = (double)sum;
			/* Float32 pairwise rounding at worst; a double sum is
			 * far closer. */
			e.tol = (dt == GPURED_F32 ? 1e-6 : 1e-10) * (double)sumabs + 1e-300;
		} else if (e.v.kind == GPURED_KIND_I64) {
			e.v.v.i = isum;
		} else {
			e.v.v.u = usum;
		}
		break;
	case GPURED_OP_SUMSQ:
		e.v.v.f = (double)sumsq;
		e.tol = (dt == GPURED_F32 ? 1e-6 : 1e-10) * (double)sumsq + 1e-300;
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
		if (is_float)
			e.v.v.f = (double)(op == GPURED_OP_MIN ? mn : mx);
		else if (e.v.kind == GPURED_KIND_I64)
			e.v.v.i = op == GPURED_OP_MIN ? imn : imx;
		else
			e.v.v.u = op == GPURED_OP_MIN ? umn : umx;
		break;
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX:
	case GPURED_OP_MOMENTS:
		break; /* made min, max and sum above */
	}
	return e;
}

static void check_result(const char *what, const expect *e, int r, const gpured_value *v,
			 gpured_t *g)
{
	if (e->err) {
		CHECK_MSG(r == e->err, "%s: got %d (%s), want %d", what, r, gpured_errmsg(g), e->err);
		return;
	}
	CHECK_MSG(r == 0, "%s: error %d: %s", what, r, gpured_errmsg(g));
	CHECK_MSG(v->kind == e->v.kind, "%s: kind %d, want %d", what, v->kind, e->v.kind);
	CHECK_MSG(v->count == e->v.count, "%s: count %llu, want %llu", what,
		  (unsigned long long)v->count, (unsigned long long)e->v.count);
	CHECK_MSG(v->index == e->v.index, "%s: index %llu, want %llu", what,
		  (unsigned long long)v->index, (unsigned long long)e->v.index);
	switch (v->kind) {
	case GPURED_KIND_I64:
		CHECK_MSG(v->v.i == e->v.v.i, "%s: %lld, want %lld", what, (long long)v->v.i,
			  (long long)e->v.v.i);
		break;
	case GPURED_KIND_U64:
		CHECK_MSG(v->v.u == e->v.v.u, "%s: %llu, want %llu", what,
			  (unsigned long long)v->v.u, (unsigned long long)e->v.v.u);
		break;
	case GPURED_KIND_F64:
		CHECK_MSG(fabs(v->v.f - e->v.v.f) <= e->tol, "%s: %.17g, want %.17g (tolerance %g)",
			  what, v->v.f, e->v.v.f, e->tol);
		break;
	}
}

static void reduce_and_check(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	expect e = reference(op, dt, data, n);
	gpured_value v;
	char what[96];
	int r;

	snprintf(what, sizeof(what), "%s %s n=%zu", gpured_op_name(op), gpured_dtype_name(dt), n);
	r = gpured_reduce(g, op, dt, data, n, &v);
	check_result(what, &e, r, &v, g);
	if (e.err == -ENODATA)
		CHECK_MSG(gpured_errcode(g) && strcmp(gpured_errcode(g), "empty") == 0, "%s: code %s",
			  what, gpured_errcode(g) ? gpured_errcode(g) : "(none)");
}

/* ---- scenarios ------------------------------------------------------- */

static void test_reduce(void)
{
	static const size_t sizes[] = { 0, 1, 2, 31, 32, 33, 1000, 65537, 1000003 };
	rng r = { 0x9e3779b97f4a7c15ull };
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_ping(g), 0);
	for (int dt = 0; dt < 6; dt++) {
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);

			for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
				reduce_and_check(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
			free(data);
		}
	}

	/* The shorthands. */
	float xf[4] = { 1.5f, -2.0f, 4.25f, 0.25f };
	int64_t xi[3] = { INT64_MAX, -1, -5 };
	double d;
	int64_t i;
	CHECK_EQ(gpured_sum_f32(g, xf, 4, &d), 0);
	CHECK(d == 4.0);
	CHECK_EQ(gpured_sum_i64(g, xi, 3, &i), 0);
	CHECK(i == INT64_MAX - 6);
	/* Extremes of every integer type, min and max exact. */
	int32_t e32[3] = { INT32_MIN, 0, INT32_MAX };
	uint64_t e64[3] = { 0, UINT64_MAX, 1 };
	gpured_value v;
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MIN, GPURED_I32, e32, 3, &v), 0);
	CHECK(v.kind == GPURED_KIND_I64 && v.v.i == INT32_MIN);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_SUM, GPURED_I32, e32, 3, &v), 0);
	CHECK(v.v.i == -1);
	CHECK_EQ(gpured_reduce(g, GPURED_OP_MAX, GPURED_U64, e64, 3, &v), 0);
	CHECK(v.kind == GPURED_KIND_U64 && v.v.u == UINT64_MAX);

	/* The server's counters moved. */
	gpured_stats_t st;
	CHECK_EQ(gpured_stats(g, &st), 0);
	CHECK_MSG(st.requests >= 6 * 9 * 4, "stats requests %llu", (unsigned long long)st.requests);
	CHECK(st.connections >= 1);
	/* min and max of nothing, for every dtype, were errors. */
	CHECK_MSG(st.errors >= 12, "stats errors %llu", (unsigned long long)st.errors);
	CHECK(st.elements >= 1000003);
	CHECK(st.devices >= 1 && st.devices_healthy == st.devices);
	CHECK_MSG(strstr(st.backend, test_backend()), "backend '%s'", st.backend);
	char *s = NULL;
	CHECK_EQ(gpured_info_json(g, &s), 0);
	CHECK_MSG(strstr(s, "\"version\"") && strstr(s, "\"devices\"") && strstr(s, "\"limits\""), "%s", s);
	free(s);

	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_chunks(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", "--staging-bytes", "2097152", NULL };
	rng r = { 12345 };
	gpured_t *g;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);
		size_t chunk = 262144 / esz, staging = 2097152 / esz;
		size_t sizes[] = {
			chunk - 1, chunk, chunk + 1, 2 * chunk + 1,
			staging - 1, staging, staging + 1, 3 * staging + 5,
		};

		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);

			for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
				reduce_and_check(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
			free(data);
		}
	}

	/* Several requests larger than staging in flight at once. */
	enum { N = 6 };
	size_t n = 3 * 2097152 / 8 + 7;
	void *data[N];
	expect want[N];
	uint32_t ids[N];
	for (int i = 0; i < N; i++) {
		data[i] = random_array(&r, GPURED_F64, n);
		want[i] = reference(GPURED_OP_SUM, GPURED_F64, data[i], n);
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_F64, data[i], n, &ids[i]), 0);
	}
	for (int i = N - 1; i >= 0; i--) {
		gpured_value v;
		int rc = gpured_wait_id(g, ids[i], &v);

		check_result("big in flight", &want[i], rc, &v, g);
		free(data[i]);
	}
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* moments of the same elements in place (region rg at off) and over the
 * socket: every field the same bits; sum, min and max those of the ops. */
static void check_moments(gpured_t *g, gpured_region_t *rg, gpured_dtype dt, const void *data,
			  size_t n, size_t off, const char *what)
{
	gpured_moments a, b;
	gpured_value v;
	uint64_t ddof = n > 1 ? 1 : 0;

	CHECK_MSG(gpured_region_reduce_moments(g, rg, dt, off, n, ddof, &a) == 0, "%s: %s", what,
		  gpured_errmsg(g));
	CHECK_MSG(gpured_reduce_moments(g, dt, data, n, ddof, &b) == 0, "%s: %s", what,
		  gpured_errmsg(g));
	CHECK_MSG(memcmp(&a.mean, &b.mean, sizeof(double)) == 0 &&
		  memcmp(&a.var, &b.var, sizeof(double)) == 0 && a.count == n && b.count == n,
		  "%s: moments in place and over the socket differ", what);
	const struct {
		gpured_op op;
		const gpured_value *got;
	} ops[] = { { GPURED_OP_SUM, &a.sum }, { GPURED_OP_MIN, &a.min }, { GPURED_OP_MAX, &a.max } };
	for (size_t i = 0; i < 3; i++) {
		CHECK_EQ(gpured_reduce(g, ops[i].op, dt, data, n, &v), 0);
		CHECK_MSG(v.kind == ops[i].got->kind && memcmp(&v.v, &ops[i].got->v, sizeof(v.v)) == 0 &&
			  ops[i].got->count == n,
			  "%s: moments' %s differs from the op's", what, gpured_op_name(ops[i].op));
	}
	/* the mean, by hand, as a sanity check of the field order */
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += dt == GPURED_F64 ? ((const double *)data)[i] : dt == GPURED_F32 ? ((const float *)data)[i]
		     : dt == GPURED_I32 ? ((const int32_t *)data)[i] : dt == GPURED_U32 ? ((const uint32_t *)data)[i]
		     : dt == GPURED_I64 ? (double)((const int64_t *)data)[i] : (double)((const uint64_t *)data)[i];
	CHECK_MSG(!isfinite(sum) || fabs(a.mean - sum / (double)n) <= 1e-6 * fabs(sum / (double)n) + 1e-300 ||
		  !(a.mean == a.mean), "%s: mean %g, about %g", what, a.mean, sum / (double)n);
}

/* Shared-memory regions through the library: every op and dtype at odd
 * sizes and offsets, equal bit for bit to the same elements sent as data;
 * pipelined; the errors; and many regions made and freed. */
static void test_regions(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", "--staging-bytes", "2097152", NULL };
	static const size_t sizes[] = { 1, 33, 65537, 300001 };
	rng r = { 4242 };
	gpured_t *g;
	gpured_region_t *rg;
	gpured_value a, b;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_region_new(g, 8 * 300001 + 64, &rg), 0);
	CHECK(gpured_region_size(rg) == 8 * 300001 + 64);
	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);
		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			void *data = random_array(&r, (gpured_dtype)dt, sizes[k]);
			size_t off = (k * 7 + (size_t)dt) % 17;
			memcpy((char *)gpured_region_data(rg) + off, data, sizes[k] * esz);
			for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
				expect e = reference((gpured_op)op, (gpured_dtype)dt, data, sizes[k]);
				char what[96];
				snprintf(what, sizeof(what), "region %s %s n=%zu @%zu", gpured_op_name(op),
					 gpured_dtype_name(dt), sizes[k], off);
				int ra = gpured_region_reduce(g, rg, (gpured_op)op, (gpured_dtype)dt, off,
							      sizes[k], &a);
				check_result(what, &e, ra, &a, g);
				CHECK_EQ(gpured_reduce(g, (gpured_op)op, (gpured_dtype)dt, data, sizes[k], &b), 0);
				CHECK_MSG(memcmp(&a.v, &b.v, sizeof(a.v)) == 0 && a.count == b.count &&
					  a.index == b.index,
					  "%s: in place and over the socket differ", what);
			}
			char what[96];
			snprintf(what, sizeof(what), "moments %s n=%zu @%zu", gpured_dtype_name(dt),
				 sizes[k], off);
			check_moments(g, rg, (gpured_dtype)dt, data, sizes[k], off, what);
			free(data);
		}
	}

	/* Pipelined, collected out of order. */
	int32_t *x = gpured_region_data(rg);
	for (int i = 0; i < 1000; i++)
		x[i] = i;
	uint32_t ids[100];
	for (int i = 0; i < 100; i++)
		CHECK_EQ(gpured_region_submit(g, rg, GPURED_OP_SUM, GPURED_I32, 4 * (size_t)i, 10, &ids[i]), 0);
	for (int i = 99; i >= 0; i--) {
		CHECK_EQ(gpured_wait_id(g, ids[i], &a), 0);
		CHECK_MSG(a.v.i == 10 * i + 45, "pipelined %d: %lld", i, (long long)a.v.i);
	}

	/* moments pipelined: [i, i + 10) has mean i + 4.5, variance 55/6 (ddof 1) */
	for (int i = 0; i < 100; i++)
		CHECK_EQ(gpured_submit_region_moments(g, gpured_region_id(rg), GPURED_I32, 4 * (size_t)i,
						      10, 1, &ids[i]), 0);
	CHECK_EQ(gpured_wait_id_moments(g, 12345, NULL), -ESRCH);
	for (int i = 99; i >= 0; i--) {
		gpured_moments m;
		CHECK_EQ(gpured_wait_id_moments(g, ids[i], &m), 0);
		CHECK_MSG(m.mean == i + 4.5 && m.var == 55.0 / 6.0 && m.sum.v.i == 10 * i + 45 &&
			  m.min.v.i == i && m.max.v.i == i + 9 && m.count == 10,
			  "moments pipelined %d: %g %g", i, m.mean, m.var);
	}
	CHECK_EQ(gpured_region_reduce_moments(g, rg, GPURED_I32, 0, 10, 10, NULL), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "ddof"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_reduce_moments(g, rg, GPURED_I32, 0, 0, 0, NULL), -ENODATA);
	CHECK_EQ(gpured_reduce_moments(g, GPURED_I32, x, 0, 0, NULL), -ENODATA);
	CHECK_EQ(gpured_reduce_moments(g, GPURED_I32, x, 3, 3, NULL), -EINVAL);

	/* Errors leave the connection usable. */
	CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_SUM, GPURED_F64, 8, 300009, &a), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "past the end"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_region(g, gpured_region_id(rg) + 99, GPURED_OP_SUM, GPURED_I32, 0, 1, &a), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "unknown region"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_MIN, GPURED_I32, 0, 0, &a), -ENODATA);
	int pipefd[2];
	CHECK_EQ(pipe(pipefd), 0);
	uint64_t id;
	CHECK_EQ(gpured_map_fd(g, pipefd[0], 4096, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "a pipe"), "%s", gpured_errmsg(g));
	close(pipefd[0]);
	close(pipefd[1]);
	CHECK_EQ(gpured_ping(g), 0);

	/* A snapshot for monitors: the region, the devices, the histogram;
	 * what two of them differ by is what happened between them. */
	static gpured_snapshot_t s1, s2;
	CHECK_EQ(gpured_snapshot(g, &s1), 0);
	CHECK_EQ(s1.regions, 1);
	CHECK_EQ(s1.mapped_bytes, 8 * 300001 + 64);
	CHECK(s1.version[0] && s1.uptime_s > 0 && s1.requests > 0 && s1.errors >= 4);
	CHECK(s1.bytes_socket > 0 && s1.bytes_shm > 0 && s1.bytes_device == 0);
	CHECK(s1.ndevices >= 1 && strcmp(s1.devices[0].kind, "cpu") == 0 && s1.devices[0].healthy);
	CHECK(s1.devices[0].name[0] && s1.devices[0].jobs > 0 && s1.devices[0].regions == 0);
	CHECK(s1.nbuckets > 1 && s1.count > 0 && s1.sum_us > 0);
	for (unsigned i = 1; i < s1.nbuckets; i++)
		CHECK(s1.le_us[i] > s1.le_us[i - 1] && s1.counts[i] >= s1.counts[i - 1]);
	CHECK(s1.counts[s1.nbuckets - 1] <= s1.count);
	for (int i = 0; i < 10; i++)
		CHECK_EQ(gpured_region_reduce(g, rg, GPURED_OP_SUM, GPURED_I32, 0, 1000, &a), 0);
	CHECK_EQ(gpured_snapshot(g, &s2), 0);
	/* ten reductions, and the snapshot's own two requests */
	CHECK_EQ(s2.count - s1.count, 10);
	CHECK_EQ(s2.requests - s1.requests, 10 + 2);
	CHECK_EQ(s2.bytes_shm - s1.bytes_shm, 10 * 4000);
	CHECK_EQ(s2.devices[0].jobs - s1.devices[0].jobs, 10);
	CHECK(s2.uptime_s > s1.uptime_s);

	CHECK_EQ(gpured_region_free(g, rg), 0);
	CHECK_EQ(gpured_snapshot(g, &s2), 0);
	CHECK_EQ(s2.regions, 0);
	CHECK_EQ(s2.mapped_bytes, 0);
	CHECK_EQ(gpured_unmap(g, id + 1000), -EINVAL);

	/* Made and freed many times over, on one connection and on many. */
	for (int round = 0; round < 5; round++) {
		gpured_t *h = connect_or_die(&the_daemon);
		for (int i = 0; i < 20; i++) {
			CHECK_EQ(gpured_region_new(h, 4096, &rg), 0);
			memset(gpured_region_data(rg), 1, 4096);
			CHECK_EQ(gpured_region_reduce(h, rg, GPURED_OP_SUM, GPURED_U32, 0, 1024, &a), 0);
			CHECK(a.v.u == 1024ull * 0x01010101u);
			CHECK_EQ(gpured_region_free(h, rg), 0);
		}
		gpured_close(h);
	}
	gpured_stats_t st;
	CHECK_EQ(gpured_stats(g, &st), 0);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

typedef struct job {
	uint32_t id;
	expect want;
	bool collected;
} job;

static void test_pipeline(void)
{
	enum { N = 600 };
	rng r = { 777 };
	job *jobs = calloc(N, sizeof(*jobs));
	gpured_t *g;
	void *scratch;

	CHECK(jobs);
	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);

	/* The data buffer is reused at once: submit returns only when the
	 * request is written. */
	for (int i = 0; i < N; i++) {
		gpured_op op = (gpured_op)(rng_next(&r) % 4);
		gpured_dtype dt = (gpured_dtype)(rng_next(&r) % 6);
		size_t n = (size_t)(rng_next(&r) % 5000);

		if (i % 50 == 0)
			n = 200000 + (size_t)(rng_next(&r) % 1000);
		scratch = random_array(&r, dt, n);
		jobs[i].want = reference(op, dt, scratch, n);
		CHECK_EQ(gpured_submit(g, op, dt, scratch, n, &jobs[i].id), 0);
		memset(scratch, 0xa5, n * gpured_dtype_size(dt));
		free(scratch);
	}
	CHECK_EQ(gpured_outstanding(g), N);

	/* A third by id, newest first. */
	for (int i = N / 3 - 1; i >= 0; i--) {
		gpured_value v;
		int rc = gpured_wait_id(g, jobs[i].id, &v);

		check_result("pipelined by id", &jobs[i].want, rc, &v, g);
		jobs[i].collected = true;
	}
	/* The rest in whatever order they complete. */
	for (int k = N / 3; k < N; k++) {
		gpured_value v;
		uint32_t id;
		int rc = gpured_wait(g, &id, &v), i;

		CHECK_MSG(id != 0, "connection failed: %s", gpured_errmsg(g));
		for (i = 0; i < N && jobs[i].id != id; i++)
			;
		CHECK_MSG(i < N && !jobs[i].collected, "unexpected id %u", id);
		check_result("pipelined any order", &jobs[i].want, rc, &v, g);
		jobs[i].collected = true;
	}
	uint32_t id;
	gpured_value v;
	CHECK_EQ(gpured_wait(g, &id, &v), -ECHILD);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	free(jobs);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

enum { CONN_THREADS = 50, CONN_REQUESTS = 20 };

static void *conn_thread(void *arg)
{
	rng r = { (uint64_t)(uintptr_t)arg * 7919 + 1 };
	gpured_t *g = connect_or_die(&the_daemon);
	uint32_t ids[4];
	expect want[4];

	/* Four in flight per connection, verified. */
	for (int k = 0; k < CONN_REQUESTS; k += 4) {
		for (int j = 0; j < 4; j++) {
			gpured_op op = (gpured_op)(rng_next(&r) % 4);
			gpured_dtype dt = (gpured_dtype)(rng_next(&r) % 6);
			size_t n = 1 + (size_t)(rng_next(&r) % 20000);
			void *data = random_array(&r, dt, n);

			want[j] = reference(op, dt, data, n);
			CHECK_EQ(gpured_submit(g, op, dt, data, n, &ids[j]), 0);
			free(data);
		}
		for (int j = 0; j < 4; j++) {
			gpured_value v;
			int rc = gpured_wait_id(g, ids[j], &v);

			check_result("many connections", &want[j], rc, &v, g);
		}
	}
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	return NULL;
}

static void test_connections(void)
{
	pthread_t t[CONN_THREADS];
	gpured_stats_t st;
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	for (uintptr_t i = 0; i < CONN_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, conn_thread, (void *)i) == 0);
	for (int i = 0; i < CONN_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);

	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_stats(g, &st), 0);
	CHECK_MSG(st.connections_total >= CONN_THREADS + 1, "connections_total %llu",
		  (unsigned long long)st.connections_total);
	CHECK_MSG(st.requests >= CONN_THREADS * CONN_REQUESTS, "requests %llu",
		  (unsigned long long)st.requests);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* Run gpuredctl with args, stdin from in[0..in_len); returns the exit
 * status and the output (freed by the caller). */
static int run_ctl(const char *const *args, const void *in, size_t in_len, const char *env_socket,
		   char **ret_out, char **ret_err)
{
	char inpath[128], outpath[128], errpath[128];
	const char *argv[16];
	int n = 0, status, fd;
	pid_t pid;

	snprintf(inpath, sizeof(inpath), "%s/input", the_daemon.dir);
	snprintf(outpath, sizeof(outpath), "%s/out", the_daemon.dir);
	snprintf(errpath, sizeof(errpath), "%s/err", the_daemon.dir);
	fd = open(inpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, in, in_len) == (ssize_t)in_len);
	close(fd);

	argv[n++] = gpuredctl_path;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int i0 = open(inpath, O_RDONLY), o = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (i0 < 0 || o < 0 || e < 0 || dup2(i0, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		if (env_socket)
			setenv("GPURED_SOCKET", env_socket, 1);
		else
			unsetenv("GPURED_SOCKET");
		execv(gpuredctl_path, (char *const *)argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status), "gpuredctl died (status %d)", status);
	*ret_out = slurp(outpath, NULL);
	*ret_err = slurp(errpath, NULL);
	return WEXITSTATUS(status);
}

#define CTL(in, envsock, ...)                                                          \
	({                                                                             \
		static const char *const a_[] = { __VA_ARGS__, NULL };                 \
		free(out);                                                             \
		free(err);                                                             \
		run_ctl(a_, in, strlen(in), envsock, &out, &err);                      \
	})

static void test_ctl(void)
{
	char *out = NULL, *err = NULL, path[160], bad[160];
	const char *sock;
	int rc;

	daemon_start(&the_daemon, NULL);
	sock = the_daemon.sock;

	/* --socket, given as a whole argv: the macro needs constants, so
	 * the path goes through $GPURED_SOCKET except where the option
	 * itself is tested. */
	{
		const char *a[] = { "--socket", sock, "ping", NULL };
		free(out);
		free(err);
		out = err = NULL;
		rc = run_ctl(a, "", 0, NULL, &out, &err);
		CHECK_MSG(rc == 0 && strncmp(out, "pong", 4) == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	rc = CTL("", sock, "ping", "--json");
	CHECK_MSG(rc == 0 && strstr(out, "\"pong\""), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "health");
	CHECK_MSG(rc == 0 && strncmp(out, "ok: backend ", 12) == 0 && strstr(out, test_backend()) &&
		  strstr(out, " in service (ping "), "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("", sock, "health", "--json");
	CHECK_MSG(rc == 0 && strncmp(out, "{\"status\":\"ok\",", 15) == 0 && strstr(out, "\"rtt_us\":"),
		  "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "health", "extra");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "info");
	CHECK_MSG(rc == 0 && strstr(out, "version") && strstr(out, test_backend()), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "info", "--json");
	CHECK_MSG(rc == 0 && out[0] == '{' && strstr(out, "\"version\"") && strstr(out, "\"limits\""),
		  "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "stats");
	CHECK_MSG(rc == 0 && strstr(out, "requests") && strstr(out, "uptime_s"), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "--json", "stats");
	CHECK_MSG(rc == 0 && out[0] == '{' && strstr(out, "\"requests\"") && strstr(out, "\"latency_us\""),
		  "rc %d out '%s'", rc, out);

	rc = CTL("1 2 3\n-4   10\n", sock, "sum", "--dtype", "i64");
	CHECK_MSG(rc == 0 && strcmp(out, "12\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("5 9 2", sock, "--json", "max", "-t", "u32");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":9,\"count\":3}\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("0.1 0.2", sock, "sum");
	CHECK_MSG(rc == 0 && strtod(out, NULL) == 0.1 + 0.2, "rc %d out '%s'", rc, out);
	rc = CTL("-3 4", sock, "sumsq", "-t", "i32", "-");
	CHECK_MSG(rc == 0 && strcmp(out, "25\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("5 9 2 9 2", sock, "argmax", "-t", "u32");
	CHECK_MSG(rc == 0 && strcmp(out, "9 1\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("5 9 2 9 2", sock, "--json", "argmin", "-t", "i64");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":2,\"index\":2,\"count\":5}\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1.5 -0 0 -0", sock, "argmin");
	CHECK_MSG(rc == 0 && strcmp(out, "-0 1\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "argmin", "-t", "f32");
	CHECK_MSG(rc != 0 && strstr(err, "empty"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 3 6", sock, "moments", "--dtype", "i32", "--ddof", "1");
	CHECK_MSG(rc == 0 && strcmp(out, "count 4\nsum 12\nmin 1\nmax 6\nmean 3\n"
				 "var 4.666666666666667\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1e15 1e15 -inf", sock, "--json", "moments");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"count\":3,\"sum\":null,\"min\":null,\"max\":1000000000000000,"
				 "\"mean\":null,\"var\":null}\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1 2", sock, "moments", "-d", "2");
	CHECK_MSG(rc != 0 && strstr(err, "ddof"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2", sock, "moments", "--ddof", "-1");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--ddof", "0");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "moments");
	CHECK_MSG(rc != 0 && strstr(err, "empty"), "rc %d err '%s'", rc, err);

	/* From a file. */
	snprintf(path, sizeof(path), "%s/numbers.txt", the_daemon.dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "0.5 0.25\n0.125\n", 15) == 15);
	close(fd);
	{
		const char *a[] = { "sum", "-t", "f32", path, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "0.875\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	unlink(path);

	/* Packed binary. */
	float raw[3] = { 1.5f, 2.5f, -0.25f };
	free(out);
	free(err);
	{
		const char *a[] = { "sum", "--raw", "--dtype", "f32", NULL };
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "3.75\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	free(out);
	free(err);
	{
		/* through a shared-memory region */
		const char *a[] = { "moments", "--raw", "--dtype", "f32", "--ddof", "2", NULL };
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "count 3\nsum 3.75\nmin -0.25\nmax 2.5\n"
					 "mean 1.25\nvar 3.875\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	rc = CTL("abcde", sock, "sum", "--raw", "--dtype", "f32");
	CHECK_MSG(rc == 2, "rc %d", rc);

	/* Many numbers, checked against a reference. */
	{
		rng r = { 99 };
		size_t n = 20000, len = 0;
		char *text = malloc(n * 32);
		long double want = 0;

		CHECK(text);
		for (size_t i = 0; i < n; i++) {
			double x = ((double)(rng_next(&r) >> 11) / (double)(1ull << 53) - 0.5) * 100;

			len += (size_t)sprintf(text + len, "%.17g%c", x, i % 10 == 9 ? '\n' : ' ');
			want += (long double)x * x;
		}
		const char *a[] = { "sumsq", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, text, len, sock, &out, &err);
		CHECK_MSG(rc == 0 && fabsl(strtod(out, NULL) - want) <= 1e-10 * want,
			  "rc %d out '%s' want %.17Lg", rc, out, want);
		free(text);
	}

	/* Errors: the server's (exit 1), the input's (exit 2). */
	rc = CTL("", sock, "min");
	CHECK_MSG(rc == 1 && strstr(err, "empty"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 x 4", sock, "sum", "-t", "i32");
	CHECK_MSG(rc == 2 && strstr(err, "'x'") && strstr(err, "3"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 3000000000", sock, "max", "-t", "i32");
	CHECK_MSG(rc == 2 && strstr(err, "3000000000"), "rc %d err '%s'", rc, err);
	rc = CTL("1.5", sock, "sum", "-t", "u64");
	CHECK_MSG(rc == 2 && strstr(err, "1.5"), "rc %d err '%s'", rc, err);
	rc = CTL("", sock, "sum", "-t", "f16");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "frobnicate");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "--help");
	CHECK_MSG(rc == 0 && strstr(out, "Exit status"), "rc %d", rc);
	rc = CTL("", sock, "--version");
	CHECK_MSG(rc == 0 && strstr(out, "gpuredctl"), "rc %d", rc);

	/* Nobody at the socket: exit 3, and the message names the path. */
	snprintf(bad, sizeof(bad), "%s/nobody.sock", the_daemon.dir);
	{
		const char *a[] = { "--socket", bad, "ping", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, sock, &out, &err);
		CHECK_MSG(rc == 3 && strstr(err, bad) && strstr(err, "No such file"), "rc %d err '%s'", rc, err);
	}
	{
		/* Through $GPURED_SOCKET as well. */
		const char *a[] = { "stats", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, bad, &out, &err);
		CHECK_MSG(rc == 3 && strstr(err, bad), "rc %d err '%s'", rc, err);
	}
	free(out);
	free(err);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* ---- segments -------------------------------------------------------- */

/* Whether field k (of 8 bytes) of op's record holds a double. */
static bool record_field_is_float(gpured_op op, gpured_dtype dt, size_t k)
{
	if (op == GPURED_OP_MOMENTS && k >= 3)
		return true; /* mean, var */
	if ((op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX) && k == 1)
		return false; /* index */
	return gpured_result_kind(op, dt) == GPURED_KIND_F64;
}

/* Records a and b the same bits, field by field, but for NaNs of any
 * payload and, with tol, integer sumsq within tol relatively. */
static bool same_record(gpured_op op, gpured_dtype dt, const uint8_t *a, const uint8_t *b,
			double tol)
{
	for (size_t k = 0; k < gpured_segment_record_bytes(op) / 8; k++) {
		double x, y;

		if (memcmp(a + 8 * k, b + 8 * k, 8) == 0)
			continue;
		if (!record_field_is_float(op, dt, k))
			return false;
		memcpy(&x, a + 8 * k, 8);
		memcpy(&y, b + 8 * k, 8);
		if (!(isnan(x) && isnan(y)) && !(tol > 0 && fabs(x - y) <= tol * fabs(y)))
			return false;
	}
	return true;
}

/* What an empty segment's record holds (PROTOCOL.md, "Segments"). */
static void empty_record(gpured_op op, gpured_dtype dt, uint8_t *ret)
{
	gpured_number lo, hi, zero = { .u = 0 };

	switch (dt) {
	case GPURED_I32: lo.i = INT32_MAX; hi.i = INT32_MIN; break;
	case GPURED_I64: lo.i = INT64_MAX; hi.i = INT64_MIN; break;
	case GPURED_U32: lo.u = UINT32_MAX; hi.u = 0; break;
	case GPURED_U64: lo.u = UINT64_MAX; hi.u = 0; break;
	default: lo.f = INFINITY; hi.f = -INFINITY; break;
	}
	switch (op) {
	case GPURED_OP_SUM:
	case GPURED_OP_SUMSQ:
		memcpy(ret, &zero, 8);
		break;
	case GPURED_OP_MIN:
	case GPURED_OP_MAX:
		memcpy(ret, op == GPURED_OP_MIN ? &lo : &hi, 8);
		break;
	case GPURED_OP_ARGMIN:
	case GPURED_OP_ARGMAX: {
		gpured_arg_record r = { op == GPURED_OP_ARGMIN ? lo : hi, GPURED_SEGMENT_NO_INDEX };
		memcpy(ret, &r, sizeof(r));
		break;
	}
	case GPURED_OP_MOMENTS: {
		gpured_moments_record r = { zero, lo, hi, NAN, NAN };
		memcpy(ret, &r, sizeof(r));
		break;
	}
	}
}

/* The record of len elements at seg reduced alone (identity when empty). */
static void segment_alone(gpured_t *g, gpured_op op, gpured_dtype dt, const void *seg,
			  size_t len, uint64_t ddof, uint8_t *ret)
{
	if (len == 0) {
		empty_record(op, dt, ret);
	} else if (op == GPURED_OP_MOMENTS) {
		gpured_moments m;
		CHECK_MSG(gpured_reduce_moments(g, dt, seg, len, ddof < len ? ddof : 0, &m) == 0,
			  "%s", gpured_errmsg(g));
		gpured_moments_record r;
		memcpy(&r.sum, &m.sum.v, 8);
		memcpy(&r.min, &m.min.v, 8);
		memcpy(&r.max, &m.max.v, 8);
		r.mean = m.mean;
		r.var = ddof < len ? m.var : NAN;
		memcpy(ret, &r, sizeof(r));
	} else {
		gpured_value v;
		CHECK_MSG(gpured_reduce(g, op, dt, seg, len, &v) == 0, "%s", gpured_errmsg(g));
		memcpy(ret, &v.v, 8);
		if (op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX)
			memcpy(ret + 8, &v.index, 8);
	}
}

/* Each of the nseg records against its segment reduced alone. */
static void check_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, const void *records,
			   const char *what)
{
	size_t rb = gpured_segment_record_bytes(op), esz = gpured_dtype_size(dt);
	/* integer sumsq adds in double in blocks that restart at chunks */
	double tol = op == GPURED_OP_SUMSQ && dt != GPURED_F32 && dt != GPURED_F64 ? 1e-12 : 0;
	uint8_t want[40];

	for (size_t i = 0; i < nseg; i++) {
		const uint8_t *got = (const uint8_t *)records + i * rb;

		segment_alone(g, op, dt, (const uint8_t *)data + offsets[i] * esz,
			      offsets[i + 1] - offsets[i], ddof, want);
		CHECK_MSG(same_record(op, dt, got, want, tol),
			  "%s: %s %s segment %zu [%llu, %llu) differs from the segment alone", what,
			  gpured_op_name(op), gpured_dtype_name(dt), i,
			  (unsigned long long)offsets[i], (unsigned long long)offsets[i + 1]);
	}
}

static void write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	CHECK(fd >= 0);
	CHECK(write(fd, p, len) == (ssize_t)len);
	close(fd);
}

/* The worked example and values computed by hand. */
static void segments_by_hand(gpured_t *g)
{
#define SEGS(op, dt, x, n, o, k, ddof, out)                                                    \
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_##op, GPURED_##dt, x, n, o, k, ddof, out,  \
					 sizeof(out)) == 0,                                      \
		  "%s", gpured_errmsg(g))
	int32_t x[5] = { 1, 2, 3, 4, 5 };
	uint64_t o[4] = { 0, 2, 2, 5 }, o026[3] = { 0, 2, 6 }, o002[3] = { 0, 0, 2 };
	uint64_t o022[3] = { 0, 2, 2 }, o033[3] = { 0, 3, 3 }, zeros[4] = { 0 };
	gpured_number s[3];

	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_SUM), 8);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_SUMSQ), 8);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_ARGMAX), 16);
	CHECK_EQ(gpured_segment_record_bytes(GPURED_OP_MOMENTS), 40);
	CHECK_EQ(gpured_segment_record_bytes((gpured_op)99), 0);
	SEGS(SUM, I32, x, 5, o, 3, 0, s);
	CHECK(s[0].i == 3 && s[1].i == 0 && s[2].i == 12);

	double f[6] = { 2.5, -1.0, 4.0, -1.0, 9.0, 9.0 };
	uint64_t fo[4] = { 0, 3, 3, 6 };
	gpured_arg_record a[3];
	gpured_moments_record m[3];
	SEGS(SUM, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 5.5 && s[1].f == 0.0 && !signbit(s[1].f) && s[2].f == 17.0);
	SEGS(SUMSQ, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 23.25 && s[1].f == 0.0 && s[2].f == 163.0);
	SEGS(MIN, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == -1.0 && s[1].f == INFINITY && s[2].f == -1.0);
	SEGS(MAX, F64, f, 6, fo, 3, 0, s);
	CHECK(s[0].f == 4.0 && s[1].f == -INFINITY && s[2].f == 9.0);
	SEGS(ARGMIN, F64, f, 6, fo, 3, 0, a);
	CHECK(a[0].value.f == -1.0 && a[0].index == 1 && a[1].value.f == INFINITY &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX && a[2].value.f == -1.0 && a[2].index == 0);
	SEGS(ARGMAX, F64, f, 6, fo, 3, 0, a);
	CHECK(a[0].value.f == 4.0 && a[0].index == 2 && a[1].value.f == -INFINITY &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX && a[2].value.f == 9.0 && a[2].index == 1);
	/* S1 = 5.5, S2 = 23.25: var = (23.25 - 5.5^2 / 3) / 2 = 39.5 / 6;
	 * S1 = 17, S2 = 163: var = (163 - 17^2 / 3) / 2 = 200 / 6 */
	SEGS(MOMENTS, F64, f, 6, fo, 3, 1, m);
	CHECK(m[0].sum.f == 5.5 && m[0].min.f == -1.0 && m[0].max.f == 4.0 &&
	      m[0].mean == 5.5 / 3 && m[0].var == 39.5 / 6);
	CHECK(m[1].sum.f == 0.0 && m[1].min.f == INFINITY && m[1].max.f == -INFINITY &&
	      isnan(m[1].mean) && isnan(m[1].var));
	CHECK(m[2].sum.f == 17.0 && m[2].min.f == -1.0 && m[2].max.f == 9.0 &&
	      m[2].mean == 17.0 / 3 && m[2].var == 200.0 / 6);
	/* ddof 2: a segment of two elements or fewer has no variance; {4, -1,
	 * 9, 9}: (179 - 21^2 / 4) / 2 */
	SEGS(MOMENTS, F64, f, 6, o026, 2, 2, m);
	CHECK(m[0].mean == 0.75 && isnan(m[0].var) && m[1].mean == 5.25 && m[1].var == 34.375);

	/* Integer identities, of the result's kind */
	uint32_t u[2] = { 5, 7 };
	SEGS(MIN, U32, u, 2, o002, 2, 0, s);
	CHECK(s[0].u == UINT32_MAX && s[1].u == 5);
	SEGS(MAX, U32, u, 2, o022, 2, 0, s);
	CHECK(s[0].u == 7 && s[1].u == 0);
	int64_t i64[3] = { -4, 3, -9 };
	SEGS(ARGMIN, I64, i64, 3, o033, 2, 0, a);
	CHECK(a[0].value.i == -9 && a[0].index == 2 && a[1].value.i == INT64_MAX &&
	      a[1].index == GPURED_SEGMENT_NO_INDEX);
	/* no elements at all, in one segment or three */
	SEGS(SUM, I64, NULL, 0, zeros, 1, 0, s);
	CHECK(s[0].i == 0);
	SEGS(MOMENTS, I32, NULL, 0, zeros, 3, 0, m);
	CHECK(m[2].sum.i == 0 && m[2].min.i == INT32_MAX && m[2].max.i == INT32_MIN &&
	      isnan(m[2].mean) && isnan(m[2].var));
	/* records may be dropped */
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 5, o, 3, 0, NULL, 0), 0);
#undef SEGS
}

/* Every op and dtype on random segments, some empty, some longer than
 * the daemon's chunks, against each segment reduced alone. */
static void segments_random(gpured_t *g, rng *r)
{
	enum { K = 40 };
	uint64_t o[K + 1];

	for (int dt = 0; dt < 6; dt++) {
		size_t esz = gpured_dtype_size((gpured_dtype)dt);

		o[0] = 0;
		for (size_t i = 0; i < K; i++) {
			size_t len = rng_next(r) % 10 == 0 ? 0 : (size_t)(rng_next(r) % 3000);

			if (i == 0 || i == 7 || i == 8 || i == K - 1)
				len = 0;
			if (i == 11)
				len = 262144 / esz + 3; /* past a chunk */
			if (i == 20)
				len = 2 * 262144 / esz + 1;
			o[i + 1] = o[i] + len;
		}
		size_t n = o[K];
		void *data = random_array(r, (gpured_dtype)dt, n);
		static uint8_t rec[K * 40];

		for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
			uint64_t ddof = op == GPURED_OP_MOMENTS ? 1 : 0;
			char what[64];

			snprintf(what, sizeof(what), "random n=%zu", n);
			memset(rec, 0xa5, sizeof(rec));
			CHECK_MSG(gpured_reduce_segments(g, (gpured_op)op, (gpured_dtype)dt, data, n, o,
							 K, ddof, rec, sizeof(rec)) == 0,
				  "%s: %s", what, gpured_errmsg(g));
			check_segments(g, (gpured_op)op, (gpured_dtype)dt, data, o, K, ddof, rec, what);
		}
		free(data);
	}
}

/* Errors: the library's own, before anything is sent; the daemon's, with
 * its message; and the connection goes on after each. */
static void segments_errors(gpured_t *g)
{
	int32_t x[10] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	gpured_number s[4];
	gpured_value v;
	uint32_t id, id2;

	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0 }, 0, 0,
					s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "nseg >= 1") && !gpured_errcode(g), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 1, 10 }, 1,
					0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "offsets[0] is 1"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0, 4, 9 }, 2,
					0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "offsets[2] is 9") && strstr(gpured_errmsg(g), "10 elements"),
		  "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10, (uint64_t[]){ 0, 10 }, 1,
					1, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "ddof"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_ARGMIN, GPURED_I32, x, 10, (uint64_t[]){ 0, 5, 10 },
					2, 0, s, 31), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "32 bytes"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_region_segments(g, 1, GPURED_OP_SUM, GPURED_I32, 0, 10,
					       (uint64_t[]){ 0, 11 }, 1, 0, s, sizeof(s)), -EINVAL);
	CHECK_EQ(gpured_outstanding(g), 0);

	/* The daemon's, with its code and message */
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10,
					(uint64_t[]){ 0, 5, 4, 10 }, 3, 0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(gpured_errcode(g) && strcmp(gpured_errcode(g), "invalid_params") == 0 &&
		  strstr(gpured_errmsg(g), "must not decrease"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_MOMENTS, GPURED_I32, x, 10, (uint64_t[]){ 0, 10 },
					1, 10, NULL, 0), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "'ddof' is 10"), "%s", gpured_errmsg(g));
	size_t big = ((size_t)1 << 21) + 1;
	uint64_t *zeros = calloc(big + 1, sizeof(*zeros));
	CHECK(zeros);
	CHECK_EQ(gpured_reduce_segments(g, GPURED_OP_SUM, GPURED_I32, NULL, 0, zeros, big, 0, NULL, 0),
		 -E2BIG);
	CHECK_MSG(strcmp(gpured_errcode(g), "too_large") == 0 &&
		  strstr(gpured_errmsg(g), "over the limit of 2097152"), "%s", gpured_errmsg(g));
	free(zeros);
	gpured_region_t *rg;
	CHECK_EQ(gpured_region_new(g, 40, &rg), 0);
	CHECK_EQ(gpured_region_reduce_segments(g, rg, GPURED_OP_SUM, GPURED_I32, 4, 10,
					       (uint64_t[]){ 0, 10 }, 1, 0, s, sizeof(s)), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "past the end"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_region_free(g, rg), 0);
	CHECK_EQ(gpured_ping(g), 0);

	/* Collecting: only segmented requests, only into room enough */
	CHECK_EQ(gpured_wait_id_segments(g, 4242, s, sizeof(s)), -ESRCH);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I32, x, 10, &id), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id, s, sizeof(s)), -EINVAL);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_SUM, GPURED_I32, x, 10,
					(uint64_t[]){ 0, 3, 6, 10 }, 3, 0, &id2), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id2, s, 16), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "24 bytes"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_outstanding(g), 2);
	CHECK_EQ(gpured_wait_id(g, id, &v), 0);
	CHECK(v.v.i == 45);
	CHECK_EQ(gpured_wait_id_segments(g, id2, s, sizeof(s)), 0);
	CHECK(s[0].i == 3 && s[1].i == 12 && s[2].i == 30);
	/* gpured_wait() takes them too, without the records */
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_MAX, GPURED_U32, x, 10,
					(uint64_t[]){ 0, 3, 10 }, 2, 0, &id), 0);
	CHECK_EQ(gpured_wait(g, &id2, &v), 0);
	CHECK(id2 == id && v.count == 10 && v.kind == GPURED_KIND_U64);
	CHECK_EQ(gpured_outstanding(g), 0);
}

/* Several segmented requests in flight, with plain ones between them,
 * collected out of order, each equal to the same request alone. */
static void segments_pipelined(gpured_t *g, rng *r)
{
	enum { N = 12, K = 25 };
	struct {
		gpured_op op;
		gpured_dtype dt;
		uint32_t id, plain_id;
		void *data;
		size_t n;
		uint64_t o[K + 1];
	} q[N];
	static uint8_t got[K * 40], want[K * 40];

	for (int i = 0; i < N; i++) {
		q[i].op = (gpured_op)(i % 7);
		q[i].dt = (gpured_dtype)(rng_next(r) % 6);
		q[i].o[0] = 0;
		for (int k = 0; k < K; k++)
			q[i].o[k + 1] = q[i].o[k] + (k % 5 == 3 ? 0 : rng_next(r) % (i % 4 == 0 ? 40000 : 500));
		q[i].n = q[i].o[K];
		q[i].data = random_array(r, q[i].dt, q[i].n);
		CHECK_EQ(gpured_submit_segments(g, q[i].op, q[i].dt, q[i].data, q[i].n, q[i].o, K,
						 0, &q[i].id), 0);
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, q[i].dt, q[i].data, q[i].n, &q[i].plain_id), 0);
	}
	CHECK_EQ(gpured_outstanding(g), 2 * N);
	for (int i = N - 1; i >= 0; i--) {
		size_t bytes = K * gpured_segment_record_bytes(q[i].op);
		gpured_value v;

		CHECK_MSG(gpured_wait_id_segments(g, q[i].id, got, sizeof(got)) == 0, "%s",
			  gpured_errmsg(g));
		CHECK_EQ(gpured_wait_id(g, q[i].plain_id, &v), 0);
		CHECK(v.count == q[i].n);
		CHECK_EQ(gpured_reduce_segments(g, q[i].op, q[i].dt, q[i].data, q[i].n, q[i].o, K, 0,
						want, sizeof(want)), 0);
		CHECK_MSG(memcmp(got, want, bytes) == 0, "pipelined %d: %s %s differs from alone", i,
			  gpured_op_name(q[i].op), gpured_dtype_name(q[i].dt));
		free(q[i].data);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
}

/* In a region at odd offsets: the same bytes as over the socket. */
static void segments_regions(gpured_t *g, rng *r)
{
	enum { K = 30 };
	static const gpured_dtype dts[] = { GPURED_I32, GPURED_U64, GPURED_F32, GPURED_F64 };
	static uint8_t a[K * 40], b[K * 40];
	uint64_t o[K + 1] = { 0 };
	gpured_region_t *rg;
	uint32_t ids[7];

	for (int k = 0; k < K; k++)
		o[k + 1] = o[k] + (k % 6 == 2 ? 0 : rng_next(r) % 9000);
	size_t n = o[K];
	CHECK_EQ(gpured_region_new(g, n * 8 + 64, &rg), 0);
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
		size_t off = 3 * d + 5;
		void *data = random_array(r, dts[d], n);

		memcpy((uint8_t *)gpured_region_data(rg) + off, data, n * gpured_dtype_size(dts[d]));
		for (int op = 0; op <= GPURED_OP_MOMENTS; op++) {
			size_t bytes = K * gpured_segment_record_bytes((gpured_op)op);

			CHECK_MSG(gpured_region_reduce_segments(g, rg, (gpured_op)op, dts[d], off, n, o, K,
								0, a, sizeof(a)) == 0,
				  "%s", gpured_errmsg(g));
			CHECK_EQ(gpured_reduce_segments(g, (gpured_op)op, dts[d], data, n, o, K, 0, b,
							sizeof(b)), 0);
			CHECK_MSG(memcmp(a, b, bytes) == 0, "region %s %s @%zu differs from the socket",
				  gpured_op_name((gpured_op)op), gpured_dtype_name(dts[d]), off);
			if (dts[d] == GPURED_F64)
				check_segments(g, (gpured_op)op, dts[d], data, o, K, 0, a, "region");
		}
		/* pipelined, by id and by the region object */
		for (int op = 0; op <= GPURED_OP_MOMENTS; op++)
			CHECK_EQ(op % 2 ? gpured_region_submit_segments(g, rg, (gpured_op)op, dts[d], off,
									  n, o, K, 0, &ids[op])
					: gpured_submit_region_segments(g, gpured_region_id(rg), (gpured_op)op,
									dts[d], off, n, o, K, 0, &ids[op]),
				 0);
		for (int op = GPURED_OP_MOMENTS; op >= 0; op--) {
			CHECK_EQ(gpured_wait_id_segments(g, ids[op], a, sizeof(a)), 0);
			CHECK_EQ(gpured_reduce_segments(g, (gpured_op)op, dts[d], data, n, o, K, 0, b,
							sizeof(b)), 0);
			CHECK(memcmp(a, b, K * gpured_segment_record_bytes((gpured_op)op)) == 0);
		}
		free(data);
	}
	CHECK_EQ(gpured_outstanding(g), 0);
	CHECK_EQ(gpured_region_free(g, rg), 0);
}

/* As many segments as the daemon takes: replies far larger than any
 * other (16 MiB of max records, 80 MiB of moments). */
static void segments_many(gpured_t *g, rng *r)
{
	size_t k = (size_t)1 << 21;
	uint64_t *o = malloc((k + 1) * sizeof(*o));
	int64_t *mx = malloc(k * sizeof(*mx));
	gpured_moments_record *m = malloc(k * sizeof(*m));

	CHECK(o && mx && m);
	o[0] = 0;
	for (size_t i = 0; i < k; i++)
		o[i + 1] = o[i] + rng_next(r) % 4;
	size_t n = o[k];
	int32_t *x = malloc(n * sizeof(*x));
	CHECK(x);
	for (size_t i = 0; i < n; i++)
		x[i] = (int32_t)(rng_next(r) % 2001) - 1000;
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_MAX, GPURED_I32, x, n, o, k, 0, mx,
					 k * sizeof(*mx)) == 0, "%s", gpured_errmsg(g));
	CHECK_MSG(gpured_reduce_segments(g, GPURED_OP_MOMENTS, GPURED_I32, x, n, o, k, 0, m,
					 k * sizeof(*m)) == 0, "%s", gpured_errmsg(g));
	for (size_t i = 0; i < k; i++) {
		int64_t want = INT32_MIN, sum = 0;

		for (uint64_t j = o[i]; j < o[i + 1]; j++) {
			want = x[j] > want ? x[j] : want;
			sum += x[j];
		}
		CHECK_MSG(mx[i] == want && m[i].max.i == want && m[i].sum.i == sum,
			  "segment %zu: max %lld, moments' max %lld and sum %lld; want %lld and %lld", i,
			  (long long)mx[i], (long long)m[i].max.i, (long long)m[i].sum.i,
			  (long long)want, (long long)sum);
	}
	free(x);
	free(m);
	free(mx);
	free(o);
}

/* gpuredctl --rows and --offsets */
static void segments_ctl(void)
{
	char *out = NULL, *err = NULL, opath[160], a1[192];
	const char *sock = the_daemon.sock;
	int rc;

	snprintf(opath, sizeof(opath), "%s/offsets", the_daemon.dir);
	snprintf(a1, sizeof(a1), "%s", opath);
	write_file(opath, (uint64_t[]){ 0, 2, 2, 5 }, 32);

	rc = CTL("1 2 3 4 5", sock, "sum", "-t", "i32", "--rows", "2");
	CHECK_MSG(rc == 0 && strcmp(out, "3\n7\n5\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("1 2 3 4 5 6", sock, "moments", "--rows", "3", "--ddof", "1");
	CHECK_MSG(rc == 0 && strcmp(out, "3 6 1 3 2 1\n3 15 4 6 5 1\n") == 0, "rc %d out '%s' err '%s'",
		  rc, out, err);
	rc = CTL("1.5 -2 7", sock, "--json", "sumsq", "--rows", "2");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":6.25,\"count\":2}\n{\"value\":49,\"count\":1}\n") == 0,
		  "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("", sock, "sum", "--rows", "4");
	CHECK_MSG(rc == 0 && strcmp(out, "") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	{
		const char *a[] = { "argmin", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "5 4 3 2 1", 9, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "4 1\ninf -1\n1 2\n") == 0, "rc %d out '%s' err '%s'", rc,
			  out, err);
	}
	{
		const char *a[] = { "--json", "argmax", "-t", "u32", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "5 4 3 2 1", 9, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":5,\"index\":0,\"count\":2}\n"
					 "{\"value\":0,\"index\":null,\"count\":0}\n"
					 "{\"value\":3,\"index\":0,\"count\":3}\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	{
		/* packed input, through a region */
		int64_t raw[5] = { -1, 2, -3, 4, -5 };
		const char *a[] = { "min", "--raw", "-t", "i64", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "-1\n9223372036854775807\n-5\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	{
		const char *a[] = { "moments", "-t", "f64", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "1 3 0.5 0.5 2", 13, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "2 4 1 3 2 1\n0 0 inf -inf nan nan\n3 3 0.5 2 1 0.5\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}

	/* Bad offsets are the input's errors (exit 2), told before sending */
	{
		const char *a[] = { "sum", "--offsets", a1, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "the last offset is 5, not the 4 elements"), "rc %d err '%s'",
			  rc, err);
		write_file(opath, (uint64_t[]){ 0, 3, 2, 4 }, 32);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "offset 2 is 2, below"), "rc %d err '%s'", rc, err);
		write_file(opath, (uint64_t[]){ 0, 4 }, 12);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "12 bytes"), "rc %d err '%s'", rc, err);
		unlink(opath);
		free(out);
		free(err);
		rc = run_ctl(a, "1 2 3 4", 7, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "cannot open"), "rc %d err '%s'", rc, err);
	}
	rc = CTL("1 2", sock, "sum", "--rows", "0");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--rows", "-1");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--rows", "1", "--offsets", "/nonexistent");
	CHECK_MSG(rc == 2 && strstr(err, "exclude"), "rc %d err '%s'", rc, err);
	rc = CTL("", sock, "ping", "--rows", "2");
	CHECK_MSG(rc == 2 && strstr(err, "reductions only"), "rc %d err '%s'", rc, err);
	/* the daemon's errors (exit 1) */
	rc = CTL("1 2 3", sock, "moments", "--rows", "2", "--ddof", "3");
	CHECK_MSG(rc == 1 && strstr(err, "ddof") && strstr(err, "invalid_params"), "rc %d err '%s'", rc,
		  err);
	free(out);
	free(err);
}

static void test_segments(void)
{
	static const char *const extra[] = { "--chunk-bytes", "262144", NULL };
	rng r = { 0x5e65e65e };
	gpured_t *g;

	daemon_start(&the_daemon, extra);
	g = connect_or_die(&the_daemon);
	segments_by_hand(g);
	segments_random(g, &r);
	segments_errors(g);
	segments_pipelined(g, &r);
	segments_regions(g, &r);
	segments_many(g, &r);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	segments_ctl();
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

static void test_sigterm(void)
{
	rng r = { 4242 };
	size_t n = 8u << 20; /* 64 MiB of f64 */
	void *data = random_array(&r, GPURED_F64, n);
	expect want = reference(GPURED_OP_SUMSQ, GPURED_F64, data, n);
	struct stat stt;
	gpured_value v;
	uint32_t id;
	gpured_t *g;
	int status, rc;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUMSQ, GPURED_F64, data, n, &id), 0);
	/* The request is written (the daemon has all but a socket buffer of
	 * it); stop the daemon while it is being reduced. */
	usleep(2000);
	CHECK(kill(the_daemon.pid, SIGTERM) == 0);
	rc = gpured_wait_id(g, id, &v);
	check_result("in flight at SIGTERM", &want, rc, &v, g);
	gpured_close(g);
	free(data);

	uint64_t deadline = now_ms() + 10000;
	while (waitpid(the_daemon.pid, &status, WNOHANG) != the_daemon.pid) {
		if (now_ms() > deadline) {
			daemon_dump_log(&the_daemon);
			CHECK_MSG(false, "daemon did not exit within 10 s of SIGTERM");
		}
		usleep(5000);
	}
	the_daemon.pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		daemon_dump_log(&the_daemon);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon status %d", status);
	CHECK_MSG(stat(the_daemon.sock, &stt) < 0 && errno == ENOENT, "socket file left behind");
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} scenarios[] = {
		{ "reduce", test_reduce },
		{ "chunks", test_chunks },
		{ "pipeline", test_pipeline },
		{ "regions", test_regions },
		{ "connections", test_connections },
		{ "ctl", test_ctl },
		{ "segments", test_segments },
		{ "sigterm", test_sigterm },
	};

	if (argc != 4) {
		fprintf(stderr, "usage: %s SCENARIO GPURED GPUREDCTL\n", argv[0]);
		return 2;
	}
	gpured_path = argv[2];
	gpuredctl_path = argv[3];
	/* Default SIGPIPE: the library must never raise it, and the
	 * programs started here inherit the disposition. */
	signal(SIGPIPE, SIG_DFL);
	atexit(at_exit_cleanup);
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++) {
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenarios[i].fn();
			return 0;
		}
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
