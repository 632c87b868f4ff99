/*
 * Pieces of the client that need no daemon: socket path resolution, error
 * mapping, names, and gpuredctl's number parsing and printing.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "client/ctl-input.h"
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
	static const char *const ops[] = { "sum", "min", "max", "sumsq" };
	static const char *const dts[] = { "i32", "i64", "u32", "u64", "f32", "f64" };
	static const size_t sizes[] = { 4, 8, 4, 8, 4, 8 };
	gpured_op op;
	gpured_dtype dt;

	for (int i = 0; i < 4; i++) {
		CHECK_EQ(gpured_op_parse(ops[i], &op), 0);
		CHECK_EQ(op, i);
		CHECK(strcmp(gpured_op_name(op), ops[i]) == 0);
	}
	for (int i = 0; i < 6; i++) {
		CHECK_EQ(gpured_dtype_parse(dts[i], &dt), 0);
		CHECK_EQ(dt, i);
		CHECK(strcmp(gpured_dtype_name(dt), dts[i]) == 0);
		CHECK_EQ(gpured_dtype_size(dt), sizes[i]);
	}
	CHECK_EQ(gpured_op_parse("Sum", &op), -EINVAL);
	CHECK_EQ(gpured_op_parse("sumsq2", &op), -EINVAL);
	CHECK_EQ(gpured_dtype_parse("f16", &dt), -EINVAL);
	CHECK_EQ(gpured_dtype_parse("", &dt), -EINVAL);
	CHECK(gpured_op_name((gpured_op)4) == NULL);
	CHECK_EQ(gpured_dtype_size((gpured_dtype)6), 0);

	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_I32), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MIN, GPURED_I64), GPURED_KIND_I64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_MAX, GPURED_U32), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_U64), GPURED_KIND_U64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUM, GPURED_F32), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUMSQ, GPURED_I32), GPURED_KIND_F64);
	CHECK_EQ(gpured_result_kind(GPURED_OP_SUMSQ, GPURED_U64), GPURED_KIND_F64);

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

int main(void)
{
	test_socket_path();
	test_connect_errors();
	test_errors();
	test_names();
	test_parse_number();
	test_parse_text();
	test_format();
	return 0;
}
