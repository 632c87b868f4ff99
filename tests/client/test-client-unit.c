/*
 * Pieces of the client that need no daemon: socket path resolution, error
 * mapping, names, gpuredctl's number parsing and printing, its segments'
 * offsets and lines, its progress line and reading, and what top computes
 * from two snapshots.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "client/ctl-input.h"
#include "client/ctl-progress.h"
#include "client/ctl-segments.h"
#include "client/ctl-top.h"
#include "client/gpured.h"

static void test_socket_path(void)
{
	char buf[200], small[8], longp[300];

	setenv("GPURED_SOCKET", "/tmp/from-env.sock", 1);
	setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);

	/* An explicit path wins over everything. */
	CHECK_EQ(gpured_socket_path("/x/y.sock", buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/x/y.sock") == 0);

	CHECK_EQ(gpured_socket_path(NULL, buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/tmp/from-env.sock") == 0);

	/* An empty $GPURED_SOCKET counts as unset. */
	setenv("GPURED_SOCKET", "", 1);
	CHECK_EQ(gpured_socket_path(NULL, buf, sizeof(buf)), 0);
	if (geteuid() == 0)
		CHECK(strcmp(buf, "/run/gpured.sock") == 0);
	else
		CHECK(strcmp(buf, "/run/user/1234/gpured.sock") == 0);

	unsetenv("GPURED_SOCKET");
	unsetenv("XDG_RUNTIME_DIR");
	CHECK_EQ(gpured_socket_path(NULL, buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/run/gpured.sock") == 0);

	setenv("XDG_RUNTIME_DIR", "", 1);
	CHECK_EQ(gpured_socket_path(NULL, buf, sizeof(buf)), 0);
	CHECK(strcmp(buf, "/run/gpured.sock") == 0);

	CHECK_EQ(gpured_socket_path("/a/long/path", small, sizeof(small)), -ENAMETOOLONG);
	/* Longer than a sockaddr_un can hold, however large the buffer. */
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	CHECK_EQ(gpured_socket_path(longp, buf, sizeof(buf)), -ENAMETOOLONG);

	gpured_t *g = (gpured_t *)&buf; /* must not be touched */
	CHECK_EQ(gpured_connect(longp, &g), -ENAMETOOLONG);
	CHECK(g == (gpured_t *)&buf);
}

static void test_connect_errors(void)
{
	char dir[] = "/tmp/gpured-unit-XXXXXX", path[128];
	gpured_t *g = NULL;

	CHECK(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/none.sock", dir);
	CHECK_EQ(gpured_connect(path, &g), -ENOENT);
	CHECK(g == NULL);
	rmdir(dir);
	gpured_close(NULL);
}

static void test_errors(void)
{
	CHECK_EQ(gpured_errno_from_code("invalid_params"), -EINVAL);
	CHECK_EQ(gpured_errno_from_code("too_large"), -E2BIG);
	CHECK_EQ(gpured_errno_from_code("empty"), -ENODATA);
	CHECK_EQ(gpured_errno_from_code("busy"), -EBUSY);
	CHECK_EQ(gpured_errno_from_code("unknown_method"), -ENOSYS);
	CHECK_EQ(gpured_errno_from_code("invalid_request"), -EPROTO);
	CHECK_EQ(gpured_errno_from_code("internal"), -EIO);
	/* Codes from a newer server still fail, as an I/O error. */
	CHECK_EQ(gpured_errno_from_code("no_such_code"), -EIO);
	CHECK_EQ(gpured_errno_from_code("ok"), -EIO);
	CHECK_EQ(gpured_errno_from_code(NULL), -EIO);

	CHECK(strcmp(gpured_strerror(-ENODATA), "No elements to reduce") == 0);
	CHECK(strcmp(gpured_strerror(-ENOENT), "No such file or directory") == 0);
	CHECK(gpured_strerror(-12345) != NULL);
}

static void test_names(void)
{
	static const char *const ops[] = { "sum", "min", "max", "sumsq", "argmin", "argmax" };
	static const char *const dts[] = { "i32",    "i64",    "u32", "u64", "f32", "f64", "f16",
					   "bf16",   "f8e4m3", "f8e5m2", "i8", "u8",  "i16", "u16" };
	static const size_t sizes[] = { 4, 8, 4, 8, 4, 8, 2, 2, 1, 1, 1, 1, 2, 2 };
	gpured_op op;
	gpured_dtype dt;

	for (int i = 0; i < 6; i++) {
		CHECK_EQ(gpured_op_parse(ops[i], &op), 0);
		CHECK_EQ(op, i);
		CHECK(strcmp(gpured_op_name(op), ops[i]) == 0);
	}
	for (int i = 0; i < 14; i++) {
		CHECK_EQ(gpured_dtype_parse(dts[i], &dt), 0);
		CHECK_EQ(dt, i);
		CHECK(strcmp(gpured_dtype_name(dt), dts[i]) == 0);
		CHECK_EQ(gpured_dtype_size(dt), sizes[i]);
	}
	CHECK_EQ(gpured_op_parse("Sum", &op), -EINVAL);
	CHECK_EQ(gpured_op_parse("sumsq2", &op), -EINVAL);
	CHECK_EQ(gpured_dtype_parse("f8", &dt), -EINVAL);
	CHECK_EQ(gpured_dtype_parse("F16", &dt), -EINVAL);
	CHECK_EQ(gpured_dtype_parse("", &dt), -EINVAL);
	CHECK_EQ(gpured_op_parse("argmed", &op), -EINVAL);
	CHECK(gpured_op_name((gpured_op)7) == NULL);
	CHECK(gpured_dtype_name((gpured_dtype)14) == NULL);
	CHECK_EQ(gpured_dtype_size((gpured_dtype)14), 0);

	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_I32), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MIN, GPURED_I64), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MAX, GPURED_U32), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_ARGMIN, GPURED_I32), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_ARGMAX, GPURED_U64), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_ARGMAX, GPURED_F32), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_U64), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_F32), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUMSQ, GPURED_I32), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUMSQ, GPURED_U64), GPURED_KIND_F64);
	/* the narrow dtypes' results are their widened dtypes' */
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_I8), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MIN, GPURED_I16), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_U8), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_ARGMAX, GPURED_U16), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUMSQ, GPURED_U16), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_F16), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MAX, GPURED_BF16), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MIN, GPURED_F8E4M3), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_ARGMIN, GPURED_F8E5M2), GPURED_KIND_F64);

	gpured_value v = { .kind = GPURED_KIND_I64, .v.i = -7 };
	CHECK(gpured_value_as_double(&v) == -7.0);
	v = (gpured_value){ .kind = GPURED_KIND_U64, .v.u = 1ull << 40 };
	CHECK(gpured_value_as_double(&v) == 1099511627776.0);
}

