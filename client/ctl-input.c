#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/ctl-input.h"
#include "util/cleanup.h"

/* One read() at most: the progress bar moves between reads. */
#define READ_MAX ((size_t)1 << 20)

uint64_t ctl_input_remaining(int fd)
{
	struct stat st;
	off_t pos;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
		return 0;
	/* stdin may be a file its parent has read part of already */
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < 0)
		pos = 0;
	return pos < st.st_size ? (uint64_t)(st.st_size - pos) : 0;
}

int ctl_input_read_all(int fd, uint64_t size_hint, ctl_progress *progress, char **ret,
		       size_t *ret_len)
{
	/* One byte past the hint, so that reading the end needs no growth. */
	size_t len = 0, cap = size_hint > 0 && size_hint < SIZE_MAX / 2 ? (size_t)size_hint + 1
									: (size_t)1 << 16;
	_cleanup_(freep) char *buf = malloc(cap);

	if (!buf)
		return -ENOMEM;
	for (;;) {
		size_t want;
		ssize_t k;

		if (len == cap) {
			char *p = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;

			if (!p)
				return -ENOMEM;
			buf = p;
			cap *= 2;
		}
		want = cap - len < READ_MAX ? cap - len : READ_MAX;
		k = read(fd, buf + len, want);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (progress)
			ctl_progress_update(progress, len);
	}
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

int ctl_input_region(gpured_t *g, const void *data, size_t bytes, gpured_region_t **ret)
{
	int r = gpured_region_new(g, bytes, ret);

	if (r == 0)
		memcpy(gpured_region_data(*ret), data, bytes);
	return r;
}

/* Longer tokens cannot be numbers of any dtype we read (a float with
 * hundreds of digits is still refused: nobody means that). */
#define TOKEN_MAX 400

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Decimal digits with an optional sign into sign and magnitude. */
static int parse_decimal(const char *s, size_t len, bool *ret_neg, uint64_t *ret_mag)
{
	bool neg = false;
	uint64_t m = 0;
	size_t i = 0;

	if (i < len && (s[i] == '+' || s[i] == '-')) {
		neg = s[i] == '-';
		i++;
	}
	if (i == len)
		return -EINVAL;
	for (; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (d > 9)
			return -EINVAL;
		if (m > (UINT64_MAX - d) / 10) {
			/* Keep checking the rest is digits: "99999999999999999999x"
			 * is not a number, not an out-of-range one. */
			for (; i < len; i++)
				if ((unsigned)(s[i] - '0') > 9)
					return -EINVAL;
			return -ERANGE;
		}
		m = m * 10 + d;
	}
	*ret_neg = neg;
	*ret_mag = m;
	return 0;
}

/*
 * A float format narrower than float64 (f16, bf16, f8e4m3, f8e5m2): a sign
 * bit, then the magnitude's bits, which count up with the value: finite
 * magnitudes 0 .. max_mag, then (IEEE-like formats) infinity, then NaNs.
 */
typedef struct narrow_format {
	unsigned mant_bits; /* stored fraction bits */
	int emin;           /* exponent of the smallest normal (1 - bias) */
	uint32_t max_mag;   /* the largest finite value's magnitude bits */
	bool has_inf;       /* max_mag + 1 is infinity (f8e4m3 has none) */
	uint32_t nan;       /* the magnitude bits of the NaN we write */
	unsigned bits;      /* 16 or 8 */
} narrow_format;

static const narrow_format format_f16 = { 10, -14, 0x7bff, true, 0x7e00, 16 };
static const narrow_format format_bf16 = { 7, -126, 0x7f7f, true, 0x7fc0, 16 };
/* OCP E4M3 ("fn"): S.1111.111 is NaN, S.1111.110 (448) the largest */
static const narrow_format format_e4m3 = { 3, -6, 0x7e, false, 0x7f, 8 };
static const narrow_format format_e5m2 = { 2, -14, 0x7b, true, 0x7e, 8 };

/*
 * The decimal in buf rounded to odd at double precision: the double
 * itself when buf is exactly one, else whichever of the two doubles
 * around it has an odd last bit. Rounding that once more to nearest, ties
 * to even, at a precision at least two bits narrower (every format here)
 * gives what rounding the decimal itself would: no double rounding.
 * glibc's strtod() rounds in the current rounding mode, so the doubles
 * below and above are two parses.
 */
static int parse_round_to_odd(const char *buf, size_t len, double *ret)
{
	int mode = fegetround();
	double lo, hi;
	char *end_lo, *end_hi;
	uint64_t blo, bhi;

	fesetround(FE_DOWNWARD);
	lo = strtod(buf, &end_lo);
	fesetround(FE_UPWARD);
	hi = strtod(buf, &end_hi);
	fesetround(mode);
	if (end_lo != buf + len || end_hi != buf + len)
		return -EINVAL;
	memcpy(&blo, &lo, sizeof(blo));
	memcpy(&bhi, &hi, sizeof(bhi));
	/* Past the largest double one of them is infinite: the odd one is
	 * then the largest double, still past every narrow format's range. */
	*ret = isnan(lo) || blo == bhi || (blo & 1) ? lo : hi;
	return 0;
}

/*
 * x rounded to fmt, to nearest with ties to even, as the format's bits in
 * *ret. -ERANGE when x is finite but rounds past the largest finite value
 * (as strtof() overflows for f32), or is infinite and fmt has no
 * infinities.
 */
static int round_to_narrow(double x, const narrow_format *fmt, uint32_t *ret)
{
	uint32_t sign = signbit(x) ? (uint32_t)1 << (fmt->bits - 1) : 0;
	uint64_t b, m, k, rem, half;
	int e, shift;

	if (isnan(x)) {
		*ret = sign | fmt->nan;
		return 0;
	}
	if (isinf(x)) {
		if (!fmt->has_inf)
			return -ERANGE;
		*ret = sign | (fmt->max_mag + 1);
		return 0;
	}
	memcpy(&b, &x, sizeof(b));
	e = (int)(b >> 52 & 0x7ff);
	m = b & ((1ull << 52) - 1);
	if (e == 0) {
		/* zero, or a subnormal double: far below half of every
		 * format's smallest subnormal */
		*ret = sign;
		return 0;
	}
	m |= 1ull << 52;
	e -= 1023; /* |x| = m * 2^(e - 52) */
	/* Keep the bits of the format's quantum at |x|'s binade,
	 * 2^(max(e, emin) - mant_bits), and round away the rest. */
	shift = (e > fmt->emin ? e : fmt->emin) - (int)fmt->mant_bits - (e - 52);
	if (shift > 60) {
		*ret = sign; /* below a quarter of the quantum */
		return 0;
	}
	k = m >> shift;
	rem = m & ((1ull << shift) - 1);
	half = 1ull << (shift - 1);
	if (rem > half || (rem == half && (k & 1)))
		k++;
	/* Normal magnitudes count on from the subnormals' 2^mant_bits: the
	 * exponent field above emin, then k (carrying into the exponent
	 * when the rounding did). */
	if (e > fmt->emin)
		k += (uint64_t)(e - fmt->emin) << fmt->mant_bits;
	if (k > fmt->max_mag)
		return -ERANGE;
	*ret = sign | (uint32_t)k;
	return 0;
}

/* How ctl_input_parse_number() reads and stores each dtype (NONE: a
 * dtype the table lacks, refused). */
typedef enum number_kind {
	NUMBER_NONE,
	NUMBER_SIGNED,
	NUMBER_UNSIGNED,
	NUMBER_F32,
	NUMBER_F64,
	NUMBER_NARROW,
} number_kind;

typedef struct number_type {
	number_kind kind;
	uint64_t max;             /* integers: the largest value (signed: -max - 1 the least) */
	const narrow_format *fmt; /* NUMBER_NARROW */
} number_type;

static const number_type number_types[] = {
	[GPURED_I32] = { NUMBER_SIGNED, INT32_MAX, NULL },
	[GPURED_I64] = { NUMBER_SIGNED, INT64_MAX, NULL },
	[GPURED_U32] = { NUMBER_UNSIGNED, UINT32_MAX, NULL },
	[GPURED_U64] = { NUMBER_UNSIGNED, UINT64_MAX, NULL },
	[GPURED_F32] = { NUMBER_F32, 0, NULL },
	[GPURED_F64] = { NUMBER_F64, 0, NULL },
	[GPURED_F16] = { NUMBER_NARROW, 0, &format_f16 },
	[GPURED_BF16] = { NUMBER_NARROW, 0, &format_bf16 },
	[GPURED_F8E4M3] = { NUMBER_NARROW, 0, &format_e4m3 },
	[GPURED_F8E5M2] = { NUMBER_NARROW, 0, &format_e5m2 },
	[GPURED_I8] = { NUMBER_SIGNED, INT8_MAX, NULL },
	[GPURED_U8] = { NUMBER_UNSIGNED, UINT8_MAX, NULL },
	[GPURED_I16] = { NUMBER_SIGNED, INT16_MAX, NULL },
	[GPURED_U16] = { NUMBER_UNSIGNED, UINT16_MAX, NULL },
};

/* The low size bytes of v, little-endian (as every element is sent). */
static void store_le(void *out, uint64_t v, size_t size)
{
	uint8_t *p = out;

	for (size_t i = 0; i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int ctl_input_parse_number(const char *tok, size_t len, gpured_dtype dt, void *out)
{
	const number_type *t;
	char buf[TOKEN_MAX + 1];
	size_t size = gpured_dtype_size(dt);
	uint64_t mag;
	uint32_t bits;
	double d;
	bool neg;
	char *end;
	int r;

	if (size == 0 || (size_t)dt >= sizeof(number_types) / sizeof(number_types[0]))
		return -EINVAL;
	t = &number_types[dt];
	switch (t->kind) {
	case NUMBER_NONE:
		return -EINVAL;
	case NUMBER_SIGNED:
		r = parse_decimal(tok, len, &neg, &mag);
		if (r < 0)
			return r;
		if (mag > t->max + neg)
			return -ERANGE;
		/* two's complement of the magnitude: -max - 1 included */
		store_le(out, neg ? -mag : mag, size);
		return 0;
	case NUMBER_UNSIGNED:
		r = parse_decimal(tok, len, &neg, &mag);
		if (r < 0)
			return r;
		if ((neg && mag != 0) || mag > t->max)
			return -ERANGE;
		store_le(out, mag, size);
		return 0;
	case NUMBER_F32:
	case NUMBER_F64:
	case NUMBER_NARROW:
		break;
	}
	if (len == 0 || len > TOKEN_MAX)
		return -EINVAL;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	errno = 0;
	if (t->kind == NUMBER_F32) {
		float f = strtof(buf, &end);

		if (end != buf + len)
			return -EINVAL;
		/* ERANGE also flags underflow to a subnormal, which is
		 * still the nearest float: refuse only overflow. */
		if (errno == ERANGE && isinf(f))
			return -ERANGE;
		memcpy(out, &f, sizeof(f));
		return 0;
	}
	if (t->kind == NUMBER_F64) {
		d = strtod(buf, &end);
		if (end != buf + len)
			return -EINVAL;
		if (errno == ERANGE && isinf(d))
			return -ERANGE;
		memcpy(out, &d, sizeof(d));
		return 0;
	}
	r = parse_round_to_odd(buf, len, &d);
	if (r == 0)
		r = round_to_narrow(d, t->fmt, &bits);
	if (r < 0)
		return r;
	store_le(out, bits, size);
	return 0;
}

int ctl_input_parse_text(const char *text, size_t len, gpured_dtype dt, void **ret_data,
			 size_t *ret_n, ctl_input_error *ret_err)
{
	size_t esz = gpured_dtype_size(dt);
	size_t line = 1, line_start = 0, n = 0, cap = 0;
	_cleanup_(freep) uint8_t *data = NULL;
	size_t i = 0;

	if (esz == 0)
		return -EINVAL;
	while (i < len) {
		size_t start;
		int r;

		if (is_space(text[i])) {
			if (text[i] == '\n') {
				line++;
				line_start = i + 1;
			}
			i++;
			continue;
		}
		start = i;
		while (i < len && !is_space(text[i]))
			i++;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 1024;
			uint8_t *p = realloc(data, ncap * esz);

			if (!p) {
				*ret_err = (ctl_input_error){ .err = -ENOMEM, .line = line,
							      .column = start - line_start + 1, .index = n };
				return -ENOMEM;
			}
			data = p;
			cap = ncap;
		}
		r = ctl_input_parse_number(text + start, i - start, dt, data + n * esz);
		if (r < 0) {
			size_t tl = i - start;

			*ret_err = (ctl_input_error){ .err = r, .line = line,
						      .column = start - line_start + 1, .index = n };
			if (tl < sizeof(ret_err->token)) {
				memcpy(ret_err->token, text + start, tl);
				ret_err->token[tl] = '\0';
			} else {
				size_t keep = sizeof(ret_err->token) - 4;

				memcpy(ret_err->token, text + start, keep);
				memcpy(ret_err->token + keep, "...", 4);
			}
			return r;
		}
		n++;
	}
	*ret_data = TAKE_PTR(data);
	*ret_n = n;
	return 0;
}

int ctl_input_format_value(const gpured_value *v, int json, char *buf, size_t size)
{
	switch (v->kind) {
	case GPURED_KIND_I64:
		return snprintf(buf, size, "%lld", (long long)v->v.i);
	case GPURED_KIND_U64:
		return snprintf(buf, size, "%llu", (unsigned long long)v->v.u);
	case GPURED_KIND_F64:
		if (json && !isfinite(v->v.f))
			return snprintf(buf, size, "null");
		return snprintf(buf, size, "%.17g", v->v.f);
	}
	return snprintf(buf, size, "?");
}
