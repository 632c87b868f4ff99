/*
 * Replies' bytes to Python objects: reply.h.
 */
#include "reply.h"

#include <string.h>

/* Map keys of gpured's replies, made once. */
static const char *const known_keys[] = {
	"value", "count", "index", "sum", "min", "max", "mean", "var", "code", "message",
	"segments", "values", "region", "bytes", "partial",
};
#define N_KEYS (sizeof(known_keys) / sizeof(known_keys[0]))
static PyObject *key_objs[N_KEYS];
static size_t key_lens[N_KEYS];

int reply_init(void)
{
	for (size_t i = 0; i < N_KEYS; i++) {
		key_objs[i] = PyUnicode_InternFromString(known_keys[i]);
		if (key_objs[i] == NULL)
			return -1;
		key_lens[i] = strlen(known_keys[i]);
	}
	return 0;
}

void reply_scan_reset(reply_scanner *s)
{
	s->pos = 0;
	s->depth = 0;
	s->left[0] = 1;
	s->map[0] = 0;
}

/* Whether p[0, n) is UTF-8 that Python's strict decoder takes (no
 * overlong forms, no surrogates, nothing past U+10FFFF). */
static int utf8_ok(const unsigned char *p, size_t n)
{
	const unsigned char *end = p + n;

	while (p < end) {
		unsigned b = *p++;
		unsigned lo = 0x80, hi = 0xbf;
		int more;

		if (b < 0x80)
			continue;
		if (b >= 0xc2 && b <= 0xdf) {
			more = 1;
		} else if (b >= 0xe0 && b <= 0xef) {
			more = 2;
			if (b == 0xe0)
				lo = 0xa0;
			else if (b == 0xed)
				hi = 0x9f;
		} else if (b >= 0xf0 && b <= 0xf4) {
			more = 3;
			if (b == 0xf0)
				lo = 0x90;
			else if (b == 0xf4)
				hi = 0x8f;
		} else {
			return 0;
		}
		if (end - p < more || p[0] < lo || p[0] > hi)
			return 0;
		for (int i = 1; i < more; i++)
			if (p[i] < 0x80 || p[i] > 0xbf)
				return 0;
		p += more;
	}
	return 1;
}

static uint64_t be(const unsigned char *p, int n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = v << 8 | *p++;
	return v;
}

/*
 * Find where the reply at in_start ends, going on from where the last call
 * stopped: REPLY_DONE (its length in msg_len), REPLY_MORE (not whole yet),
 * or REPLY_FOREIGN for what this decoder leaves to msgpack: ext types,
 * 0xc1, deeper nesting, and, as soon as they are seen (msgpack raises
 * for them before the reply is whole), a map header past its limit, a
 * string that is no UTF-8, an array or a map as a map's key.
 */
int reply_scan(reply_scanner *s, const unsigned char *base, size_t avail, uint64_t max_map)
{
	size_t pos = s->pos;
	int d = s->depth;

	for (;;) {
		unsigned b;
		size_t hdr = 1, len = 0;
		uint64_t items = 0;
		int container = 0;

		int is_key;

		while (d >= 0 && s->left[d] == 0)
			d--;
		if (d < 0) {
			reply_scan_reset(s);
			s->len = pos;
			return REPLY_DONE;
		}
		if (pos >= avail)
			break;
		/* a map's items alternate key, value, from an even count */
		is_key = s->map[d] && s->left[d] % 2 == 0;
		b = base[pos];
		if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
			hdr = 1;
		} else if (b >= 0x80 && b <= 0x8f) {
			items = 2 * (uint64_t)(b & 0x0f);
			container = 1;
		} else if (b >= 0x90 && b <= 0x9f) {
			items = b & 0x0f;
			container = 1;
		} else if (b >= 0xa0 && b <= 0xbf) {
			len = b & 0x1f;
		} else {
			static const signed char hdr_of[] = {
				/* c4 bin8 .. c6 bin32 */ 2, 3, 5,
				/* c7 .. c9 ext */ -1, -1, -1,
				/* ca, cb floats */ 5, 9,
				/* cc .. cf uint */ 2, 3, 5, 9,
				/* d0 .. d3 int */ 2, 3, 5, 9,
				/* d4 .. d8 fixext */ -1, -1, -1, -1, -1,
				/* d9 .. db str */ 2, 3, 5,
				/* dc, dd array */ 3, 5,
				/* de, df map */ 3, 5,
			};
			int h;

			if (b < 0xc4)
				return REPLY_FOREIGN;   /* 0xc1 */
			h = hdr_of[b - 0xc4];
			if (h < 0)
				return REPLY_FOREIGN;
			hdr = (size_t)h;
			if (pos + hdr > avail)
				break;
			if ((b >= 0xc4 && b <= 0xc6) || (b >= 0xd9 && b <= 0xdb)) {
				len = (size_t)be(base + pos + 1, (int)hdr - 1);
			} else if (b == 0xdc || b == 0xdd) {
				items = be(base + pos + 1, (int)hdr - 1);
				container = 1;
			} else if (b == 0xde || b == 0xdf) {
				items = be(base + pos + 1, (int)hdr - 1);
				/* msgpack refuses a map of more than max_map_len
				 * (max_buffer_size // 2) entries at its header */
				if (items > max_map)
					return REPLY_FOREIGN;
				items *= 2;
				container = 1;
			}
		}
		if (container && is_key)
			return REPLY_FOREIGN;   /* unhashable */
		if (pos + hdr > avail || avail - pos - hdr < len)
			break;
		if (((b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb)) &&
		    !utf8_ok(base + pos + hdr, len))
			return REPLY_FOREIGN;
		s->left[d]--;
		pos += hdr + len;
		if (container && items > 0) {
			if (d + 1 >= REPLY_DEPTH)
				return REPLY_FOREIGN;
			s->left[++d] = items;
			s->map[d] = b <= 0x8f || b >= 0xde;
		}
	}
	s->pos = pos;
	s->depth = d;
	return REPLY_MORE;
}

