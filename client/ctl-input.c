#include <errno.h>
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

int ctl_input_parse_number(const char *tok, size_t len, gpured_dtype dt, void *out)
{
	char buf[TOKEN_MAX + 1];
	uint64_t mag;
	bool neg;
	char *end;
	int r;

	switch (dt) {
	case GPURED_I32:
	case GPURED_I64: {
		int64_t hi = dt == GPURED_I32 ? INT32_MAX : INT64_MAX;
		int64_t v;

		r = parse_decimal(tok, len, &neg, &mag);
		if (r < 0)
			return r;
		if (neg) {
			if (mag > (uint64_t)hi + 1)
				return -ERANGE;
			v = mag == 0 ? 0 : -(int64_t)(mag - 1) - 1;
		} else {
			if (mag > (uint64_t)hi)
				return -ERANGE;
			v = (int64_t)mag;
		}
		if (dt == GPURED_I32) {
			int32_t w = (int32_t)v;
			memcpy(out, &w, sizeof(w));
		} else {
			memcpy(out, &v, sizeof(v));
		}
		return 0;
	}
	case GPURED_U32:
	case GPURED_U64:
		r = parse_decimal(tok, len, &neg, &mag);
		if (r < 0)
			return r;
		if (neg && mag != 0)
			return -ERANGE;
		if (dt == GPURED_U32) {
			uint32_t w;

			if (mag > UINT32_MAX)
				return -ERANGE;
			w = (uint32_t)mag;
			memcpy(out, &w, sizeof(w));
		} else {
			memcpy(out, &mag, sizeof(mag));
		}
		return 0;
	case GPURED_F32:
	case GPURED_F64:
		if (len == 0 || len > TOKEN_MAX)
			return -EINVAL;
		memcpy(buf, tok, len);
		buf[len] = '\0';
		errno = 0;
		if (dt == GPURED_F32) {
			float f = strtof(buf, &end);

			if (end != buf + len)
				return -EINVAL;
			/* ERANGE also flags underflow to a subnormal, which is
			 * still the nearest float: refuse only overflow. */
			if (errno == ERANGE && isinf(f))
				return -ERANGE;
			memcpy(out, &f, sizeof(f));
		} else {
			double f = strtod(buf, &end);

			if (end != buf + len)
				return -EINVAL;
			if (errno == ERANGE && isinf(f))
				return -ERANGE;
			memcpy(out, &f, sizeof(f));
		}
		return 0;
	}
	return -EINVAL;
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
