/*
 * test-client-cumsum's two scenarios beyond the library and the daemon:
 * wire (a scripted server's malformed replies end the connection) and ctl
 * (gpuredctl cumsum against the daemon, its text against the library's
 * values).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/cumsum-check.h"
#include "tests/client/daemon-harness.h"
#include "proto/mp.h"

/* ---- wire: a scripted server ------------------------------------------ */

typedef struct script {
	int lfd;
	gr_buf reply; /* sent once the first request is in */
	pthread_t thread;
} script;

static void *script_thread(void *arg)
{
	script *s = arg;
	uint8_t buf[65536];
	int fd = accept(s->lfd, NULL, NULL);

	CHECK(fd >= 0);
	CHECK(read(fd, buf, sizeof(buf)) > 0);
	for (size_t off = 0; off < s->reply.len;) {
		ssize_t k = send(fd, s->reply.data + off, s->reply.len - off, MSG_NOSIGNAL);

		if (k <= 0)
			break; /* the client gave up on it */
		off += (size_t)k;
	}
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return NULL;
}

/* [1, 1, nil, {keys...}]: the head of the reply to request 1. */
static void reply_head(gr_buf *b, uint32_t nkeys)
{
	b->len = 0;
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_nil(b) == 0);
	CHECK(gr_mpw_map(b, nkeys) == 0);
}

/* Send a cumsum of 4 i32 (region: of a region) to a server that answers
 * with s->reply; the call must fail with -EPROTO and why, and the
 * connection stay dead. */
static void expect_proto(script *s, bool region, const char *why)
{
	char dir[64], path[96];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int32_t x[4] = { 1, 2, 3, 4 };
	int64_t out[4];
	gpured_t *g;
	int r;

	snprintf(dir, sizeof(dir), "%s/gpured-cumsum-wire-XXXXXX", tmp_base());
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(s->lfd >= 0 && bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	      listen(s->lfd, 1) == 0);
	CHECK(pthread_create(&s->thread, NULL, script_thread, s) == 0);
	CHECK_EQ(gpured_connect(path, &g), 0);
	gpured_set_timeout(g, 10000);
	if (region)
		r = gpured_cumsum_region(g, 1, GPURED_I32, 0, 4, 2, 0);
	else
		r = gpured_cumsum(g, GPURED_I32, x, 4, out);
	CHECK_MSG(r == -EPROTO, "%s: %d (%s)", why, r, gpured_errmsg(g));
	CHECK_MSG(contains(gpured_errmsg(g), why), "message '%s', not about '%s'",
		  gpured_errmsg(g), why);
	CHECK_EQ(gpured_ping(g), -EPROTO);
	gpured_close(g);
	CHECK(pthread_join(s->thread, NULL) == 0);
	close(s->lfd);
	unlink(path);
	rmdir(dir);
}