static void test_parse_number(void)
{
	union {
		int32_t i32;
		int64_t i64;
		uint32_t u32;
		uint64_t u64;
		float f32;
		double f64;
	} u;

#define P(s, dt) ctl_input_parse_number(s, strlen(s), dt, &u)
	CHECK_EQ(P("0", GPURED_I32), 0);
	CHECK_EQ(u.i32, 0);
	CHECK_EQ(P("-2147483648", GPURED_I32), 0);
	CHECK_EQ(u.i32, INT32_MIN);
	CHECK_EQ(P("2147483647", GPURED_I32), 0);
	CHECK_EQ(u.i32, INT32_MAX);
	CHECK_EQ(P("+17", GPURED_I32), 0);
	CHECK_EQ(u.i32, 17);
	CHECK_EQ(P("2147483648", GPURED_I32), -ERANGE);
	CHECK_EQ(P("-2147483649", GPURED_I32), -ERANGE);
	CHECK_EQ(P("-9223372036854775808", GPURED_I64), 0);
	CHECK(u.i64 == INT64_MIN);
	CHECK_EQ(P("9223372036854775807", GPURED_I64), 0);
	CHECK(u.i64 == INT64_MAX);
	CHECK_EQ(P("9223372036854775808", GPURED_I64), -ERANGE);
	CHECK_EQ(P("-9223372036854775809", GPURED_I64), -ERANGE);
	CHECK_EQ(P("99999999999999999999999", GPURED_I64), -ERANGE);
	CHECK_EQ(P("4294967295", GPURED_U32), 0);
	CHECK(u.u32 == UINT32_MAX);
	CHECK_EQ(P("4294967296", GPURED_U32), -ERANGE);
	CHECK_EQ(P("18446744073709551615", GPURED_U64), 0);
	CHECK(u.u64 == UINT64_MAX);
	CHECK_EQ(P("18446744073709551616", GPURED_U64), -ERANGE);
	CHECK_EQ(P("-1", GPURED_U64), -ERANGE);
	CHECK_EQ(P("-0", GPURED_U32), 0);
	CHECK_EQ(u.u32, 0);

	/* Not integers at all: -EINVAL, not -ERANGE. */
	CHECK_EQ(P("1.5", GPURED_I32), -EINVAL);
	CHECK_EQ(P("1e3", GPURED_I64), -EINVAL);
	CHECK_EQ(P("0x10", GPURED_U32), -EINVAL);
	CHECK_EQ(P("-", GPURED_I32), -EINVAL);
	CHECK_EQ(P("+", GPURED_U32), -EINVAL);
	CHECK_EQ(P("", GPURED_I32), -EINVAL);
	CHECK_EQ(P("12a", GPURED_I32), -EINVAL);
	CHECK_EQ(P("99999999999999999999999x", GPURED_I64), -EINVAL);
	CHECK_EQ(P("--1", GPURED_I64), -EINVAL);

	CHECK_EQ(P("0.1", GPURED_F64), 0);
	CHECK(u.f64 == 0.1);
	CHECK_EQ(P("0.1", GPURED_F32), 0);
	CHECK(u.f32 == 0.1f);
	CHECK_EQ(P("-1.5e-3", GPURED_F64), 0);
	CHECK(u.f64 == -1.5e-3);
	CHECK_EQ(P("7", GPURED_F32), 0);
	CHECK(u.f32 == 7.0f);
	CHECK_EQ(P("inf", GPURED_F64), 0);
	CHECK(isinf(u.f64) && u.f64 > 0);
	CHECK_EQ(P("-nan", GPURED_F32), 0);
	CHECK(isnan(u.f32));
	CHECK_EQ(P("1e39", GPURED_F32), -ERANGE);
	CHECK_EQ(P("1e309", GPURED_F64), -ERANGE);
	CHECK_EQ(P("1e38", GPURED_F32), 0);
	/* Subnormal results are the nearest value, not errors. */
	CHECK_EQ(P("1e-40", GPURED_F32), 0);
	CHECK(u.f32 > 0);
	CHECK_EQ(P("1.0.0", GPURED_F64), -EINVAL);
	CHECK_EQ(P("abc", GPURED_F64), -EINVAL);
	CHECK_EQ(P("1,5", GPURED_F64), -EINVAL);
	CHECK_EQ(P("", GPURED_F64), -EINVAL);
#undef P

	/* The token is bounded by len, not by a NUL. */
	CHECK_EQ(ctl_input_parse_number("12345", 2, GPURED_I32, &u), 0);
	CHECK_EQ(u.i32, 12);
	CHECK_EQ(ctl_input_parse_number("2.5xyz", 3, GPURED_F64, &u), 0);
	CHECK(u.f64 == 2.5);
}

