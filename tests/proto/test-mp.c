/*
 * The msgpack token decoder and writers: every format by hand, the writers'
 * shortest encodings, and both checked against msgpack-c as an independent
 * reference.
 */
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include <string.h>

#include "check.h"
#include "proto/mp.h"

/* Decode hex as one token; check its size, and that every prefix is partial. */
static gr_mp_token tok(const char *hex, int want_size)
{
	gr_mp_token t;
	gr_buf b;
	int r;

	gr_buf_init(&b);
	HEX(&b, hex);
	for (size_t i = 0; i < (size_t)want_size; i++)
		CHECK_MSG(gr_mp_next(b.data, i, &t) == 0, "%s: prefix %zu", hex, i);
	r = gr_mp_next(b.data, b.len, &t);
	CHECK_MSG(r == want_size, "%s: got %d, want %d", hex, r, want_size);
	gr_buf_deinit(&b);
	return t;
}

static void test_decode(void)
{
	gr_mp_token t;
	uint8_t c1 = 0xc1;

	t = tok("00", 1);
	CHECK(t.type == GR_MP_UINT && t.u.u == 0);
	t = tok("7f", 1);
	CHECK(t.type == GR_MP_UINT && t.u.u == 127);
	t = tok("e0", 1);
	CHECK(t.type == GR_MP_INT && t.u.i == -32);
	t = tok("ff", 1);
	CHECK(t.type == GR_MP_INT && t.u.i == -1);
	t = tok("cc ff", 2);
	CHECK(t.type == GR_MP_UINT && t.u.u == 255);
	t = tok("cd 12 34", 3);
	CHECK(t.type == GR_MP_UINT && t.u.u == 0x1234);
	t = tok("ce ff ff ff ff", 5);
	CHECK(t.type == GR_MP_UINT && t.u.u == UINT32_MAX);
	t = tok("cf ff ff ff ff ff ff ff ff", 9);
	CHECK(t.type == GR_MP_UINT && t.u.u == UINT64_MAX);
	t = tok("d0 80", 2);
	CHECK(t.type == GR_MP_INT && t.u.i == -128);
	t = tok("d0 05", 2); /* a non-negative int8 is a UINT */
	CHECK(t.type == GR_MP_UINT && t.u.u == 5);
	t = tok("d1 80 00", 3);
	CHECK(t.type == GR_MP_INT && t.u.i == INT16_MIN);
	t = tok("d2 80 00 00 00", 5);
	CHECK(t.type == GR_MP_INT && t.u.i == INT32_MIN);
	t = tok("d2 7f ff ff ff", 5);
	CHECK(t.type == GR_MP_UINT && t.u.u == INT32_MAX);
	t = tok("d3 80 00 00 00 00 00 00 00", 9);
	CHECK(t.type == GR_MP_INT && t.u.i == INT64_MIN);
	t = tok("d3 ff ff ff ff ff ff ff fe", 9);
	CHECK(t.type == GR_MP_INT && t.u.i == -2);
	t = tok("ca 3f c0 00 00", 5);
	CHECK(t.type == GR_MP_FLOAT && t.is_f32 && t.u.f == 1.5);
	t = tok("cb 40 09 21 fb 54 44 2d 18", 9);
	CHECK(t.type == GR_MP_FLOAT && !t.is_f32 && t.u.f == 3.141592653589793);
	t = tok("cb 7f f8 00 00 00 00 00 00", 9);
	CHECK(t.type == GR_MP_FLOAT && isnan(t.u.f));
	t = tok("c0", 1);
	CHECK(t.type == GR_MP_NIL);
	t = tok("c2", 1);
	CHECK(t.type == GR_MP_BOOL && !t.u.b);
	t = tok("c3", 1);
	CHECK(t.type == GR_MP_BOOL && t.u.b);
	t = tok("a0", 1);
	CHECK(t.type == GR_MP_STR && t.len == 0);
	t = tok("bf", 1);
	CHECK(t.type == GR_MP_STR && t.len == 31);
	t = tok("d9 20", 2);
	CHECK(t.type == GR_MP_STR && t.len == 32);
	t = tok("da 01 00", 3);
	CHECK(t.type == GR_MP_STR && t.len == 256);
	t = tok("db ff ff ff ff", 5);
	CHECK(t.type == GR_MP_STR && t.len == UINT32_MAX);
	t = tok("c4 03", 2);
	CHECK(t.type == GR_MP_BIN && t.len == 3);
	t = tok("c5 01 00", 3);
	CHECK(t.type == GR_MP_BIN && t.len == 256);
	t = tok("c6 ff ff ff ff", 5);
	CHECK(t.type == GR_MP_BIN && t.len == UINT32_MAX);
	t = tok("90", 1);
	CHECK(t.type == GR_MP_ARRAY && t.len == 0);
	t = tok("9f", 1);
	CHECK(t.type == GR_MP_ARRAY && t.len == 15);
	t = tok("dc 00 10", 3);
	CHECK(t.type == GR_MP_ARRAY && t.len == 16);
	t = tok("dd ff ff ff ff", 5);
	CHECK(t.type == GR_MP_ARRAY && t.len == UINT32_MAX);
	t = tok("80", 1);
	CHECK(t.type == GR_MP_MAP && t.len == 0);
	t = tok("8f", 1);
	CHECK(t.type == GR_MP_MAP && t.len == 15);
	t = tok("de 00 10", 3);
	CHECK(t.type == GR_MP_MAP && t.len == 16);
	t = tok("df 00 01 00 00", 5);
	CHECK(t.type == GR_MP_MAP && t.len == 65536);
	t = tok("d4 05", 2);
	CHECK(t.type == GR_MP_EXT && t.len == 1 && t.ext_type == 5);
	t = tok("d5 ff", 2);
	CHECK(t.type == GR_MP_EXT && t.len == 2 && t.ext_type == -1);
	t = tok("d6 01", 2);
	CHECK(t.type == GR_MP_EXT && t.len == 4);
	t = tok("d7 01", 2);
	CHECK(t.type == GR_MP_EXT && t.len == 8);
	t = tok("d8 01", 2);
	CHECK(t.type == GR_MP_EXT && t.len == 16);
	t = tok("c7 03 07", 3);
	CHECK(t.type == GR_MP_EXT && t.len == 3 && t.ext_type == 7);
	t = tok("c8 01 00 07", 4);
	CHECK(t.type == GR_MP_EXT && t.len == 256 && t.ext_type == 7);
	t = tok("c9 00 01 00 00 80", 6);
	CHECK(t.type == GR_MP_EXT && t.len == 65536 && t.ext_type == -128);

	CHECK(gr_mp_next(&c1, 1, &t) == -EBADMSG);
	CHECK(gr_mp_next(&c1, 0, &t) == 0);

	/* Every byte value either decodes or is 0xc1. */
	for (unsigned c = 0; c < 256; c++) {
		uint8_t buf[9] = { (uint8_t)c };
		int r = gr_mp_next(buf, sizeof(buf), &t);

		CHECK(c == 0xc1 ? r == -EBADMSG : (r >= 1 && r <= 9));
	}
}