static PyObject *not_ours(void)
{
	PyErr_SetString(PyExc_ValueError, "left to msgpack");
	return NULL;
}

/* One object of a scanned (whole) reply, as msgpack.Unpacker(raw=False,
 * strict_map_key=False) makes it; NULL (an exception set) for what is
 * left to msgpack. */
PyObject *reply_build(const unsigned char **pp, const unsigned char *end, int key)
{
	const unsigned char *p = *pp;
	unsigned b = *p++;
	PyObject *o = NULL;
	uint64_t n = 0;

	if (b <= 0x7f) {
		o = PyLong_FromLong((long)b);
	} else if (b >= 0xe0) {
		o = PyLong_FromLong((long)(signed char)b);
	} else if (b >= 0xa0 && b <= 0xbf) {
		n = b & 0x1f;
		goto str;
	} else if (b >= 0x90 && b <= 0x9f) {
		n = b & 0x0f;
		goto array;
	} else if (b >= 0x80 && b <= 0x8f) {
		n = b & 0x0f;
		goto map;
	} else {
		switch (b) {
		case 0xc0:
			o = Py_NewRef(Py_None);
			break;
		case 0xc2:
			o = Py_NewRef(Py_False);
			break;
		case 0xc3:
			o = Py_NewRef(Py_True);
			break;
		case 0xc4: case 0xc5: case 0xc6: {
			int w = b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4;

			n = be(p, w);
			p += w;
			if ((uint64_t)(end - p) < n)
				return not_ours();
			o = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
			p += n;
			break;
		}
		case 0xca: {
			uint32_t u = (uint32_t)be(p, 4);
			float f;

			memcpy(&f, &u, 4);
			o = PyFloat_FromDouble((double)f);
			p += 4;
			break;
		}
		case 0xcb: {
			uint64_t u = be(p, 8);
			double v;

			memcpy(&v, &u, 8);
			o = PyFloat_FromDouble(v);
			p += 8;
			break;
		}
		case 0xcc: case 0xcd: case 0xce: case 0xcf: {
			int w = 1 << (b - 0xcc);

			o = PyLong_FromUnsignedLongLong((unsigned long long)be(p, w));
			p += w;
			break;
		}
		case 0xd0:
			o = PyLong_FromLong((long)(int8_t)p[0]);
			p += 1;
			break;
		case 0xd1:
			o = PyLong_FromLong((long)(int16_t)be(p, 2));
			p += 2;
			break;
		case 0xd2:
			o = PyLong_FromLong((long)(int32_t)be(p, 4));
			p += 4;
			break;
		case 0xd3:
			o = PyLong_FromLongLong((long long)(int64_t)be(p, 8));
			p += 8;
			break;
		case 0xd9: case 0xda: case 0xdb: {
			int w = b == 0xd9 ? 1 : b == 0xda ? 2 : 4;

			n = be(p, w);
			p += w;
			goto str;
		}
		case 0xdc: case 0xdd: {
			int w = b == 0xdc ? 2 : 4;

			n = be(p, w);
			p += w;
			goto array;
		}
		case 0xde: case 0xdf: {
			int w = b == 0xde ? 2 : 4;

			n = be(p, w);
			p += w;
			goto map;
		}
		default:
			return not_ours();
		}
	}
	*pp = p;
	return o;

str:
	if ((uint64_t)(end - p) < n)
		return not_ours();
	if (key && n <= 16) {
		size_t i;

		for (i = 0; i < N_KEYS; i++)
			if (key_lens[i] == n && memcmp(known_keys[i], p, n) == 0) {
				o = Py_NewRef(key_objs[i]);
				break;
			}
	}
	if (o == NULL)
		o = PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)n, NULL);
	*pp = p + n;
	return o;

