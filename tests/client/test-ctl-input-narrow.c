/*
 * gpuredctl's text input for the narrow dtypes (client/ctl-input.c):
 * integers of i8, u8, i16 and u16 in range and out of it, and decimals
 * rounded to f16, bf16, f8e4m3 and f8e5m2. For every finite value of each
 * float format: the value itself, the midpoint to the next one (ties to
 * even), and decimals a hair above and below that midpoint, closer to it
 * than a double can tell (a parse to the nearest double and a second
 * rounding gets half of those wrong). The values come from the formats'
 * definitions, written out here, not from the code under test.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/ctl-input.h"
#include "client/gpured.h"
#include "tests/check.h"

/* A format by its definition: the magnitude bits k of a finite value
 * are an exponent field (k >> mant) and a fraction (the rest). */
typedef struct format {
	gpured_dtype dt;
	unsigned mant;    /* fraction bits */
	int bias;
	unsigned max;     /* magnitude bits of the largest finite value */
	unsigned sign;    /* the sign bit */
	bool ieee;        /* max + 1 is infinity, the rest NaNs (else: no inf) */
} format;

static const format formats[] = {
	{ GPURED_F16, 10, 15, 0x7bff, 0x8000, true },
	{ GPURED_BF16, 7, 127, 0x7f7f, 0x8000, true },
	{ GPURED_F8E4M3, 3, 7, 0x7e, 0x80, false },
	{ GPURED_F8E5M2, 2, 15, 0x7b, 0x80, true },
};

/* The value of magnitude bits k as if the format went on past its
 * largest value with the same spacing (so max + 1 is the value an
 * overflowing tie would round to). */
static double magnitude(const format *f, unsigned k)
{
	unsigned field = k >> f->mant, frac = k & ((1u << f->mant) - 1);

	if (field == 0)
		return ldexp(frac, 1 - f->bias - (int)f->mant);
	return ldexp((double)((1u << f->mant) + frac), (int)field - f->bias - (int)f->mant);
}

static unsigned parse_bits(const format *f, const char *s, int *ret_err)
{
	uint8_t out[2] = { 0xa5, 0xa5 };

	*ret_err = ctl_input_parse_number(s, strlen(s), f->dt, out);
	return f->sign == 0x8000 ? (unsigned)(out[0] | out[1] << 8) : out[0];
}

/* x's exact decimal ("%.*e" prints exactly: every binary fraction is a
 * finite decimal, 130 digits are more than any here needs), its
 * mantissa's trailing zeros cut; *ret_exp points at the "e...". */
static void exact_decimal(double x, char *buf, size_t size, char **ret_exp)
{
	char *e, *p;
	int n = snprintf(buf, size, "%.130e", x);

	CHECK(n > 0 && (size_t)n < size);
	e = strchr(buf, 'e');
	CHECK(e && e[-1] == '0' && e[-2] == '0' && e[-3] == '0'); /* exact, then */
	for (p = e; p[-1] == '0'; p--)
		;
	if (p[-1] == '.')
		p--;
	memmove(p, e, strlen(e) + 1);
	*ret_exp = p;
}

/* buf with digits put in before its exponent */
static void splice(char *buf, char *exp, const char *digits)
{
	size_t k = strlen(digits);

	memmove(exp + k, exp, strlen(exp) + 1);
	memcpy(exp, digits, k);
}

/* Parse s with sign prefix '+' or '-' and check it gives bits (or err). */
static void expect(const format *f, const char *s, bool neg, int want_err, unsigned want)
{
	char buf[256];
	unsigned got;
	int err;

	snprintf(buf, sizeof(buf), "%s%s", neg ? "-" : "", s);
	got = parse_bits(f, buf, &err);
	CHECK_MSG(err == want_err, "%s '%s': error %d, not %d", gpured_dtype_name(f->dt), buf, err,
		  want_err);
	if (want_err == 0)
		CHECK_MSG(got == (want | (neg ? f->sign : 0)), "%s '%s': %#x, not %#x",
			  gpured_dtype_name(f->dt), buf, got, want | (neg ? f->sign : 0));
}

/* Every finite value, the midpoints and their neighbourhoods. */
static void test_every_value(const format *f)
{
	char buf[256];
	char *exp;

	for (unsigned k = 0; k <= f->max; k++) {
		double v = magnitude(f, k), next = magnitude(f, k + 1), mid = (v + next) / 2;
		unsigned even = k % 2 == 0 ? k : k + 1;
		bool neg = k % 3 == 1; /* both signs, a third of them negative */

		CHECK(mid > v && mid < next); /* exact: a few bits in a double */
		exact_decimal(v, buf, sizeof(buf), &exp);
		expect(f, buf, neg, 0, k);

		/* the tie goes to the even one; past the largest, out of range */
		exact_decimal(mid, buf, sizeof(buf), &exp);
		expect(f, buf, neg, even > f->max ? -ERANGE : 0, even);

		/* a hair above: the next value (out of range past the last) */
		splice(buf, exp, strchr(buf, '.') ? "000000000000000000000001" : ".000000000000000000000001");
		expect(f, buf, neg, k + 1 > f->max ? -ERANGE : 0, k + 1);

		/* a hair below: this one. The midpoint's last digit lowered
		 * by one, then 9s. */
		exact_decimal(mid, buf, sizeof(buf), &exp);
		CHECK(exp[-1] >= '1' && exp[-1] <= '9');
		exp[-1]--;
		splice(buf, exp, strchr(buf, '.') ? "99999999999999999999999" : ".99999999999999999999999");
		expect(f, buf, neg, 0, k);
	}
}

