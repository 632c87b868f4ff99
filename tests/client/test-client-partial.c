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
 *
 * Here: api and wire; daemon is client-partial-daemon.c's.
 */
#include <errno.h>
#include <float.h>
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
#include <unistd.h>

#include "client/gpured.h"
#include "proto/mp.h"
#include "tests/check.h"
#include "tests/client/test-client-partial.h"

const char *tmp_base(void)
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
bool same(double a, double b)
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