array:
	if ((uint64_t)(end - p) < n)
		return not_ours();
	o = PyList_New((Py_ssize_t)n);
	if (o == NULL)
		return NULL;
	for (uint64_t i = 0; i < n; i++) {
		PyObject *item;

		if (p >= end) {
			Py_DECREF(o);
			return not_ours();
		}
		item = reply_build(&p, end, 0);
		if (item == NULL) {
			Py_DECREF(o);
			return NULL;
		}
		PyList_SET_ITEM(o, (Py_ssize_t)i, item);
	}
	*pp = p;
	return o;

map:
	if ((uint64_t)(end - p) / 2 < n)
		return not_ours();
	o = PyDict_New();
	if (o == NULL)
		return NULL;
	for (uint64_t i = 0; i < n; i++) {
		PyObject *k, *v;
		int rc;

		if (p >= end) {
			Py_DECREF(o);
			return not_ours();
		}
		k = reply_build(&p, end, 1);
		if (k == NULL) {
			Py_DECREF(o);
			return NULL;
		}
		if (p >= end) {
			Py_DECREF(k);
			Py_DECREF(o);
			return not_ours();
		}
		v = reply_build(&p, end, 0);
		if (v == NULL) {
			Py_DECREF(k);
			Py_DECREF(o);
			return NULL;
		}
		rc = PyDict_SetItem(o, k, v);
		Py_DECREF(k);
		Py_DECREF(v);
		if (rc < 0) {
			Py_DECREF(o);
			return NULL;
		}
	}
	*pp = p;
	return o;
}

/* Step over one object of a scanned reply. */
void reply_skip(const unsigned char **pp)
{
	const unsigned char *p = *pp;
	unsigned b = *p++;
	uint64_t n = 0, items = 0;

	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
		/* nothing more */
	} else if (b <= 0x8f) {
		items = 2 * (uint64_t)(b & 0x0f);
	} else if (b <= 0x9f) {
		items = b & 0x0f;
	} else if (b <= 0xbf) {
		p += b & 0x1f;
	} else {
		switch (b) {
		case 0xc4: n = be(p, 1); p += 1 + n; break;
		case 0xc5: n = be(p, 2); p += 2 + n; break;
		case 0xc6: n = be(p, 4); p += 4 + n; break;
		case 0xca: p += 4; break;
		case 0xcb: p += 8; break;
		case 0xcc: case 0xd0: p += 1; break;
		case 0xcd: case 0xd1: p += 2; break;
		case 0xce: case 0xd2: p += 4; break;
		case 0xcf: case 0xd3: p += 8; break;
		case 0xd9: n = be(p, 1); p += 1 + n; break;
		case 0xda: n = be(p, 2); p += 2 + n; break;
		case 0xdb: n = be(p, 4); p += 4 + n; break;
		case 0xdc: items = be(p, 2); p += 2; break;
		case 0xdd: items = be(p, 4); p += 4; break;
		case 0xde: items = 2 * be(p, 2); p += 2; break;
		case 0xdf: items = 2 * be(p, 4); p += 4; break;
		}
	}
	*pp = p;
	while (items-- > 0)
		reply_skip(pp);
}

/*
 * The value of a reduce's result map ({"value": ..., "count": ...}) at p,
 * without the map: what building the map and reading ["value"] gives (the
 * last "value" key's, as a dict keeps). 1 with a new reference in
 * *ret; 0 where that way does not apply (no map, no "value", a key that
 * is no string or number) and the map is built after all.
 */
int reply_map_value(const unsigned char *p, const unsigned char *end, PyObject **ret)
{
	const unsigned char *at = NULL;
	unsigned b = *p++;
	uint64_t n;

	if (b >= 0x80 && b <= 0x8f) {
		n = b & 0x0f;
	} else if (b == 0xde || b == 0xdf) {
		n = be(p, b == 0xde ? 2 : 4);
		p += b == 0xde ? 2 : 4;
	} else {
		return 0;
	}
	while (n-- > 0) {
		const unsigned char *k = p;
		uint64_t len;

		if (p >= end)
			return 0;
		b = *k;
		if ((b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb)) {
			int w = b <= 0xbf ? 0 : b == 0xd9 ? 1 : b == 0xda ? 2 : 4;

			len = w ? be(k + 1, w) : (b & 0x1f);
			reply_skip(&p);
			if (len == 5 && memcmp(p - 5, "value", 5) == 0) {
				at = p;
			}
		} else if (b >= 0x90 && b <= 0x9f) {
			return 0;   /* (the scan leaves no container as a key) */
		} else if (b >= 0x80 && b <= 0x8f) {
			return 0;
		} else if (b == 0xdc || b == 0xdd || b == 0xde || b == 0xdf) {
			return 0;
		} else {
			reply_skip(&p);  /* a number, nil, a bool or bytes: never "value" */
		}
		if (p >= end)
			return 0;
		reply_skip(&p);
	}
	if (at == NULL)
		return 0;
	*ret = reply_build(&at, end, 0);
	if (*ret == NULL) {
		PyErr_Clear();
		return 0;
	}
	return 1;
}