/* The encoding the writers must choose, byte for byte. */
static void expect(gr_buf *b, const char *hex)
{
	gr_buf want;

	gr_buf_init(&want);
	HEX(&want, hex);
	CHECK_MSG(b->len == want.len && memcmp(b->data, want.data, want.len) == 0,
		  "want %s (%zu bytes), got %zu bytes", hex, want.len, b->len);
	gr_buf_deinit(&want);
	b->len = 0;
}

static void test_shortest(void)
{
	gr_buf b;
	char s[70000];

	memset(s, 'x', sizeof(s));
	gr_buf_init(&b);
	CHECK(gr_mpw_uint(&b, 0) == 0);
	expect(&b, "00");
	CHECK(gr_mpw_uint(&b, 127) == 0);
	expect(&b, "7f");
	CHECK(gr_mpw_uint(&b, 128) == 0);
	expect(&b, "cc 80");
	CHECK(gr_mpw_uint(&b, 256) == 0);
	expect(&b, "cd 01 00");
	CHECK(gr_mpw_uint(&b, 65536) == 0);
	expect(&b, "ce 00 01 00 00");
	CHECK(gr_mpw_uint(&b, UINT64_C(1) << 32) == 0);
	expect(&b, "cf 00 00 00 01 00 00 00 00");
	CHECK(gr_mpw_int(&b, 5) == 0);
	expect(&b, "05");
	CHECK(gr_mpw_int(&b, -32) == 0);
	expect(&b, "e0");
	CHECK(gr_mpw_int(&b, -33) == 0);
	expect(&b, "d0 df");
	CHECK(gr_mpw_int(&b, -129) == 0);
	expect(&b, "d1 ff 7f");
	CHECK(gr_mpw_int(&b, -32769) == 0);
	expect(&b, "d2 ff ff 7f ff");
	CHECK(gr_mpw_int(&b, INT64_MIN) == 0);
	expect(&b, "d3 80 00 00 00 00 00 00 00");
	CHECK(gr_mpw_f64(&b, 1.0) == 0);
	expect(&b, "cb 3f f0 00 00 00 00 00 00");
	CHECK(gr_mpw_f32(&b, 1.5f) == 0);
	expect(&b, "ca 3f c0 00 00");
	CHECK(gr_mpw_nil(&b) == 0 && gr_mpw_bool(&b, true) == 0 && gr_mpw_bool(&b, false) == 0);
	expect(&b, "c0 c3 c2");
	CHECK(gr_mpw_cstr(&b, "op") == 0);
	expect(&b, "a2 6f 70");
	CHECK(gr_mpw_str(&b, s, 31) == 0);
	CHECK(b.len == 32 && b.data[0] == 0xbf);
	b.len = 0;
	CHECK(gr_mpw_str(&b, s, 32) == 0);
	CHECK(b.len == 34 && b.data[0] == 0xd9 && b.data[1] == 32);
	b.len = 0;
	CHECK(gr_mpw_str(&b, s, 256) == 0);
	CHECK(b.len == 259 && b.data[0] == 0xda);
	b.len = 0;
	CHECK(gr_mpw_str(&b, s, 65536) == 0);
	CHECK(b.len == 65541 && b.data[0] == 0xdb);
	b.len = 0;
	CHECK(gr_mpw_bin_header(&b, 0) == 0);
	expect(&b, "c4 00");
	CHECK(gr_mpw_bin_header(&b, 256) == 0);
	expect(&b, "c5 01 00");
	CHECK(gr_mpw_bin_header(&b, 65536) == 0);
	expect(&b, "c6 00 01 00 00");
	CHECK(gr_mpw_bin(&b, "ab", 2) == 0);
	expect(&b, "c4 02 61 62");
	CHECK(gr_mpw_array(&b, 15) == 0 && gr_mpw_array(&b, 16) == 0 && gr_mpw_array(&b, 65536) == 0);
	expect(&b, "9f dc 00 10 dd 00 01 00 00");
	CHECK(gr_mpw_map(&b, 15) == 0 && gr_mpw_map(&b, 16) == 0 && gr_mpw_map(&b, 65536) == 0);
	expect(&b, "8f de 00 10 df 00 01 00 00");
	CHECK(gr_mpw_str(&b, s, (size_t)UINT32_MAX + 1) == -E2BIG);
	CHECK(b.len == 0);

	/* gr_buf bookkeeping */
	CHECK(gr_buf_append(&b, "abcdef", 6) == 0);
	gr_buf_consume(&b, 2);
	CHECK(b.len == 4 && memcmp(b.data, "cdef", 4) == 0);
	gr_buf_consume(&b, 10);
	CHECK(b.len == 0);
	CHECK(gr_buf_reserve(&b, SIZE_MAX) == -ENOMEM);
	gr_buf_deinit(&b);
	gr_buf_deinit(&b); /* idempotent */
}

