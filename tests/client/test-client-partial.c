/*
 * Exact partials through libgpured (gpured.h, "Exact partials").
 *
 *   test-client-partial api
 *   test-client-partial wire
 *   test-client-partial daemon GPURED
 *
 * api: gpured_partial_init/combine/round on partials built by hand:
 * rounding ties to even both ways, overflow to infinity, subnormal
 * results, the -0 rules, specials, and refusals.
 * wire: a scripted server answers a partial request with malformed or
 * inconsistent "exact" maps; each must fail with -EPROTO and a message
 * that says what was wrong, never crash.
 * daemon: the real daemon (CPU backend unless $GPURED_TEST_BACKEND says
 * otherwise) on random adversarial f32 and f64 arrays: each is reduced
 * whole, and split at random points into 1 to 20 pieces that are reduced
 * for partials (by data and by region, one by one and pipelined) and
 * combined in random order. The rounded combination must equal the whole
 * request bit for bit, and both must equal a reference computed here
 * from an exact big-integer sum, rounded by the C library's strtod().
 */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/gpured.h"
#include "proto/mp.h"
#include "tests/check.h"

static const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

static uint64_t f64_bits(double x)
{
	uint64_t u;

	memcpy(&u, &x, sizeof(u));
	return u;
}

/* The same double, or both NaN. */
static bool same(double a, double b)
{
	return (isnan(a) && isnan(b)) || f64_bits(a) == f64_bits(b);
}

/* ---- api: partials by hand -------------------------------------------- */

/* A partial of op sum, f64, of count elements: value v x 2^scale, v < 2^63. */
static gpured_partial hand(int64_t v, int scale, uint64_t count, uint32_t specials)
{
	gpured_partial p;

	CHECK_EQ(gpured_partial_init(&p, GPURED_OP_SUM, GPURED_F64), 0);
	p.count = count;
	p.scale = scale;
	p.specials = specials;
	p.nlimbs = v ? 1 : 0;
	p.limbs[0] = (uint64_t)v;
	return p;
}

static double round_of(const gpured_partial *p)
{
	double d = 1234.5;

	CHECK_EQ(gpured_partial_round(p, &d), 0);
	return d;
}

#define CHECK_ROUND(p, want)                                                              \
	do {                                                                              \
		double got_ = round_of(&(p)), want_ = (want);                              \
		CHECK_MSG(same(got_, want_), "rounds to %a, want %a", got_, want_);         \
	} while (0)