static void test_parse_text(void)
{
	const char *text = "  1 2\t3\n\n-4   5\r\n";
	ctl_input_error e;
	void *data = NULL;
	size_t n = 0;

	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_I64, &data, &n, &e), 0);
	CHECK_EQ(n, 5);
	int64_t *x = data;
	CHECK(x[0] == 1 && x[1] == 2 && x[2] == 3 && x[3] == -4 && x[4] == 5);
	free(data);

	CHECK_EQ(ctl_input_parse_text("", 0, GPURED_F32, &data, &n, &e), 0);
	CHECK_EQ(n, 0);
	free(data);
	CHECK_EQ(ctl_input_parse_text(" \n\t ", 4, GPURED_F32, &data, &n, &e), 0);
	CHECK_EQ(n, 0);
	free(data);

	/* The bad token, its line and column, and its element number. */
	text = "1.5 2\n3 x4 5";
	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_F64, &data, &n, &e), -EINVAL);
	CHECK_EQ(e.line, 2);
	CHECK_EQ(e.column, 3);
	CHECK_EQ(e.index, 3);
	CHECK(strcmp(e.token, "x4") == 0);

	text = "1 2 300";
	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_U32, &data, &n, &e), 0);
	free(data);
	text = "1 -2";
	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_U32, &data, &n, &e), -ERANGE);
	CHECK_EQ(e.index, 1);
	CHECK(strcmp(e.token, "-2") == 0);

	/* A long token is named, shortened. */
	char big[200];
	memset(big, '7', sizeof(big));
	big[150] = 'z';
	CHECK_EQ(ctl_input_parse_text(big, sizeof(big), GPURED_I64, &data, &n, &e), -EINVAL);
	CHECK(strlen(e.token) == sizeof(e.token) - 1);
	CHECK(strcmp(e.token + strlen(e.token) - 3, "...") == 0);

	/* Many elements: the array grows (and stays linear). */
	size_t count = 300000, len = 0;
	char *t = malloc(count * 8);
	CHECK(t);
	for (size_t i = 0; i < count; i++)
		len += (size_t)sprintf(t + len, "%zu ", i % 1000);
	CHECK_EQ(ctl_input_parse_text(t, len, GPURED_I32, &data, &n, &e), 0);
	CHECK_EQ(n, count);
	int64_t s = 0;
	for (size_t i = 0; i < n; i++)
		s += ((int32_t *)data)[i];
	CHECK_EQ(s, 300LL * 499500);
	free(data);
	free(t);
}