static void test_floats(void)
{
	for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
		test_every_value(&formats[i]);

	const format *f16 = &formats[0], *bf16 = &formats[1], *e4m3 = &formats[2],
		     *e5m2 = &formats[3];
	int err;

	/* Known encodings, from the formats' specifications. */
	expect(f16, "1", false, 0, 0x3c00);
	expect(f16, "65504", false, 0, 0x7bff);
	expect(f16, "5.9604644775390625e-8", false, 0, 0x0001);
	expect(f16, "0.333333333333", false, 0, 0x3555);
	expect(bf16, "1", false, 0, 0x3f80);
	expect(bf16, "3.14159", false, 0, 0x4049);
	expect(bf16, "3.3895313892515355e38", false, 0, 0x7f7f);
	expect(e4m3, "448", false, 0, 0x7e);
	expect(e4m3, "1", false, 0, 0x38);
	expect(e4m3, "0.001953125", false, 0, 0x01);
	expect(e5m2, "57344", false, 0, 0x7b);
	expect(e5m2, "1", false, 0, 0x3c);
	expect(e5m2, "1.52587890625e-05", false, 0, 0x01);

	/* The tie between 1 and 1 + 2^-10 goes to 1; the decimals around it
	 * whose nearest double is that tie go to their own side. */
	expect(f16, "1.00048828125", false, 0, 0x3c00);
	expect(f16, "1.000488281250000000000000001", false, 0, 0x3c01);
	expect(f16, "1.000488281249999999999999999", false, 0, 0x3c00);
	expect(f16, "1.00146484375", false, 0, 0x3c02); /* 1+3*2^-11: up to even */
	/* bf16: 1 + 2^-8 is the tie between 1 and 1 + 2^-7 */
	expect(bf16, "1.00390625", false, 0, 0x3f80);
	expect(bf16, "1.00390625000000000000000000001", false, 0, 0x3f81);

	/* Overflow: a finite number past the largest value (once rounded)
	 * is out of range, as for f32; inf itself is the infinity, which
	 * f8e4m3 has none of. */
	expect(f16, "65519.99", false, 0, 0x7bff);
	expect(f16, "65520", false, -ERANGE, 0);
	expect(f16, "1e10", true, -ERANGE, 0);
	expect(f16, "1e400", false, -ERANGE, 0);
	expect(f16, "inf", false, 0, 0x7c00);
	expect(f16, "inf", true, 0, 0x7c00);
	expect(bf16, "infinity", false, 0, 0x7f80);
	expect(bf16, "3.4e38", false, -ERANGE, 0);
	expect(e5m2, "inf", true, 0, 0x7c);
	expect(e5m2, "61440", false, -ERANGE, 0);
	expect(e5m2, "61439.9", false, 0, 0x7b);
	expect(e4m3, "464", false, 0, 0x7e); /* the tie: 448 is the even one */
	expect(e4m3, "464.0000001", false, -ERANGE, 0);
	expect(e4m3, "480", true, -ERANGE, 0);
	expect(e4m3, "inf", false, -ERANGE, 0);
	expect(e4m3, "-inf", false, -ERANGE, 0);

	/* NaN: the format's quiet NaN, with its sign. */
	CHECK_EQ(parse_bits(f16, "nan", &err), 0x7e00);
	CHECK_EQ(err, 0);
	CHECK_EQ(parse_bits(f16, "-nan", &err), 0xfe00);
	CHECK_EQ(parse_bits(bf16, "NaN", &err), 0x7fc0);
	CHECK_EQ(parse_bits(e4m3, "nan", &err), 0x7f);
	CHECK_EQ(parse_bits(e4m3, "-nan", &err), 0xff);
	CHECK_EQ(parse_bits(e5m2, "nan", &err), 0x7e);

	/* Zeros and underflow: the zero of the number's sign. */
	expect(f16, "0", false, 0, 0);
	expect(f16, "0", true, 0, 0);
	expect(f16, "1e-30", true, 0, 0);
	expect(bf16, "1e-400", false, 0, 0);
	expect(bf16, "1e-400", true, 0, 0);
	expect(e4m3, "0.0009765625", false, 0, 0);     /* 2^-10: the tie with 2^-9 */
	expect(e4m3, "0.00097656250001", false, 0, 1); /* just past it */
	expect(e5m2, "1e-9", true, 0, 0);

	/* Not numbers. */
	expect(f16, "", false, -EINVAL, 0);
	expect(f16, "1.5x", false, -EINVAL, 0);
	expect(bf16, "--1", false, -EINVAL, 0);
	expect(e4m3, "0x", false, -EINVAL, 0);
	expect(e5m2, "1,5", false, -EINVAL, 0);
	/* hex floats, as strtod() reads them */
	expect(f16, "0x1.004p0", false, 0, 0x3c01);
	expect(f16, "0x1.002p0", false, 0, 0x3c00);

	/* The rounding mode is the caller's again afterwards. */
	volatile double third = 1.0;
	third /= 3;
	CHECK(third == 1.0 / 3);
}