void test_wire(void)
{
	uint8_t vals[32] = { 0 };
	script s = { 0 };

	gr_buf_init(&s.reply);
	/* a count other than the request's */
	reply_head(&s.reply, 2);
	CHECK(gr_mpw_cstr(&s.reply, "count") == 0 && gr_mpw_uint(&s.reply, 5) == 0);
	CHECK(gr_mpw_cstr(&s.reply, "values") == 0 && gr_mpw_bin(&s.reply, vals, 32) == 0);
	expect_proto(&s, false, "of 5 elements, for 4");
	/* values of another length */
	reply_head(&s.reply, 2);
	CHECK(gr_mpw_cstr(&s.reply, "count") == 0 && gr_mpw_uint(&s.reply, 4) == 0);
	CHECK(gr_mpw_cstr(&s.reply, "values") == 0 && gr_mpw_bin(&s.reply, vals, 24) == 0);
	expect_proto(&s, false, "without the 4 values");
	/* values that are not a bin */
	reply_head(&s.reply, 2);
	CHECK(gr_mpw_cstr(&s.reply, "count") == 0 && gr_mpw_uint(&s.reply, 4) == 0);
	CHECK(gr_mpw_cstr(&s.reply, "values") == 0 && gr_mpw_cstr(&s.reply, "values") == 0);
	expect_proto(&s, false, "without the 4 values");
	/* no count */
	reply_head(&s.reply, 1);
	CHECK(gr_mpw_cstr(&s.reply, "values") == 0 && gr_mpw_bin(&s.reply, vals, 32) == 0);
	expect_proto(&s, false, "malformed cumsum result");
	/* far more values than asked for: past what a reply may be */
	uint8_t *lots = calloc(1, 2 << 20);
	CHECK(lots);
	reply_head(&s.reply, 2);
	CHECK(gr_mpw_cstr(&s.reply, "count") == 0 && gr_mpw_uint(&s.reply, 4) == 0);
	CHECK(gr_mpw_cstr(&s.reply, "values") == 0 && gr_mpw_bin(&s.reply, lots, 2 << 20) == 0);
	expect_proto(&s, false, "reply");
	free(lots);
	/* a region's count other than the request's */
	reply_head(&s.reply, 1);
	CHECK(gr_mpw_cstr(&s.reply, "count") == 0 && gr_mpw_uint(&s.reply, 3) == 0);
	expect_proto(&s, true, "of 3 elements, for 4");
	gr_buf_deinit(&s.reply);
}

/* ---- gpuredctl --------------------------------------------------------- */

/* gpuredctl's lines, parsed as dt's result kind, into values (8 bytes
 * each); returns how many. */
static size_t parse_lines(gpured_dtype dt, char *text, void *values, size_t max)
{
	gpured_kind kind = gpured_result_kind(GPURED_OP_SUM, dt);
	size_t k = 0;

	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *end;
		uint64_t u;

		CHECK(k < max);
		errno = 0;
		if (kind == GPURED_KIND_I64)
			u = (uint64_t)strtoll(line, &end, 10);
		else if (kind == GPURED_KIND_U64)
			u = strtoull(line, &end, 10);
		else {
			double f = strtod(line, &end);
			memcpy(&u, &f, 8);
		}
		CHECK_MSG(errno == 0 && end != line && *end == '\0', "line '%s'", line);
		memcpy((uint8_t *)values + 8 * k++, &u, 8);
	}
	return k;
}

/* The elements of dt as gpuredctl's text input. */
static char *as_text(gpured_dtype dt, const void *x, size_t n)
{
	char *s = malloc(n * 32 + 1), *p = s;

	CHECK(s);
	for (size_t i = 0; i < n; i++) {
		if (dt == GPURED_F32 || dt == GPURED_F64)
			p += sprintf(p, "%.17Lg\n", element(dt, x, i));
		else if (dt == GPURED_U32 || dt == GPURED_U64)
			p += sprintf(p, "%llu\n", (unsigned long long)element_bits(dt, x, i));
		else
			p += sprintf(p, "%lld\n", (long long)element_bits(dt, x, i));
	}
	*p = '\0';
	return s;
}