static void test_format(void)
{
	char buf[64];
	gpured_value v = { .kind = GPURED_KIND_I64, .v.i = INT64_MIN };

	ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(strcmp(buf, "-9223372036854775808") == 0);
	v = (gpured_value){ .kind = GPURED_KIND_U64, .v.u = UINT64_MAX };
	ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(strcmp(buf, "18446744073709551615") == 0);
	v = (gpured_value){ .kind = GPURED_KIND_F64, .v.f = 0.1 };
	ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(strtod(buf, NULL) == 0.1);
	v.v.f = 1.0 / 3.0;
	ctl_input_format_value(&v, 1, buf, sizeof(buf));
	CHECK(strtod(buf, NULL) == 1.0 / 3.0);
	v.v.f = 3;
	ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(strcmp(buf, "3") == 0);
	v.v.f = INFINITY;
	ctl_input_format_value(&v, 0, buf, sizeof(buf));
	CHECK(strcmp(buf, "inf") == 0);
	ctl_input_format_value(&v, 1, buf, sizeof(buf));
	CHECK(strcmp(buf, "null") == 0);
}

/* gpuredctl's offsets: rows of a length, and a file's, checked */
static void test_segment_offsets(void)
{
	uint64_t *o = NULL;
	size_t k = 99;
	char why[160];

	CHECK_EQ(ctl_segments_rows(10, 4, &o, &k), 0);
	CHECK(k == 3 && o[0] == 0 && o[1] == 4 && o[2] == 8 && o[3] == 10);
	free(o);
	CHECK_EQ(ctl_segments_rows(9, 3, &o, &k), 0);
	CHECK(k == 3 && o[2] == 6 && o[3] == 9);
	free(o);
	CHECK_EQ(ctl_segments_rows(5, 100, &o, &k), 0);
	CHECK(k == 1 && o[0] == 0 && o[1] == 5);
	free(o);
	CHECK_EQ(ctl_segments_rows(0, 3, &o, &k), 0);
	CHECK(k == 0 && o == NULL);
	CHECK_EQ(ctl_segments_rows(5, 0, &o, &k), -EINVAL);

	const uint8_t good[24] = { 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x01, 0, 0, 0, 0, 0, 0,
				   0x02, 0x01, 0, 0, 0, 0, 0, 0 };
	CHECK_EQ(ctl_segments_parse(good, 24, 258, &o, &k, why, sizeof(why)), 0);
	CHECK(k == 2 && o[0] == 0 && o[1] == 257 && o[2] == 258);
	free(o);
	CHECK_EQ(ctl_segments_parse(good, 24, 259, &o, &k, why, sizeof(why)), -EINVAL);
	CHECK_MSG(strstr(why, "last offset is 258, not the 259"), "%s", why);
	CHECK_EQ(ctl_segments_parse(good, 20, 258, &o, &k, why, sizeof(why)), -EINVAL);
	CHECK_MSG(strstr(why, "20 bytes"), "%s", why);
	CHECK_EQ(ctl_segments_parse(good, 8, 0, &o, &k, why, sizeof(why)), -EINVAL);
	CHECK_EQ(ctl_segments_parse(good + 8, 16, 258, &o, &k, why, sizeof(why)), -EINVAL);
	CHECK_MSG(strstr(why, "first offset is 257"), "%s", why);
	const uint64_t down[4] = { 0, 5, 4, 9 };
	CHECK_EQ(ctl_segments_parse(down, 32, 9, &o, &k, why, sizeof(why)), -EINVAL);
	CHECK_MSG(strstr(why, "offset 2 is 4, below the one before it (5)"), "%s", why);
	const uint64_t empties[4] = { 0, 0, 0, 0 };
	CHECK_EQ(ctl_segments_parse(empties, 32, 0, &o, &k, why, sizeof(why)), 0);
	CHECK(k == 3);
	free(o);
}