static void test_ints(void)
{
	static const struct {
		gpured_dtype dt;
		const char *tok;
		int err;
		int64_t v; /* the stored element, sign-extended from its size */
	} cases[] = {
		{ GPURED_I8, "0", 0, 0 },
		{ GPURED_I8, "127", 0, 127 },
		{ GPURED_I8, "-128", 0, -128 },
		{ GPURED_I8, "+5", 0, 5 },
		{ GPURED_I8, "128", -ERANGE, 0 },
		{ GPURED_I8, "-129", -ERANGE, 0 },
		{ GPURED_I8, "99999999999999999999999", -ERANGE, 0 },
		{ GPURED_I8, "1.0", -EINVAL, 0 },
		{ GPURED_I8, "1e2", -EINVAL, 0 },
		{ GPURED_U8, "255", 0, 255 },
		{ GPURED_U8, "-0", 0, 0 },
		{ GPURED_U8, "256", -ERANGE, 0 },
		{ GPURED_U8, "-1", -ERANGE, 0 },
		{ GPURED_U8, "0x1", -EINVAL, 0 },
		{ GPURED_I16, "32767", 0, 32767 },
		{ GPURED_I16, "-32768", 0, -32768 },
		{ GPURED_I16, "-300", 0, -300 },
		{ GPURED_I16, "32768", -ERANGE, 0 },
		{ GPURED_I16, "-32769", -ERANGE, 0 },
		{ GPURED_U16, "65535", 0, 65535 },
		{ GPURED_U16, "258", 0, 258 },
		{ GPURED_U16, "65536", -ERANGE, 0 },
		{ GPURED_U16, "-2", -ERANGE, 0 },
		{ GPURED_U16, "", -EINVAL, 0 },
	};

	uint8_t none[8];
	CHECK_EQ(ctl_input_parse_number("1", 1, (gpured_dtype)14, none), -EINVAL);
	CHECK_EQ(ctl_input_parse_number("1", 1, (gpured_dtype)-1, none), -EINVAL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t out[3] = { 0xa5, 0xa5, 0xa5 };
		size_t size = gpured_dtype_size(cases[i].dt);
		int err = ctl_input_parse_number(cases[i].tok, strlen(cases[i].tok), cases[i].dt, out);
		int64_t v;

		CHECK_MSG(err == cases[i].err, "%s '%s': %d", gpured_dtype_name(cases[i].dt),
			  cases[i].tok, err);
		if (err)
			continue;
		CHECK(out[size] == 0xa5); /* nothing past the element */
		v = size == 1 ? out[0] : out[0] | out[1] << 8;
		if (cases[i].dt == GPURED_I8 && v >= 128)
			v -= 256;
		if (cases[i].dt == GPURED_I16 && v >= 32768)
			v -= 65536;
		CHECK_MSG(v == cases[i].v, "%s '%s': %lld", gpured_dtype_name(cases[i].dt),
			  cases[i].tok, (long long)v);
	}
}

/* A text of several, with the bad token's place. */
static void test_text(void)
{
	const char *text = "1 -2\n3.5 -0 nan\n";
	ctl_input_error e;
	uint16_t *h;
	void *data = NULL;
	size_t n = 0;

	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_F16, &data, &n, &e), 0);
	CHECK_EQ(n, 5);
	h = data;
	CHECK(h[0] == 0x3c00 && h[1] == 0xc000 && h[2] == 0x4300 && h[3] == 0x8000 &&
	      h[4] == 0x7e00);
	free(data);

	text = "1 2\n3 70000 4";
	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_F16, &data, &n, &e), -ERANGE);
	CHECK_EQ(e.line, 2);
	CHECK_EQ(e.column, 3);
	CHECK_EQ(e.index, 3);
	CHECK(strcmp(e.token, "70000") == 0);

	text = "200 100 300";
	CHECK_EQ(ctl_input_parse_text(text, strlen(text), GPURED_U8, &data, &n, &e), -ERANGE);
	CHECK_EQ(e.index, 2);
	CHECK_EQ(ctl_input_parse_text(text, 7, GPURED_U8, &data, &n, &e), 0);
	CHECK_EQ(n, 2);
	CHECK(((uint8_t *)data)[0] == 200 && ((uint8_t *)data)[1] == 100);
	free(data);
}

int main(void)
{
	test_ints();
	test_text();
	test_floats();
	return 0;
}