void test_ctl(void)
{
	char *out = NULL, *err = NULL;
	gpured_snapshot_t before, after;
	gpured_t *g;
	int rc;

	start();
	rc = CTL("1 2 3\n4", the_daemon.sock, "cumsum", "--dtype", "i32");
	CHECK_MSG(rc == 0 && strcmp(out, "1\n3\n6\n10\n") == 0, "rc %d out '%s' err '%s'", rc,
		  out, err);
	rc = CTL("9223372036854775807 1", the_daemon.sock, "cumsum", "-t", "i64");
	CHECK(rc == 0 && strcmp(out, "9223372036854775807\n-9223372036854775808\n") == 0);
	rc = CTL("18446744073709551615 2", the_daemon.sock, "cumsum", "-t", "u64");
	CHECK(rc == 0 && strcmp(out, "18446744073709551615\n1\n") == 0);
	rc = CTL("1 0.5 -3", the_daemon.sock, "cumsum", "--dtype", "f32");
	CHECK(rc == 0 && strcmp(out, "1\n1.5\n-1.5\n") == 0);
	rc = CTL("1 2 3", the_daemon.sock, "cumsum", "-t", "u32", "--json");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"count\":3,\"values\":[1,3,6]}\n") == 0, "'%s'", out);
	rc = CTL("1 inf -inf", the_daemon.sock, "cumsum", "--json");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"count\":3,\"values\":[1,null,null]}\n") == 0, "'%s'",
		  out);
	rc = CTL("1 inf 2 -inf", the_daemon.sock, "cumsum");
	CHECK(rc == 0 && strncmp(out, "1\ninf\ninf\n", 10) == 0 && contains(out + 10, "nan"));
	rc = CTL("", the_daemon.sock, "cumsum");
	CHECK(rc == 0 && out[0] == '\0');
	rc = CTL("", the_daemon.sock, "cumsum", "--json");
	CHECK(rc == 0 && strcmp(out, "{\"count\":0,\"values\":[]}\n") == 0);

	/* random text of every dtype, past one chunk */
	for (size_t d = 0; d < sizeof(all_dtypes) / sizeof(all_dtypes[0]); d++) {
		gpured_dtype dt = all_dtypes[d];
		const size_t n = 1100000;
		void *x = random_elements(dt, n, false), *v = values_buffer(n);
		char *text = as_text(dt, x, n);
		static const char *names[] = { "i32", "i64", "u32", "u64", "f32", "f64" };
		const char *args[] = { "cumsum", "-q", "--dtype", names[dt], NULL };

		free(out);
		free(err);
		rc = run_ctl(args, text, strlen(text), the_daemon.sock, &out, &err);
		CHECK_MSG(rc == 0, "cumsum %s: %s", names[dt], err);
		CHECK_EQ(parse_lines(dt, out, v, n), n);
		check_values("gpuredctl", dt, x, n, v);
		free(text);
		free(v);
		free(x);
	}

	/* raw input: the elements in a region, the values written into a
	 * writable one (nothing crosses the socket but requests) */
	g = open_client();
	CHECK_EQ(gpured_snapshot(g, &before), 0);
	static const char *const raw_args[] = { "cumsum", "--raw", "--dtype", "f32", NULL };
	const size_t n = 300001;
	void *x = random_elements(GPURED_F32, n, false), *v = values_buffer(n);
	free(out);
	free(err);
	rc = run_ctl(raw_args, x, n * 4, the_daemon.sock, &out, &err);
	CHECK_MSG(rc == 0, "%s", err);
	CHECK_EQ(parse_lines(GPURED_F32, out, v, n), n);
	check_values("gpuredctl --raw", GPURED_F32, x, n, v);
	CHECK_EQ(gpured_snapshot(g, &after), 0);
	CHECK(after.bytes_shm - before.bytes_shm == n * 4);
	CHECK(after.bytes_socket - before.bytes_socket < 4096);
	free(out);
	free(err);
	rc = run_ctl(raw_args, x, 6, the_daemon.sock, &out, &err);
	CHECK(rc == 2 && contains(err, "not a whole number"));
	free(v);
	free(x);
	gpured_close(g);

	/* usage */
	rc = CTL("1 2 3", the_daemon.sock, "cumsum", "--rows", "2");
	CHECK(rc == 2 && contains(err, "do not apply to cumsum"));
	rc = CTL("1 2 3", the_daemon.sock, "cumsum", "--ddof", "1");
	CHECK(rc == 2 && contains(err, "moments only"));
	rc = CTL("1 x 3", the_daemon.sock, "cumsum", "-t", "i64");
	CHECK(rc == 2 && contains(err, "'x'"));
	rc = CTL("1 2", the_daemon.sock, "cumsum", "a", "b");
	CHECK(rc == 2 && contains(err, "at most one FILE"));
	free(out);
	free(err);
	stop();
}