/* One line per segment, each as gpuredctl prints one result. */
static void test_segment_print(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const uint64_t o[4] = { 0, 2, 2, 5 };
	const gpured_number sums[3] = { { .i = -3 }, { .i = 0 }, { .i = 12 } };
	const gpured_arg_record args[3] = {
		{ { .f = 0.5 }, 1 }, { { .f = INFINITY }, GPURED_SEGMENT_NO_INDEX }, { { .f = -2 }, 0 },
	};
	const gpured_moments_record m[1] = { { { .u = 7 }, { .u = 1 }, { .u = 6 }, 3.5, 12.5 } };

	CHECK(f);
	ctl_segments_print(f, GPURED_OP_SUM, GPURED_I32, o, 3, sums, false);
	ctl_segments_print(f, GPURED_OP_ARGMIN, GPURED_F32, o, 3, args, false);
	ctl_segments_print(f, GPURED_OP_ARGMIN, GPURED_F32, o, 3, args, true);
	ctl_segments_print(f, GPURED_OP_MOMENTS, GPURED_U64, (uint64_t[]){ 0, 2 }, 1, m, false);
	ctl_segments_print(f, GPURED_OP_MOMENTS, GPURED_U64, (uint64_t[]){ 0, 2 }, 1, m, true);
	CHECK(fclose(f) == 0);
	CHECK_MSG(strcmp(buf, "-3\n0\n12\n"
			      "0.5 1\ninf -1\n-2 0\n"
			      "{\"value\":0.5,\"index\":1,\"count\":2}\n"
			      "{\"value\":null,\"index\":null,\"count\":0}\n"
			      "{\"value\":-2,\"index\":0,\"count\":3}\n"
			      "2 7 1 6 3.5 12.5\n"
			      "{\"count\":2,\"sum\":7,\"min\":1,\"max\":6,\"mean\":3.5,\"var\":12.5}\n") == 0,
		  "%s", buf);
	free(buf);
}

static void test_progress_format(void)
{
	char buf[256], b[32];
	int n;

	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 0), "0 B") == 0);
	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 999), "999 B") == 0);
	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 1500), "1.50 kB") == 0);
	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 12.34e6), "12.3 MB") == 0);
	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 999.9e6), "1.00 GB") == 0);
	CHECK(strcmp(ctl_progress_bytes(b, sizeof(b), 4e9), "4.00 GB") == 0);

	/* A known total: done, total, percent, a bar, the rate, the time left. */
	n = ctl_progress_format(buf, sizeof(buf), "x.f32", 1000000000, 4000000000u, 2.0, 100);
	CHECK_MSG(n == 99 && (size_t)n == strlen(buf), "%d: '%s'", n, buf);
	CHECK_MSG(strstr(buf, "reading x.f32  1.00 GB of 4.00 GB  25% [") == buf, "'%s'", buf);
	CHECK_MSG(strstr(buf, "] 500 MB/s  0:06 left"), "'%s'", buf);
	CHECK_MSG(strstr(buf, "=>"), "'%s'", buf);

	/* Unknown total: bytes and the rate, no bar. */
	n = ctl_progress_format(buf, sizeof(buf), "standard input", 3000000, 0, 0.5, 80);
	CHECK_MSG(strcmp(buf, "reading standard input  3.00 MB  6.00 MB/s") == 0, "'%s'", buf);

	/* A long name by its end; a name's control bytes never reach the
	 * terminal. */
	ctl_progress_format(buf, sizeof(buf), "/very/long/path/of/many/directories/down/to/data.f32",
			    1, 0, 1, 200);
	CHECK_MSG(strcmp(buf, "reading .../of/many/directories/down/to/data.f32  1 B  1 B/s") == 0,
		  "'%s'", buf);
	ctl_progress_format(buf, sizeof(buf), "a\033[2Jb\n", 1, 0, 1, 200);
	CHECK_MSG(strcmp(buf, "reading a?[2Jb?  1 B  1 B/s") == 0, "'%s'", buf);

	/* A narrow terminal: no bar, and never its last column. */
	n = ctl_progress_format(buf, sizeof(buf), "x.f32", 1000000000, 4000000000u, 2.0, 30);
	CHECK_MSG(n == 29 && strlen(buf) == 29 && !strchr(buf, '['), "%d: '%s'", n, buf);
}