/* Values the writer must round-trip: boundaries of every encoding. */
static const int64_t ints[] = {
	0, 1, 31, 127, 128, 255, 256, 65535, 65536, INT32_MAX, (int64_t)UINT32_MAX,
	(int64_t)UINT32_MAX + 1, INT64_MAX, -1, -31, -32, -33, -127, -128, -129,
	-32767, -32768, -32769, INT32_MIN, (int64_t)INT32_MIN - 1, INT64_MIN,
};
static const double floats[] = { 0.0, -0.0, 1.0, -1.5, 1e300, 5e-324, INFINITY, -INFINITY };
static const uint32_t lens[] = { 0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536 };

/* Write items with our writers; read them with msgpack-c and with gr_mp_next. */
static void test_against_msgpack_c(void)
{
	static char body[65536];
	msgpack_unpacked u;
	gr_buf b;
	size_t off = 0, ours = 0;
	unsigned n = 0;

	gr_buf_init(&b);
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		CHECK(gr_mpw_int(&b, ints[i]) == 0);
	CHECK(gr_mpw_uint(&b, UINT64_MAX) == 0);
	for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); i++)
		CHECK(gr_mpw_f64(&b, floats[i]) == 0);
	CHECK(gr_mpw_f32(&b, 0.25f) == 0);
	CHECK(gr_mpw_nil(&b) == 0 && gr_mpw_bool(&b, true) == 0);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		memset(body, 'a' + (int)i, lens[i]);
		CHECK(gr_mpw_str(&b, body, lens[i]) == 0);
		CHECK(gr_mpw_bin(&b, body, lens[i]) == 0);
	}
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		CHECK(gr_mpw_array(&b, lens[i]) == 0);
		for (uint32_t j = 0; j < lens[i]; j++)
			CHECK(gr_mpw_uint(&b, j) == 0);
		CHECK(gr_mpw_map(&b, lens[i]) == 0);
		for (uint32_t j = 0; j < lens[i]; j++)
			CHECK(gr_mpw_int(&b, -(int64_t)j) == 0 && gr_mpw_nil(&b) == 0);
	}

	msgpack_unpacked_init(&u);
	while (off < b.len) {
		size_t before = off;
		msgpack_object *o;
		unsigned k = n++;

		CHECK(msgpack_unpack_next(&u, (const char *)b.data, b.len, &off) == MSGPACK_UNPACK_SUCCESS);
		o = &u.data;
		(void)before;
		if (k < sizeof(ints) / sizeof(ints[0])) {
			int64_t v = ints[k];

			if (v >= 0)
				CHECK(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 == (uint64_t)v);
			else
				CHECK(o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == v);
			continue;
		}
		k -= sizeof(ints) / sizeof(ints[0]);
		if (k == 0) {
			CHECK(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 == UINT64_MAX);
			continue;
		}
		k--;
		if (k < sizeof(floats) / sizeof(floats[0])) {
			CHECK(o->type == MSGPACK_OBJECT_FLOAT64);
			CHECK(memcmp(&o->via.f64, &floats[k], sizeof(double)) == 0);
			continue;
		}
		k -= sizeof(floats) / sizeof(floats[0]);
		if (k == 0) {
			CHECK(o->type == MSGPACK_OBJECT_FLOAT32 && o->via.f64 == 0.25);
			continue;
		}
		if (k == 1) {
			CHECK(o->type == MSGPACK_OBJECT_NIL);
			continue;
		}
		if (k == 2) {
			CHECK(o->type == MSGPACK_OBJECT_BOOLEAN && o->via.boolean);
			continue;
		}
		k -= 3;
		if (k < 2 * sizeof(lens) / sizeof(lens[0])) {
			uint32_t len = lens[k / 2];

			if (k % 2 == 0)
				CHECK(o->type == MSGPACK_OBJECT_STR && o->via.str.size == len &&
				      (len == 0 || o->via.str.ptr[len - 1] == 'a' + (int)(k / 2)));
			else
				CHECK(o->type == MSGPACK_OBJECT_BIN && o->via.bin.size == len);
			continue;
		}
		k -= 2 * sizeof(lens) / sizeof(lens[0]);
		{
			uint32_t len = lens[k / 2];

			if (k % 2 == 0) {
				CHECK(o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size == len);
				for (uint32_t j = 0; j < len; j++)
					CHECK(o->via.array.ptr[j].via.u64 == j);
			} else {
				CHECK(o->type == MSGPACK_OBJECT_MAP && o->via.map.size == len);
				for (uint32_t j = 1; j < len; j++)
					CHECK(o->via.map.ptr[j].key.via.i64 == -(int64_t)j &&
					      o->via.map.ptr[j].val.type == MSGPACK_OBJECT_NIL);
			}
		}
	}
	CHECK(n == sizeof(ints) / sizeof(ints[0]) + 1 + sizeof(floats) / sizeof(floats[0]) + 3 +
			   4 * sizeof(lens) / sizeof(lens[0]));
	msgpack_unpacked_destroy(&u);

	/* Our decoder walks the same bytes to the same end. */
	while (ours < b.len) {
		gr_mp_token t;
		int r = gr_mp_next(b.data + ours, b.len - ours, &t);

		CHECK(r > 0);
		ours += (size_t)r;
		if (t.type == GR_MP_STR || t.type == GR_MP_BIN)
			ours += t.len;
	}
	CHECK(ours == b.len);
	gr_buf_deinit(&b);
}

