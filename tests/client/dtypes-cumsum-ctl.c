/*
 * test-client-dtypes' cumsum and ctl scenarios: the narrow dtypes' prefix
 * sums through libgpured against arrays whose every prefix sum a double
 * holds exactly (so any order of adds gives it), and gpuredctl with the
 * narrow dtypes (decimal text rounded to nearest even or refused out of
 * range, --raw).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/dtypes-ref.h"
#include "tests/narrow-formats.h"

/*
 * Arrays whose every prefix sum is exact in a double, so that any order
 * of additions gives it: every finite f8 value; f16 and bf16 values of a
 * window of binades. A few NaNs and infinities among them, and runs of -0
 * at the start.
 */
static void *exact_prefix_array(gpured_dtype dt, size_t n)
{
	const test_format *f = test_format_named(gpured_dtype_name(dt));
	const uint32_t mask = (1u << dt_bits(dt)) - 1, sign = 1u << (dt_bits(dt) - 1);
	void *p = alloc_elems(dt, n);

	for (size_t i = 0; i < n; i++) {
		uint32_t b;
		test_value v;

		for (;;) {
			b = (uint32_t)rng_next(&the_rng) & mask;
			v = test_decode(f, b);
			if (v.cls != TEST_FINITE)
				continue;
			double a = fabs(test_value_double(v));
			if (dt_bits(dt) == 8 || a == 0 ||
			    (a >= 0x1p-8 && a < (dt == GPURED_F16 ? 0x1p16 : 0x1p12)))
				break;
		}
		put_at(dt, p, i, i < 5 ? sign : b);
	}
	if (n > 70000) {
		const uint32_t inf = (((1u << f->ebits) - 1) << f->mbits);
		put_at(dt, p, 60000, f->ieee ? inf : 0x7f);  /* +inf, or E4M3's NaN */
		put_at(dt, p, 65000, f->ieee ? inf | sign : 0x7f);
	}
	return p;
}

static void cumsum_reference(gpured_dtype dt, const void *data, size_t n, uint64_t *out)
{
	double s = -0.0;
	int64_t is = 0;

	for (size_t i = 0; i < n; i++) {
		test_value v = element(dt, data, i);

		if (is_float_dt(dt)) {
			s += test_value_double(v); /* exact here */
			memcpy(&out[i], &s, 8);
		} else {
			is += v.neg ? -(int64_t)v.m : (int64_t)v.m;
			memcpy(&out[i], &is, 8);
		}
	}
}

static void check_cumsum_values(gpured_dtype dt, const uint64_t *got, const uint64_t *want,
				size_t n, const char *label)
{
	checked++;
	for (size_t i = 0; i < n; i++) {
		double a, b;

		memcpy(&a, &got[i], 8);
		memcpy(&b, &want[i], 8);
		CHECK_MSG(got[i] == want[i] || (is_float_dt(dt) && isnan(a) && isnan(b)),
			  "cumsum %s %s n=%zu: value %zu is %#llx, want %#llx", gpured_dtype_name(dt),
			  label, n, i, (unsigned long long)got[i], (unsigned long long)want[i]);
	}
}

void test_cumsum(void)
{
	static const size_t sizes[] = { 1, 4095, 4097, 100003 };
	static const gpured_dtype all[] = { GPURED_F16, GPURED_BF16, GPURED_F8E4M3, GPURED_F8E5M2,
					    GPURED_I8,  GPURED_U8,   GPURED_I16,    GPURED_U16 };
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	for (size_t k = 0; k < sizeof(all) / sizeof(all[0]); k++) {
		const gpured_dtype dt = all[k];
		const size_t size = gpured_dtype_size(dt);

		for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			const size_t n = sizes[j];
			void *p;
			uint64_t *got = malloc(n * 8), *want = malloc(n * 8);
			gpured_region_t *in, *out;

			CHECK(got && want);
			if (is_float_dt(dt)) {
				p = exact_prefix_array(dt, n);
			} else {
				p = alloc_elems(dt, n);
				for (size_t i = 0; i < n; i++)
					put_at(dt, p, i, (uint32_t)rng_next(&the_rng));
			}
			cumsum_reference(dt, p, n, want);
			CHECK_MSG(gpured_cumsum(g, dt, p, n, got) == 0, "cumsum %s: %s",
				  gpured_dtype_name(dt), gpured_errmsg(g));
			check_cumsum_values(dt, got, want, n, "data");

			/* region to region, the input at an odd offset */
			CHECK_EQ(gpured_region_new(g, n * size + 1, &in), 0);
			CHECK_EQ(gpured_region_new_flags(g, n * 8, GPURED_REGION_WRITABLE, &out), 0);
			memcpy((uint8_t *)gpured_region_data(in) + 1, p, n * size);
			CHECK_MSG(gpured_region_cumsum(g, in, dt, 1, n, out, 0) == 0,
				  "region cumsum %s: %s", gpured_dtype_name(dt), gpured_errmsg(g));
			check_cumsum_values(dt, gpured_region_data(out), want, n, "regions");
			CHECK_EQ(gpured_region_free(g, out), 0);
			CHECK_EQ(gpured_region_free(g, in), 0);
			free(p);
			free(got);
			free(want);
		}
	}
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