static void test_read_all(void)
{
	char path[] = "/tmp/test-client-unit-XXXXXX", *data = NULL;
	static char big[300000];
	ctl_progress p;
	size_t len = 0;
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	unlink(path);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('0' + i % 10);
	CHECK_EQ(write(fd, big, sizeof(big)), (long long)sizeof(big));
	/* what is left of a file read from the middle */
	CHECK_EQ(lseek(fd, 1000, SEEK_SET), 1000);
	CHECK_EQ(ctl_input_remaining(fd), sizeof(big) - 1000);
	/* off where standard error is no terminal, and with enabled false */
	ctl_progress_init(&p, fd, true, "x", 0);
	CHECK_EQ(p.fd, -1);
	ctl_progress_init(&p, -1, false, "x", 0);
	CHECK_EQ(ctl_input_read_all(fd, ctl_input_remaining(fd), &p, &data, &len), 0);
	CHECK_EQ(len, sizeof(big) - 1000);
	CHECK(memcmp(data, big + 1000, len) == 0);
	free(data);
	/* without a hint it grows */
	CHECK_EQ(lseek(fd, 0, SEEK_SET), 0);
	CHECK_EQ(ctl_input_read_all(fd, 0, NULL, &data, &len), 0);
	CHECK_EQ(len, sizeof(big));
	CHECK(memcmp(data, big, len) == 0);
	free(data);
	close(fd);
	/* a pipe: size unknown */
	int pp[2];
	CHECK(pipe(pp) == 0);
	CHECK_EQ(ctl_input_remaining(pp[0]), 0);
	close(pp[0]);
	close(pp[1]);
}

/* A histogram with bounds 10, 100, 1000 us. */
static void hist(gpured_snapshot_t *s, uint64_t c10, uint64_t c100, uint64_t c1000, uint64_t count)
{
	s->nbuckets = 3;
	s->le_us[0] = 10;
	s->le_us[1] = 100;
	s->le_us[2] = 1000;
	s->counts[0] = c10;
	s->counts[1] = c100;
	s->counts[2] = c1000;
	s->count = count;
}

static void test_top_quantile(void)
{
	static gpured_snapshot_t a, b;
	bool over;
	double q;

	/* Before: 1000 fast ones. In the interval: 100 more, 50 of them at
	 * most 10 us, 40 in (10, 100], 10 in (100, 1000]. */
	hist(&a, 1000, 1000, 1000, 1000);
	hist(&b, 1050, 1090, 1100, 1100);
	q = ctl_top_quantile(&a, &b, 0.5, &over);
	CHECK_MSG(fabs(q - 10) < 1e-9 && !over, "%g", q);
	/* rank 99 is the 9th of 10 in (100, 1000]: 100 + 900 * 9/10 */
	q = ctl_top_quantile(&a, &b, 0.99, &over);
	CHECK_MSG(fabs(q - 910) < 1e-9 && !over, "%g", q);
	/* rank 25 is the 25th of 50 in [0, 10] */
	q = ctl_top_quantile(&a, &b, 0.25, NULL);
	CHECK_MSG(fabs(q - 5) < 1e-9, "%g", q);
	/* The counts since start would have said under 100 us for p99: the
	 * interval's own latencies are what count. */
	static gpured_snapshot_t zero;
	hist(&zero, 0, 0, 0, 0);
	q = ctl_top_quantile(&zero, &b, 0.99, NULL);
	CHECK_MSG(fabs(q - 97.75) < 1e-9, "%g", q);

	/* Nothing in the interval: no value. */
	CHECK(isnan(ctl_top_quantile(&b, &b, 0.5, NULL)));
	/* Past the last bound: that bound, flagged. */
	hist(&b, 1000, 1000, 1001, 1010);
	q = ctl_top_quantile(&a, &b, 0.99, &over);
	CHECK_MSG(q == 1000 && over, "%g %d", q, over);
	/* Histograms that do not match, or none. */
	b.le_us[1] = 200;
	CHECK(isnan(ctl_top_quantile(&a, &b, 0.5, NULL)));
	b.nbuckets = 0;
	CHECK(isnan(ctl_top_quantile(&a, &b, 0.5, NULL)));
}