static void test_api(void)
{
	gpured_partial a, b, c;

	/* Refusals. */
	CHECK_EQ(gpured_partial_init(&a, GPURED_OP_MIN, GPURED_F64), -EINVAL);
	CHECK_EQ(gpured_partial_init(&a, GPURED_OP_SUM, GPURED_I64), -EINVAL);
	CHECK_EQ(gpured_partial_init(&a, GPURED_OP_SUMSQ, GPURED_F32), 0);
	CHECK(a.count == 0 && a.nlimbs == 0 && a.scale == 0 && a.specials == 0);
	CHECK_ROUND(a, 0.0);
	CHECK_EQ(gpured_partial_init(&b, GPURED_OP_SUM, GPURED_F32), 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), -EINVAL); /* sumsq with sum */
	CHECK_EQ(gpured_partial_init(&b, GPURED_OP_SUMSQ, GPURED_F64), 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), -EINVAL); /* f32 with f64 */

	/* 1 + 2^-53: a tie, down to the even 1. 1 + 2^-52 + 2^-53: up. */
	a = hand(1, 0, 1, 0);
	b = hand(1, -53, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, 1.0);
	CHECK(a.count == 2 && a.nlimbs == 1 && a.scale == -53 && a.limbs[0] == (1ull << 53) + 1);
	a = hand(3, -53, 1, 0); /* 2^-52 + 2^-53 */
	b = hand(1, 0, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, 1.0 + 0x1p-51);
	/* Just above and just below the tie, far below it. */
	a = hand(((int64_t)1 << 53) + 1, -53, 1, 0); /* 1 + 2^-53 */
	b = hand(1, -1074, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, 1.0 + 0x1p-52);
	b = hand(-2, -1074, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, 1.0);
	/* The same, negative: ties to even both ways. */
	a = hand(-(((int64_t)1 << 53) + 1), -53, 1, 0);
	CHECK_ROUND(a, -1.0);
	a = hand(-(((int64_t)1 << 53) + 3), -53, 1, 0);
	CHECK_ROUND(a, -(1.0 + 0x1p-51));

	/* Overflow: DBL_MAX plus half an ulp is a tie that rounds up, to
	 * infinity; a little less rounds down to DBL_MAX. */
	a = hand((((int64_t)1 << 53) - 1) * 2 + 1, 970, 1, 0);
	CHECK_ROUND(a, INFINITY);
	a = hand(-((((int64_t)1 << 53) - 1) * 2 + 1), 970, 1, 0);
	CHECK_ROUND(a, -INFINITY);
	a = hand((((int64_t)1 << 53) - 1) * 4 + 1, 969, 1, 0);
	CHECK_ROUND(a, DBL_MAX);
	a = hand(1, 1024, 1, 0);
	CHECK_ROUND(a, INFINITY);
	a = hand(1, 2174, 1, 0);
	CHECK_ROUND(a, INFINITY);

	/* Subnormal results: exact, a tie between 0 and the least one
	 * (to 0), above it (up), 1.5 times it (to the even 2^-1073). */
	a = hand(3, -1074, 1, 0);
	CHECK_ROUND(a, 3 * 0x1p-1074);
	a = hand(1, -1075, 1, 0);
	CHECK_ROUND(a, 0.0);
	a = hand(-1, -1075, 1, 0);
	CHECK_ROUND(a, -0.0);
	a = hand(3, -1076, 1, 0);
	CHECK_ROUND(a, 0x1p-1074);
	a = hand(3, -1075, 1, 0);
	CHECK_ROUND(a, 0x1p-1073);
	a = hand(5, -1075, 1, 0);
	CHECK_ROUND(a, 0x1p-1073);
	a = hand(1, -2148, 1, 0);
	CHECK_ROUND(a, 0.0);
	/* The largest subnormal and one more unit: the least normal. */
	a = hand(((int64_t)1 << 52) - 1, -1074, 1, 0);
	CHECK_ROUND(a, DBL_MIN - 0x1p-1074);
	b = hand(1, -1074, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, DBL_MIN);

	/* -0: only when every piece with elements was all -0. */
	a = hand(0, 0, 3, GPURED_PARTIAL_NEGZERO);
	CHECK_ROUND(a, -0.0);
	b = hand(0, 0, 0, 0); /* no elements: changes nothing */
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, -0.0);
	CHECK_EQ(gpured_partial_combine(&b, &a), 0);
	CHECK_ROUND(b, -0.0);
	CHECK(b.count == 3);
	b = hand(0, 0, 2, 0); /* +0 elements */
	c = a;
	CHECK_EQ(gpured_partial_combine(&c, &b), 0);
	CHECK_ROUND(c, 0.0);
	CHECK_EQ(c.specials, 0);
	/* x and -x: an exact zero, +0 */
	a = hand(5, -3, 1, 0);
	b = hand(-5, -3, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK_ROUND(a, 0.0);
	CHECK(a.nlimbs == 0 && a.scale == 0 && a.count == 2);
	/* an empty partial is +0 */
	CHECK_EQ(gpured_partial_init(&a, GPURED_OP_SUM, GPURED_F64), 0);
	CHECK_ROUND(a, 0.0);

	/* Specials. */
	a = hand(1, 0, 1, GPURED_PARTIAL_PINF);
	CHECK_ROUND(a, INFINITY);
	b = hand(1, 0, 1, GPURED_PARTIAL_NINF);
	CHECK_ROUND(b, -INFINITY);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK(isnan(round_of(&a)));
	a = hand(1, 0, 1, GPURED_PARTIAL_NAN);
	CHECK(isnan(round_of(&a)));
	b = hand(0, 0, 1, GPURED_PARTIAL_NEGZERO);
	CHECK_EQ(gpured_partial_combine(&b, &a), 0);
	CHECK(isnan(round_of(&b)) && b.specials == GPURED_PARTIAL_NAN);

	/* Not valid: refused by round and combine, acc untouched. */
	a = hand(1, 0, 1, 0);
	b = hand(1, 0, 1, 8); /* unknown bit */
	c = a;
	double d;
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	CHECK_EQ(gpured_partial_combine(&c, &b), -EINVAL);
	CHECK(memcmp(&c, &a, sizeof(c)) == 0);
	b = hand(1, GPURED_PARTIAL_SCALE_MIN - 1, 1, 0);
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(1, GPURED_PARTIAL_SCALE_MAX + 1, 1, 0);
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(1, GPURED_PARTIAL_SCALE_MAX, 1, 0); /* 2^2175 */
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(-1, GPURED_PARTIAL_SCALE_MAX, 1, 0); /* -2^2175 fits */
	CHECK_EQ(gpured_partial_round(&b, &d), 0);
	CHECK(d == -INFINITY);
	b = hand(1, 0, 0, 0); /* a value without elements */
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(1, 0, 1, GPURED_PARTIAL_NEGZERO); /* all -0, not zero */
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(0, 0, 1, GPURED_PARTIAL_NEGZERO | GPURED_PARTIAL_PINF);
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(1, 0, 1, 0);
	b.nlimbs = GPURED_PARTIAL_LIMBS_MAX + 1;
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);
	b = hand(1, 0, 1, 0);
	b.op = GPURED_OP_MAX;
	CHECK_EQ(gpured_partial_round(&b, &d), -EINVAL);

	/* Hand-built limbs need not be canonical: sign words on top,
	 * zero words below; the result is. */
	a = hand(0, -128, 1, 0);
	a.nlimbs = 4;
	a.limbs[0] = 0;
	a.limbs[1] = 0;
	a.limbs[2] = UINT64_MAX - 1; /* -2 x 2^0 */
	a.limbs[3] = UINT64_MAX;
	CHECK_ROUND(a, -2.0);
	b = hand(0, 0, 0, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK(a.nlimbs == 1 && a.scale == 1 && a.limbs[0] == UINT64_MAX && a.limbs[1] == 0);
	CHECK_ROUND(a, -2.0);

	/* Range: the widest value 2^64 elements can make fits, twice that
	 * wide does not; the count cannot pass 2^64 - 1. */
	a = hand(1, 2112, UINT64_MAX / 2, 0);
	b = hand(-1, -2148, UINT64_MAX / 2, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0);
	CHECK(a.nlimbs == 67 && a.scale == -2148);
	CHECK_ROUND(a, INFINITY);
	b = hand(1, 0, 2, 0);
	c = a;
	CHECK_EQ(gpured_partial_combine(&c, &b), -ERANGE);
	CHECK(memcmp(&c, &a, sizeof(c)) == 0);
	a = hand(1, 2174, 1, 0);
	b = hand(1, 2174, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), -ERANGE);
	a = hand(-1, 2174, 1, 0);
	b = hand(-1, 2174, 1, 0);
	CHECK_EQ(gpured_partial_combine(&a, &b), 0); /* -2^2175 */
	CHECK_ROUND(a, -INFINITY);
}