/* gpuredctl with the narrow dtypes: text rounded or in range, --raw. */
void test_ctl(void)
{
	char *out = NULL, *err = NULL, path[160];
	const char *sock;
	int rc;

	daemon_start(&the_daemon, NULL);
	sock = the_daemon.sock;

	/* f16(0.1) + f16(0.2) = 0.0999755859375 + 0.199951171875 */
	rc = CTL("0.1 0.2", sock, "sum", "--dtype", "f16");
	CHECK_MSG(rc == 0 && strcmp(out, "0.2999267578125\n") == 0, "rc %d out '%s' err '%s'", rc,
		  out, err);
	/* the tie 1 + 2^-11 is 1, past it 1 + 2^-10 */
	rc = CTL("1.00048828125 1.00048828125000000000001", sock, "argmax", "-t", "f16");
	CHECK_MSG(rc == 0 && strcmp(out, "1.0009765625 1\n") == 0, "rc %d out '%s' err '%s'", rc,
		  out, err);
	rc = CTL("1 2\n70000", sock, "sum", "-t", "f16");
	CHECK_MSG(rc == 2 && strstr(err, "2:1: element 3: '70000' is out of range for f16"),
		  "rc %d err '%s'", rc, err);
	rc = CTL("inf 1", sock, "max", "-t", "f8e4m3");
	CHECK_MSG(rc == 2 && strstr(err, "'inf' is out of range for f8e4m3"), "rc %d err '%s'", rc,
		  err);
	rc = CTL("464 -0.001 nan", sock, "--json", "argmax", "-t", "f8e4m3");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":null,\"index\":2,\"count\":3}\n") == 0,
		  "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("464 -0.001", sock, "moments", "-t", "f8e4m3");
	CHECK_MSG(rc == 0 && strstr(out, "count 2\nsum 447.998046875\nmin -0.001953125\nmax 448\n"),
		  "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("3.14159 -1e-40", sock, "sum", "-t", "bf16");
	CHECK_MSG(rc == 0 && strcmp(out, "3.140625\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("57343 -1", sock, "sumsq", "-t", "f8e5m2");
	CHECK_MSG(rc == 0 && strcmp(out, "3288334337\n") == 0, "rc %d out '%s' err '%s'", rc, out,
		  err);

	rc = CTL("127 -128 5", sock, "sum", "-t", "i8");
	CHECK_MSG(rc == 0 && strcmp(out, "4\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("127 128", sock, "sum", "-t", "i8");
	CHECK_MSG(rc == 2 && strstr(err, "'128' is out of range for i8"), "rc %d err '%s'", rc, err);
	rc = CTL("1.5", sock, "sum", "-t", "u16");
	CHECK_MSG(rc == 2 && strstr(err, "'1.5' is not a number of type u16"), "rc %d err '%s'", rc,
		  err);
	rc = CTL("250 10", sock, "cumsum", "-t", "u8");
	CHECK_MSG(rc == 0 && strcmp(out, "250\n260\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("-32768 -1 7", sock, "cumsum", "--json", "-t", "i16");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"count\":3,\"values\":[-32768,-32769,-32762]}\n") == 0,
		  "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("1 -2 3 4 -128", sock, "min", "-t", "i8", "--rows", "2");
	CHECK_MSG(rc == 0 && strcmp(out, "-2\n3\n-128\n") == 0, "rc %d out '%s' err '%s'", rc, out,
		  err);
	rc = CTL("65535 65535", sock, "sum", "-t", "u16");
	CHECK_MSG(rc == 0 && strcmp(out, "131070\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("1", sock, "sum", "-t", "f12");
	CHECK_MSG(rc == 2 && strstr(err, "unknown dtype 'f12'") && strstr(err, "f8e4m3") &&
			  strstr(err, "u16"),
		  "rc %d err '%s'", rc, err);

	/* an empty segment of i8: its min is i8's largest */
	snprintf(path, sizeof(path), "%s/offsets", the_daemon.dir);
	uint64_t offs[] = { 0, 2, 2, 3 };
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, offs, sizeof(offs)) == (ssize_t)sizeof(offs));
	close(fd);
	{
		const char *a[] = { "min", "-t", "i8", "--offsets", path, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "5 -3 9", 6, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "-3\n127\n9\n") == 0, "rc %d out '%s' err '%s'", rc,
			  out, err);
	}

	/* --raw: elements of 2 bytes and of 1 (bf16 1.5, -2, 0.25) */
	const uint8_t bf[] = { 0xc0, 0x3f, 0x00, 0xc0, 0x80, 0x3e };
	{
		const char *a[] = { "sum", "--raw", "-t", "bf16", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, bf, sizeof(bf), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "-0.25\n") == 0, "rc %d out '%s' err '%s'", rc, out,
			  err);
	}
	{
		const char *a[] = { "argmin", "--raw", "-t", "u8", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, bf, sizeof(bf), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "0 2\n") == 0, "rc %d out '%s' err '%s'", rc, out,
			  err);
	}
	{
		const char *a[] = { "cumsum", "--raw", "-t", "f8e5m2", NULL }; /* 0x3f: 1.75 */
		free(out);
		free(err);
		rc = run_ctl(a, bf + 1, 1, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "1.75\n") == 0, "rc %d out '%s' err '%s'", rc, out,
			  err);
	}
	{
		const char *a[] = { "sum", "--raw", "-t", "f16", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, bf, 5, sock, &out, &err);
		CHECK_MSG(rc == 2 && strstr(err, "5 bytes is not a whole number of f16 elements"),
			  "rc %d err '%s'", rc, err);
	}
	free(out);
	free(err);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}