static void test_top_render(void)
{
	static gpured_snapshot_t a, b;
	ctl_top_options o = { .interval_s = 1, .where = "/run/x.sock" };
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	snprintf(a.version, sizeof(a.version), "9.9");
	a.uptime_s = 100;
	a.requests = 5000;
	a.bytes_socket = 7000000000u;
	a.ndevices = 1;
	a.devices[0] = (gpured_device_snapshot_t){ .index = 0, .kind = "cpu", .name = "Some CPU",
						   .healthy = 1, .jobs = 4000 };
	hist(&a, 1000, 1000, 1000, 1000);
	b = a;
	b.uptime_s = 102;
	/* 200 requests in 2 s, top's own two besides */
	b.requests = 5000 + 200 + CTL_TOP_OWN_REQUESTS;
	b.errors = 4;
	b.bytes_socket += 3000000000u; /* 1.5 GB/s */
	b.bytes_shm = 1000000000u;     /* 0.5 GB/s */
	b.devices[0].jobs = 4100;
	b.devices[0].regions = 1;
	b.devices[0].region_bytes = 2000000;
	b.regions = 3;
	b.mapped_bytes = 64000000;
	hist(&b, 1050, 1090, 1100, 1100);

	f = open_memstream(&text, &len);
	CHECK(f);
	CHECK_EQ(ctl_top_render(f, &a, &b, 2.0, &o), 0);
	fclose(f);
	CHECK_MSG(strstr(text, "gpured 9.9 at /run/x.sock, up 0:01:42, every 2 s\n"), "%s", text);
	CHECK_MSG(strstr(text, "requests       100.0/s  errors 2.0/s  in flight 0  connections 0  (5202 since start)\n"), "%s", text);
	CHECK_MSG(strstr(text, "in             2.000 GB/s  socket 1.500  shm 0.500  device 0.000\n"), "%s", text);
	CHECK_MSG(strstr(text, "latency   p50 10 us  p99 910 us  of 100 reductions\n"), "%s", text);
	CHECK_MSG(strstr(text, "regions   3 mapped, 64.0 MB of shared memory\n"), "%s", text);
	CHECK_MSG(strstr(text, "\n0      cpu   up          50.0         4100        1    2.00 MB  Some CPU\n"), "%s", text);
	free(text);

	o.json = true;
	f = open_memstream(&text, &len);
	CHECK(f);
	CHECK_EQ(ctl_top_render(f, &a, &b, 2.0, &o), 0);
	fclose(f);
	CHECK_MSG(strstr(text, "\"interval_s\":2,\"requests\":5202,\"requests_per_s\":100,"), "%s", text);
	CHECK_MSG(strstr(text, "\"in_gb_per_s\":2,\"in_gb_per_s_by_path\":{\"socket\":1.5,\"shm\":0.5,\"device\":0}"), "%s", text);
	CHECK_MSG(strstr(text, "\"reductions\":100,\"latency_p50_us\":10,\"latency_p99_us\":910,"), "%s", text);
	CHECK_MSG(strstr(text, "{\"index\":0,\"kind\":\"cpu\",\"name\":\"Some CPU\",\"healthy\":true,\"jobs\":4100,\"jobs_per_s\":50,\"regions\":1,\"region_bytes\":2000000}"), "%s", text);
	CHECK(text[len - 1] == '\n' && strchr(text, '\n') == text + len - 1);
	free(text);

	/* Nothing happened: zeros and no percentiles, whatever the totals. */
	o.json = false;
	f = open_memstream(&text, &len);
	CHECK(f);
	CHECK_EQ(ctl_top_render(f, &b, &b, 1.0, &o), 0);
	fclose(f);
	CHECK_MSG(strstr(text, "requests         0.0/s  errors 0.0/s"), "%s", text);
	CHECK_MSG(strstr(text, "latency   p50 -  p99 -  of 0 reductions"), "%s", text);
	free(text);
}

int main(void)
{
	test_socket_path();
	test_connect_errors();
	test_errors();
	test_names();
	test_parse_number();
	test_parse_text();
	test_format();
	test_segment_offsets();
	test_segment_print();
	test_progress_format();
	test_read_all();
	test_top_quantile();
	test_top_render();
	return 0;
}