/* ---- wire: malformed exact maps from a scripted server ---------------- */

typedef struct script_reply {
	const char *what;   /* words gpured_errmsg() must contain */
	int limbs_bytes;    /* -1: no "limbs"; -2: limbs a str */
	uint8_t limb_fill;
	int64_t scale;
	bool scale_float;   /* scale as a float */
	bool no_scale;
	uint64_t specials;
	int specials_type;  /* 0 uint, 1 negative int, 2 absent */
	bool exact_not_map; /* "exact": 7 */
	bool no_exact;
	double value;
	uint64_t count;
} script_reply;

static void write_reply(gr_buf *b, uint32_t id, const script_reply *s)
{
	CHECK(gr_mpw_array(b, 4) == 0);
	CHECK(gr_mpw_uint(b, 1) == 0);
	CHECK(gr_mpw_uint(b, id) == 0);
	CHECK(gr_mpw_nil(b) == 0);
	CHECK(gr_mpw_map(b, s->no_exact ? 2 : 3) == 0);
	CHECK(gr_mpw_cstr(b, "value") == 0);
	CHECK(gr_mpw_f64(b, s->value) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, s->count) == 0);
	if (s->no_exact)
		return;
	CHECK(gr_mpw_cstr(b, "exact") == 0);
	if (s->exact_not_map) {
		CHECK(gr_mpw_uint(b, 7) == 0);
		return;
	}
	unsigned n = (s->limbs_bytes != -1) + !s->no_scale + (s->specials_type != 2);
	CHECK(gr_mpw_map(b, n) == 0);
	if (s->limbs_bytes == -2) {
		CHECK(gr_mpw_cstr(b, "limbs") == 0);
		CHECK(gr_mpw_cstr(b, "01234567") == 0);
	} else if (s->limbs_bytes >= 0) {
		uint8_t bytes[1024];

		CHECK((size_t)s->limbs_bytes <= sizeof(bytes));
		memset(bytes, s->limb_fill, sizeof(bytes));
		CHECK(gr_mpw_cstr(b, "limbs") == 0);
		CHECK(gr_mpw_bin(b, bytes, (uint32_t)s->limbs_bytes) == 0);
	}
	if (!s->no_scale) {
		CHECK(gr_mpw_cstr(b, "scale") == 0);
		if (s->scale_float)
			CHECK(gr_mpw_f64(b, (double)s->scale) == 0);
		else
			CHECK(gr_mpw_int(b, s->scale) == 0);
	}
	if (s->specials_type != 2) {
		CHECK(gr_mpw_cstr(b, "specials") == 0);
		if (s->specials_type == 1)
			CHECK(gr_mpw_int(b, -1) == 0);
		else
			CHECK(gr_mpw_uint(b, s->specials) == 0);
	}
}

/* Serve one connection: read the request (msgid 1), answer s, then wait
 * for the client to close. */
static void serve_one(int lfd, const script_reply *s)
{
	int fd = accept(lfd, NULL, NULL);
	uint8_t in[4096];
	gr_buf out;

	CHECK(fd >= 0);
	/* the whole request: small, one read or a few */
	usleep(1000);
	CHECK(read(fd, in, sizeof(in)) > 0);
	gr_buf_init(&out);
	write_reply(&out, 1, s);
	CHECK(send(fd, out.data, out.len, MSG_NOSIGNAL) == (ssize_t)out.len);
	gr_buf_deinit(&out);
	while (read(fd, in, sizeof(in)) > 0)
		;
	close(fd);
}