/* Bytes packed by msgpack-c, every format it can write, read by gr_mp_next. */
static void test_msgpack_c_to_ours(void)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	const uint8_t *p;
	size_t off = 0;
	gr_mp_token t;
	int r;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
		msgpack_pack_int64(&pk, ints[i]);
	/* fixed-width encodings of small values */
	msgpack_pack_fix_uint8(&pk, 1);
	msgpack_pack_fix_uint16(&pk, 2);
	msgpack_pack_fix_uint32(&pk, 3);
	msgpack_pack_fix_uint64(&pk, 4);
	msgpack_pack_fix_int8(&pk, -5);
	msgpack_pack_fix_int16(&pk, -6);
	msgpack_pack_fix_int32(&pk, -7);
	msgpack_pack_fix_int64(&pk, -8);
	msgpack_pack_float(&pk, 2.5f);
	msgpack_pack_double(&pk, -0.125);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		static char body[65536];

		msgpack_pack_str_with_body(&pk, body, lens[i]);
		msgpack_pack_bin_with_body(&pk, body, lens[i]);
		msgpack_pack_array(&pk, lens[i]);
		msgpack_pack_map(&pk, lens[i]);
	}
	{
		static const size_t ext_lens[] = { 1, 2, 4, 8, 16, 3, 256, 65536 };
		static char body[65536];

		for (size_t i = 0; i < sizeof(ext_lens) / sizeof(ext_lens[0]); i++)
			msgpack_pack_ext_with_body(&pk, body, ext_lens[i], (int8_t)(i - 3));
	}

	p = (const uint8_t *)sb.data;
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		r = gr_mp_next(p + off, sb.size - off, &t);
		CHECK(r > 0);
		off += (size_t)r;
		if (ints[i] >= 0)
			CHECK(t.type == GR_MP_UINT && t.u.u == (uint64_t)ints[i]);
		else
			CHECK(t.type == GR_MP_INT && t.u.i == ints[i]);
	}
	for (int i = 1; i <= 8; i++) {
		r = gr_mp_next(p + off, sb.size - off, &t);
		CHECK(r == (i <= 4 ? 1 + (1 << (i - 1)) : 1 + (1 << (i - 5))));
		off += (size_t)r;
		if (i <= 4)
			CHECK(t.type == GR_MP_UINT && t.u.u == (uint64_t)i);
		else
			CHECK(t.type == GR_MP_INT && t.u.i == -i);
	}
	r = gr_mp_next(p + off, sb.size - off, &t);
	CHECK(r == 5 && t.type == GR_MP_FLOAT && t.is_f32 && t.u.f == 2.5);
	off += 5;
	r = gr_mp_next(p + off, sb.size - off, &t);
	CHECK(r == 9 && t.type == GR_MP_FLOAT && !t.is_f32 && t.u.f == -0.125);
	off += 9;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		static const gr_mp_type types[4] = { GR_MP_STR, GR_MP_BIN, GR_MP_ARRAY, GR_MP_MAP };

		for (int k = 0; k < 4; k++) {
			r = gr_mp_next(p + off, sb.size - off, &t);
			CHECK(r > 0 && t.type == types[k] && t.len == lens[i]);
			off += (size_t)r;
			if (k < 2)
				off += t.len;
		}
	}
	{
		static const size_t ext_lens[] = { 1, 2, 4, 8, 16, 3, 256, 65536 };

		for (size_t i = 0; i < sizeof(ext_lens) / sizeof(ext_lens[0]); i++) {
			r = gr_mp_next(p + off, sb.size - off, &t);
			CHECK(r > 0 && t.type == GR_MP_EXT && t.len == ext_lens[i] &&
			      t.ext_type == (int8_t)(i - 3));
			off += (size_t)r + t.len;
		}
	}
	CHECK(off == sb.size);
	msgpack_sbuffer_destroy(&sb);
}

int main(void)
{
	test_decode();
	test_shortest();
	test_against_msgpack_c();
	test_msgpack_c_to_ours();
	return 0;
}