static void test_wire(void)
{
	static const script_reply cases[] = {
		{ "no \"exact\"", .no_exact = true, .count = 1, .value = 1.0 },
		{ "not a map", .exact_not_map = true, .count = 1, .value = 1.0 },
		{ "without \"limbs\"", .limbs_bytes = -1, .count = 1, .value = 0.0 },
		{ "\"limbs\" is not a bin", .limbs_bytes = -2, .count = 1, .value = 0.0 },
		{ "without \"scale\"", .limbs_bytes = 8, .limb_fill = 1, .no_scale = true, .count = 1 },
		{ "\"scale\" is not an integer", .limbs_bytes = 0, .scale_float = true, .count = 1 },
		{ "without \"specials\"", .limbs_bytes = 0, .specials_type = 2, .count = 1 },
		{ "not an unsigned", .limbs_bytes = 0, .specials_type = 1, .count = 1 },
		{ "12 bytes, not a multiple of 8", .limbs_bytes = 12, .count = 1 },
		{ "69 words, more than 68", .limbs_bytes = 69 * 8, .count = 1 },
		{ "scale -2177 outside", .limbs_bytes = 0, .scale = -2177, .count = 1 },
		{ "scale 2176 outside", .limbs_bytes = 0, .scale = 2176, .count = 1 },
		{ "scale 9223372036854775807", .limbs_bytes = 0, .scale = INT64_MAX, .count = 1 },
		{ "unknown specials bits 0x8", .limbs_bytes = 0, .specials = 8, .count = 1 },
		{ "unknown specials bits 0x100000000", .limbs_bytes = 0, .specials = 1ull << 32,
		  .count = 1 },
		/* 0x0101...01 x 2^2170: past 2^2175 */
		{ "out of range", .limbs_bytes = 8, .limb_fill = 1, .scale = 2170, .count = 1,
		  .value = INFINITY },
		{ "no elements", .limbs_bytes = 8, .limb_fill = 1, .count = 0, .value = 0.0 },
		{ "no elements", .limbs_bytes = 0, .specials = 1, .count = 0, .value = NAN },
		{ "every element -0", .limbs_bytes = 8, .limb_fill = 1, .specials = 16, .count = 1 },
		{ "every element -0", .limbs_bytes = 0, .specials = 16 | 2, .count = 1,
		  .value = INFINITY },
		/* well-formed, but not the value beside it */
		{ "not to the value 0x1p+0", .limbs_bytes = 8,
		  .limb_fill = 1, .count = 1, .value = 1.0 },
		{ "rounds to -0x0p+0", .limbs_bytes = 0, .specials = 16, .count = 1, .value = 0.0 },
		{ "rounds to nan", .limbs_bytes = 0, .specials = 1, .count = 1, .value = 0.0 },
	};
	char dir[64], path[96];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd;
	pid_t pid;

	snprintf(dir, sizeof(dir), "%s/gpured-partial-XXXXXX", tmp_base());
	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(lfd, 4) == 0);

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			serve_one(lfd, &cases[i]);
		/* and one good reply: 3 x 2^-1, 1.5 */
		script_reply ok = { .limbs_bytes = 8, .limb_fill = 0, .count = 2, .value = 1.5 };
		int fd = accept(lfd, NULL, NULL);
		uint8_t in[4096];
		gr_buf out;

		CHECK(fd >= 0);
		usleep(1000);
		CHECK(read(fd, in, sizeof(in)) > 0);
		gr_buf_init(&out);
		write_reply(&out, 1, &ok);
		/* limbs of 8 zero bytes, patched: the word 3, scale -1 */
		uint8_t *p = memmem(out.data, out.len, "limbs", 5);
		CHECK(p && p[5] == 0xc4 && p[6] == 8);
		p[7] = 3;
		ok.scale = -1;
		uint8_t *q = memmem(out.data, out.len, "scale", 5);
		CHECK(q && q[5] == 0x00);
		q[5] = 0xff; /* fixint -1 */
		CHECK(send(fd, out.data, out.len, MSG_NOSIGNAL) == (ssize_t)out.len);
		while (read(fd, in, sizeof(in)) > 0)
			;
		_exit(0);
	}
	close(lfd);

	const double x[2] = { 1.0, 0.5 };
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gpured_t *g = NULL;
		gpured_partial p;

		CHECK_EQ(gpured_connect(path, &g), 0);
		gpured_set_timeout(g, 5000);
		int r = gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_F64, x, 2, &p);
		CHECK_MSG(r == -EPROTO, "case %zu (%s): %d %s", i, cases[i].what, r, gpured_errmsg(g));
		CHECK_MSG(strstr(gpured_errmsg(g), "malformed exact partial") ||
				  strstr(gpured_errmsg(g), "exact partial rounds"),
			  "case %zu: message '%s'", i, gpured_errmsg(g));
		CHECK_MSG(strstr(gpured_errmsg(g), cases[i].what), "case %zu: message '%s', want '%s'",
			  i, gpured_errmsg(g), cases[i].what);
		/* the connection is dead */
		CHECK_EQ(gpured_ping(g), -EPROTO);
		gpured_close(g);
	}
	{
		gpured_t *g = NULL;
		gpured_partial p;
		double d;

		CHECK_EQ(gpured_connect(path, &g), 0);
		gpured_set_timeout(g, 5000);
		int r = gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_F64, x, 2, &p);
		CHECK_MSG(r == 0, "%d %s", r, gpured_errmsg(g));
		CHECK(p.count == 2 && p.nlimbs == 1 && p.limbs[0] == 3 && p.scale == -1);
		CHECK(p.op == GPURED_OP_SUM && p.dtype == GPURED_F64 && p.specials == 0);
		CHECK_EQ(gpured_partial_round(&p, &d), 0);
		CHECK(d == 1.5);
		gpured_close(g);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "server status %d", status);
	unlink(path);
	rmdir(dir);
}

/* ---- daemon: random adversarial arrays --------------------------------- */

typedef struct daemon_proc {
	pid_t pid;
	char dir[64];
	char sock[96];
	char log[96];
} daemon_proc;

static daemon_proc the_daemon;

static void daemon_cleanup(void)
{
	if (the_daemon.pid > 0) {
		kill(the_daemon.pid, SIGKILL);
		waitpid(the_daemon.pid, NULL, 0);
		the_daemon.pid = 0;
	}
	if (the_daemon.dir[0]) {
		unlink(the_daemon.sock);
		unlink(the_daemon.log);
		rmdir(the_daemon.dir);
	}
}

static void daemon_start(daemon_proc *d, const char *gpured)
{
	const char *b = getenv("GPURED_TEST_BACKEND");

	snprintf(d->dir, sizeof(d->dir), "%s/gpured-partial-XXXXXX", tmp_base());
	CHECK(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/gpured.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/stderr.log", d->dir);
	d->pid = fork();
	CHECK(d->pid >= 0);
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(127);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		execl(gpured, gpured, "--socket", d->sock, "--backend", b && *b ? b : "cpu",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		gpured_t *g = NULL;
		int status;

		CHECK_MSG(waitpid(d->pid, &status, WNOHANG) == 0, "daemon exited (status %d); see %s",
			  status, d->log);
		if (gpured_connect(d->sock, &g) == 0) {
			gpured_close(g);
			return;
		}
		usleep(10000);
	}
	CHECK_MSG(false, "daemon did not accept on %s within 10 s", d->sock);
}

static uint64_t rnd(uint64_t *s)
{
	return check_rng(s);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
	return n ? rnd(s) % n : 0;
}

/*
 * The reference: an exact sum on a grid of 72 words whose bit 0 weighs
 * 2^-2176 (terms are multiples of 2^-2148 below 2^2048, and there are
 * fewer than 2^30 of them), written out as a hexadecimal float and rounded
 * by strtod(), which glibc rounds correctly, to nearest, ties to even.
 */
#define RW 72
#define RBASE 2176

static void ref_add(uint64_t *a, unsigned __int128 m, int exp2, bool neg)
{
	int b = exp2 + RBASE;
	uint64_t x[4] = { 0 };

	CHECK(b >= 0 && b / 64 + 4 <= RW);
	unsigned s = (unsigned)b % 64, w = (unsigned)b / 64;
	x[0] = (uint64_t)(m << s);
	x[1] = (uint64_t)((m << s) >> 64);
	x[2] = s ? (uint64_t)(m >> (128 - s)) : 0;
	uint64_t c = 0;
	for (unsigned k = w; k < RW; k++) {
		uint64_t d = k - w < 4 ? x[k - w] : 0, o = a[k];

		if (!neg) {
			uint64_t t = o + d, c1 = t < o;
			a[k] = t + c;
			c = c1 | (a[k] < t);
		} else {
			uint64_t t = o - d, c1 = o < d;
			a[k] = t - c;
			c = c1 | (t < c);
		}
	}
}

/* A finite non-zero x as m x 2^e, m < 2^53 odd. */
static uint64_t decompose(double x, int *ret_e)
{
	int e;
	double f = frexp(fabs(x), &e); /* [0.5, 1) */
	uint64_t m = (uint64_t)ldexp(f, 53);

	e -= 53;
	while (!(m & 1)) {
		m >>= 1;
		e++;
	}
	*ret_e = e;
	return m;
}

static double reference(gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	uint64_t a[RW] = { 0 };
	bool nan = false, pinf = false, ninf = false, allneg0 = n > 0;

	for (size_t i = 0; i < n; i++) {
		double x;

		if (dt == GPURED_F32) {
			float f;
			memcpy(&f, (const uint8_t *)data + 4 * i, 4);
			x = f;
		} else {
			memcpy(&x, (const uint8_t *)data + 8 * i, 8);
		}
		if (isnan(x)) {
			nan = true;
			allneg0 = false;
		} else if (isinf(x)) {
			if (op == GPURED_OP_SUMSQ || x > 0)
				pinf = true;
			else
				ninf = true;
			allneg0 = false;
		} else {
			if (!(x == 0 && signbit(x)))
				allneg0 = false;
			if (x == 0)
				continue;
			int e;
			uint64_t m = decompose(x, &e);
			if (op == GPURED_OP_SUM)
				ref_add(a, m, e, x < 0);
			else
				ref_add(a, (unsigned __int128)m * m, 2 * e, false);
		}
	}
	if (nan || (pinf && ninf))
		return NAN;
	if (pinf)
		return INFINITY;
	if (ninf)
		return -INFINITY;

	bool neg = a[RW - 1] >> 63;
	if (neg) {
		uint64_t c = 1;
		for (unsigned k = 0; k < RW; k++) {
			a[k] = ~a[k] + c;
			c = c && a[k] == 0;
		}
	}
	int top = RW - 1;
	while (top >= 0 && !a[top])
		top--;
	if (top < 0)
		return op == GPURED_OP_SUM && allneg0 ? -0.0 : 0.0;
	char hex[RW * 16 + 32], *p = hex;
	p += sprintf(p, "%s0x%" PRIx64, neg ? "-" : "", a[top]);
	for (int k = top - 1; k >= 0; k--)
		p += sprintf(p, "%016" PRIx64, a[k]);
	sprintf(p, "p-%d", RBASE);
	return strtod(hex, NULL);
}

/* ---- adversarial arrays ---- */

enum {
	GEN_WIDE,      /* magnitudes across the whole exponent range */
	GEN_CANCEL,    /* x and -x pairs, and a few others */
	GEN_TIE,       /* an exact sum that is a rounding tie (or just off one) */
	GEN_NEGZERO,   /* -0 only (sometimes one +0) */
	GEN_INF,       /* +-inf among finite values */
	GEN_NAN,       /* a NaN among others */
	GEN_SUBNORMAL, /* subnormals and the least normals */
	GEN_HUGE,      /* near the largest value: intermediate overflow */
	GEN_RUNS,      /* runs of identical values */
	GEN_N,
};

static double wide(uint64_t *s, gpured_dtype dt)
{
	uint64_t r = rnd(s);

	if (dt == GPURED_F32) {
		uint32_t u = (uint32_t)(r & 0x807fffffu) | (uint32_t)below(s, 255) << 23;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = (r & 0x800fffffffffffffull) | below(s, 2047) << 52;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

static double subnormal(uint64_t *s, gpured_dtype dt)
{
	uint64_t r = rnd(s);

	if (dt == GPURED_F32) {
		uint32_t u = (uint32_t)(r & 0x807fffffu) | (uint32_t)below(s, 2) << 23;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint64_t u = (r & 0x800fffffffffffffull) | below(s, 2) << 52;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* A random normal value of magnitude about 2^e. */
static double around(uint64_t *s, gpured_dtype dt, int e)
{
	double m = 1.0 + (double)(rnd(s) >> 11) * 0x1p-53;

	if (dt == GPURED_F32)
		return (float)ldexp(m, e);
	return ldexp(m, e);
}

static void shuffle(uint64_t *s, double *x, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = below(s, i);
		double t = x[i - 1];
		x[i - 1] = x[j];
		x[j] = t;
	}
}

/* n values of kind gen, as doubles representable in dt. */
static void generate(uint64_t *s, gpured_dtype dt, int gen, double *x, size_t n)
{
	bool f32 = dt == GPURED_F32;
	int emax = f32 ? 127 : 1023;
	size_t i = 0;

	switch (gen) {
	case GEN_WIDE:
		for (; i < n; i++)
			x[i] = below(s, 4) ? wide(s, dt) : around(s, dt, (int)below(s, 40) - 20);
		break;
	case GEN_CANCEL:
		for (; i + 1 < n; i += 2) {
			x[i] = below(s, 2) ? wide(s, dt) : around(s, dt, (int)below(s, 60) - 30);
			x[i + 1] = -x[i];
		}
		for (; i < n; i++)
			x[i] = around(s, dt, (int)below(s, 200) - 100);
		/* sometimes exactly zero */
		if (below(s, 3) == 0 && n % 2)
			x[n - 1] = 0.0;
		break;
	case GEN_TIE: {
		/* a + half an ulp of a (as a double) + pairs that cancel,
		 * and now and then a last bit that breaks the tie */
		int e = f32 ? (int)below(s, 100) - 50 : (int)below(s, 1800) - 900;
		double a = around(s, dt, e);
		if (below(s, 2))
			a = -a;
		if (n == 0)
			break;
		x[i++] = a;
		/* an f32 has a double's last bit even: one more element
		 * makes it odd, so that the tie rounds away from a */
		if (i < n && f32 && below(s, 2))
			x[i++] = copysign(ldexp(1.0, ilogb(a) - 52), a);
		if (i < n)
			x[i++] = (below(s, 2) ? 1 : -1) * ldexp(1.0, ilogb(a) - 53);
		if (i < n && below(s, 3) == 0)
			x[i++] = (below(s, 2) ? 1 : -1) * ldexp(1.0, ilogb(a) - (f32 ? 80 : 100));
		for (; i + 1 < n; i += 2) {
			x[i] = wide(s, dt);
			if (!isfinite(x[i]))
				x[i] = 1.0;
			x[i + 1] = -x[i];
		}
		for (; i < n; i++)
			x[i] = 0.0;
		break;
	}
	case GEN_NEGZERO:
		for (; i < n; i++)
			x[i] = -0.0;
		if (n && below(s, 4) == 0)
			x[below(s, n)] = 0.0;
		break;
	case GEN_INF:
		for (; i < n; i++)
			x[i] = wide(s, dt);
		for (unsigned k = 0, m = 1 + (unsigned)below(s, 3); n && k < m; k++)
			x[below(s, n)] = below(s, 2) ? INFINITY : -INFINITY;
		break;
	case GEN_NAN:
		for (; i < n; i++)
			x[i] = below(s, 8) ? wide(s, dt) : below(s, 2) ? INFINITY : -INFINITY;
		if (n)
			x[below(s, n)] = NAN;
		break;
	case GEN_SUBNORMAL:
		for (; i < n; i++)
			x[i] = subnormal(s, dt);
		break;
	case GEN_HUGE:
		/* (max/4, 1, -max/4, 2^-40) repeated, and values near the
		 * largest, mostly of one sign: finite or past the range */
		for (; i < n; i++) {
			switch (below(s, 5)) {
			case 0: x[i] = ldexp(1.0, emax - 1) * (i % 2 ? -1 : 1); break;
			case 1: x[i] = 1.0; break;
			case 2: x[i] = 0x1p-40; break;
			default:
				x[i] = (f32 ? (double)FLT_MAX : DBL_MAX) * (below(s, 6) ? 1 : -1);
				if (below(s, 2))
					x[i] = around(s, dt, emax - 1) * (below(s, 4) ? 1 : -1);
			}
		}
		break;
	case GEN_RUNS: {
		double v = wide(s, dt);
		for (; i < n; i++) {
			if (below(s, 50) == 0)
				v = below(s, 2) ? around(s, dt, (int)below(s, 20)) : wide(s, dt);
			x[i] = isfinite(v) ? v : 0.5;
		}
		break;
	}
	}
	if (gen != GEN_NEGZERO && gen != GEN_RUNS)
		shuffle(s, x, n);
}

static void store(gpured_dtype dt, const double *x, size_t n, void *out)
{
	for (size_t i = 0; i < n; i++) {
		if (dt == GPURED_F32) {
			float f = (float)x[i];
			memcpy((uint8_t *)out + 4 * i, &f, 4);
		} else {
			memcpy((uint8_t *)out + 8 * i, &x[i], 8);
		}
	}
}

static bool partial_equal(const gpured_partial *a, const gpured_partial *b)
{
	return a->op == b->op && a->dtype == b->dtype && a->count == b->count &&
	       a->scale == b->scale && a->specials == b->specials && a->nlimbs == b->nlimbs &&
	       memcmp(a->limbs, b->limbs, sizeof(a->limbs)) == 0;
}

typedef struct counts {
	unsigned arrays, pieces, by_region, pipelined, ties, negzero, nan, inf, overflow;
} counts;

/*
 * One array: whole, and in pieces reduced for partials (by data or from
 * region rg at byte offset base, one by one or pipelined), combined in
 * random order.
 */
static void one_array(gpured_t *g, gpured_region_t *rg, uint64_t *s, gpured_op op,
		      gpured_dtype dt, const void *data, size_t n, counts *cnt, const char *what)
{
	size_t esz = gpured_dtype_size(dt);
	gpured_value whole;
	gpured_partial pw, acc, acc2, parts[20];
	size_t cuts[21];
	unsigned k = 1 + (unsigned)below(s, 20), mode = (unsigned)below(s, 4);
	size_t base = 0;
	int r;

	r = gpured_reduce(g, op, dt, data, n, &whole);
	CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
	double want = reference(op, dt, data, n);
	CHECK_MSG(same(whole.v.f, want), "%s n=%zu: daemon %a, exact reference %a", what, n,
		  whole.v.f, want);
	r = gpured_reduce_partial(g, op, dt, data, n, &pw);
	CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
	CHECK(pw.count == n && pw.op == op && pw.dtype == dt);

	/* k pieces: k - 1 cuts anywhere, empty pieces allowed */
	cuts[0] = 0;
	cuts[k] = n;
	for (unsigned i = 1; i < k; i++)
		cuts[i] = below(s, n + 1);
	for (unsigned i = 1; i < k; i++)
		for (unsigned j = i; j > 1 && cuts[j - 1] > cuts[j]; j--) {
			size_t t = cuts[j];
			cuts[j] = cuts[j - 1];
			cuts[j - 1] = t;
		}

	if (rg && (mode & 1)) {
		base = below(s, 8);
		if (base + n * esz > gpured_region_size(rg))
			base = 0;
		CHECK(n * esz <= gpured_region_size(rg));
		if (n)
			memcpy((uint8_t *)gpured_region_data(rg) + base, data, n * esz);
		cnt->by_region++;
	}
	bool by_region = rg && (mode & 1), pipelined = mode & 2;
	if (pipelined) {
		uint32_t ids[20], extra = 0;

		for (unsigned i = 0; i < k; i++) {
			size_t m = cuts[i + 1] - cuts[i];

			if (by_region)
				r = gpured_region_submit_partial(g, rg, op, dt, base + cuts[i] * esz, m,
								 &ids[i]);
			else
				r = gpured_submit_partial(g, op, dt, (const uint8_t *)data + cuts[i] * esz,
							  m, &ids[i]);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
			/* a request without a partial in between, for gpured_wait() */
			if (i == k / 2)
				CHECK_EQ(gpured_submit(g, op, dt, data, n, &extra), 0);
		}
		/* collected in the order they come; the other one stays */
		bool got[20] = { false };
		for (unsigned i = 0; i < k; i++) {
			uint32_t id = 0;
			gpured_partial p;
			unsigned j;

			r = gpured_wait_partial(g, &id, &p);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
			for (j = 0; j < k && ids[j] != id; j++)
				;
			CHECK_MSG(j < k && !got[j], "%s: wait_partial gave id %u", what, id);
			got[j] = true;
			parts[j] = p;
		}
		uint32_t id = 0;
		CHECK_EQ(gpured_wait_partial(g, &id, &acc), -ECHILD);
		gpured_value v;
		CHECK_EQ(gpured_outstanding(g), 1);
		CHECK_EQ(gpured_wait(g, &id, &v), 0);
		CHECK(id == extra && same(v.v.f, whole.v.f));
		cnt->pipelined++;
	} else {
		for (unsigned i = 0; i < k; i++) {
			size_t m = cuts[i + 1] - cuts[i];

			if (by_region)
				r = gpured_region_reduce_partial(g, rg, op, dt, base + cuts[i] * esz, m,
								 &parts[i]);
			else
				r = gpured_reduce_partial(g, op, dt, (const uint8_t *)data + cuts[i] * esz,
							  m, &parts[i]);
			CHECK_MSG(r == 0, "%s: %s", what, gpured_errmsg(g));
		}
	}
	for (unsigned i = 0; i < k; i++)
		CHECK(parts[i].count == cuts[i + 1] - cuts[i]);

	/* in a random order, and in the reverse of it */
	unsigned order[20];
	for (unsigned i = 0; i < k; i++)
		order[i] = i;
	for (unsigned i = k; i > 1; i--) {
		unsigned j = (unsigned)below(s, i), t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	CHECK_EQ(gpured_partial_init(&acc, op, dt), 0);
	CHECK_EQ(gpured_partial_init(&acc2, op, dt), 0);
	for (unsigned i = 0; i < k; i++) {
		CHECK_EQ(gpured_partial_combine(&acc, &parts[order[i]]), 0);
		CHECK_EQ(gpured_partial_combine(&acc2, &parts[order[k - 1 - i]]), 0);
	}
	double got;
	CHECK_EQ(gpured_partial_round(&acc, &got), 0);
	CHECK_MSG(same(got, whole.v.f), "%s n=%zu in %u pieces (mode %u): combined %a, whole %a",
		  what, n, k, mode, got, whole.v.f);
	CHECK_MSG(partial_equal(&acc, &pw) && partial_equal(&acc2, &pw),
		  "%s n=%zu in %u pieces: the combined partial differs from the whole's", what, n, k);
	CHECK_EQ(gpured_partial_round(&pw, &got), 0);
	CHECK(same(got, whole.v.f));

	cnt->arrays++;
	cnt->pieces += k;
	if (isnan(want))
		cnt->nan++;
	else if (isinf(want))
		cnt->inf++;
	else if (want == 0 && signbit(want))
		cnt->negzero++;
}

static void test_daemon(const char *gpured)
{
	static const gpured_op ops[] = { GPURED_OP_SUM, GPURED_OP_SUMSQ };
	static const gpured_dtype dts[] = { GPURED_F32, GPURED_F64 };
	static const char *const gens[] = { "wide", "cancel", "tie", "-0", "inf", "nan",
					    "subnormal", "huge", "runs" };
	const size_t big = 600000; /* past a 4 MiB chunk as f64 */
	uint64_t seed = 0x5eed1234abcdull;
	counts cnt = { 0 };
	gpured_region_t *rg = NULL;
	gpured_t *g = NULL;
	double *x = malloc(big * sizeof(double));
	uint8_t *buf = malloc(big * sizeof(double));

	CHECK(x && buf);
	atexit(daemon_cleanup);
	daemon_start(&the_daemon, gpured);
	CHECK_EQ(gpured_connect(the_daemon.sock, &g), 0);
	CHECK_EQ(gpured_region_new(g, big * sizeof(double) + 8, &rg), 0);

	/* Partials only of float sums and sumsq: nothing sent otherwise. */
	{
		gpured_partial p;
		uint32_t id;
		int64_t ones[2] = { 1, 1 };
		gpured_value v;

		CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_MIN, GPURED_F64, x, 0, &p), -EINVAL);
		CHECK_EQ(gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_I64, ones, 2, &p), -EINVAL);
		CHECK_EQ(gpured_submit_region_partial(g, gpured_region_id(rg), GPURED_OP_MAX, GPURED_F32,
						      0, 1, &id), -EINVAL);
		CHECK_EQ(gpured_outstanding(g), 0);
		/* a plain request is not collected as a partial, and stays */
		CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, ones, 2, &id), 0);
		CHECK_EQ(gpured_wait_id_partial(g, id, &p), -EINVAL);
		uint32_t none = 7;
		CHECK_EQ(gpured_wait_partial(g, &none, &p), -ECHILD);
		CHECK(none == 0);
		CHECK_EQ(gpured_wait_id(g, id, &v), 0);
		CHECK(v.v.i == 2);
		CHECK_EQ(gpured_wait_id_partial(g, id, &p), -ESRCH);
		/* the daemon's errors come back as for any request */
		CHECK_EQ(gpured_reduce_region_partial(g, 999, GPURED_OP_SUM, GPURED_F32, 0, 1, &p),
			 -EINVAL);
		CHECK_EQ(gpured_reduce_region_partial(g, gpured_region_id(rg), GPURED_OP_SUM,
						      GPURED_F64, 8, big + 1, &p), -EINVAL);
		CHECK_EQ(gpured_ping(g), 0);
		/* and a partial request collected by gpured_wait_id() is its value */
		double three[3] = { 1.0, 0x1p-53, 0x1p-53 };
		CHECK_EQ(gpured_submit_partial(g, GPURED_OP_SUM, GPURED_F64, three, 3, &id), 0);
		CHECK_EQ(gpured_wait_id(g, id, &v), 0);
		CHECK(v.v.f == 1.0 + 0x1p-52 && v.count == 3);
	}

	/* The issue's own cases: (max/4, 1, -max/4, 2^-40) x 50 is
	 * 50.000000000045475; an array and its negation sum to 0. */
	for (size_t i = 0; i < 200; i += 4) {
		x[i] = DBL_MAX / 4;
		x[i + 1] = 1;
		x[i + 2] = -DBL_MAX / 4;
		x[i + 3] = 0x1p-40;
	}
	store(GPURED_F64, x, 200, buf);
	one_array(g, rg, &seed, GPURED_OP_SUM, GPURED_F64, buf, 200, &cnt, "issue f64");
	CHECK(reference(GPURED_OP_SUM, GPURED_F64, buf, 200) == 50.0 + 50 * 0x1p-40);

	for (size_t a = 0; a < 2 * 9 * 2 * 12; a++) {
		gpured_op op = ops[a % 2];
		gpured_dtype dt = dts[(a / 2) % 2];
		int gen = (int)((a / 4) % GEN_N);
		size_t n;
		char what[64];

		switch (below(&seed, 8)) {
		case 0: n = below(&seed, 4); break;
		case 1: n = below(&seed, 40); break;
		case 2: n = 32768 + below(&seed, 3) - 1; break;
		default: n = below(&seed, 3000); break;
		}
		if (a % 97 == 5)
			n = big - below(&seed, 1000);
		generate(&seed, dt, gen, x, n);
		store(dt, x, n, buf);
		snprintf(what, sizeof(what), "%s %s %s #%zu", gpured_op_name(op),
			 gpured_dtype_name(dt), gens[gen], a);
		one_array(g, rg, &seed, op, dt, buf, n, &cnt, what);
		if (gen == GEN_TIE)
			cnt.ties++;
	}
	printf("%u arrays in %u pieces (%u from a region, %u pipelined): %u tie cases, "
	       "%u -0, %u NaN, %u infinite results\n",
	       cnt.arrays, cnt.pieces, cnt.by_region, cnt.pipelined, cnt.ties, cnt.negzero, cnt.nan,
	       cnt.inf);
	CHECK(cnt.negzero > 0 && cnt.nan > 0 && cnt.inf > 0 && cnt.by_region > 0 && cnt.pipelined > 0);

	CHECK_EQ(gpured_region_free(g, rg), 0);
	gpured_close(g);
	free(x);
	free(buf);
	kill(the_daemon.pid, SIGTERM);
	int status;
	CHECK(waitpid(the_daemon.pid, &status, 0) == the_daemon.pid);
	the_daemon.pid = 0;
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon status %d", status);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_DFL);
	if (argc == 2 && strcmp(argv[1], "api") == 0) {
		test_api();
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "wire") == 0) {
		test_wire();
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "daemon") == 0) {
		test_daemon(argv[2]);
		return 0;
	}
	fprintf(stderr, "usage: %s api | wire | daemon GPURED\n", argv[0]);
	return 2;
}
