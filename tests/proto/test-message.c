/*
 * The message writers and the response check: what one side writes, the
 * other side reads back (our request parser, our object reader, and
 * msgpack-c as an outside opinion), and the bytes of PROTOCOL.md's worked
 * example are exactly what the writers produce.
 */
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include <string.h>

#include "check.h"
#include "proto/message.h"
#include "proto/obj.h"
#include "proto/request.h"

static const gr_obj_limits lim = { .max_depth = 8, .max_items = 256, .max_str = 4096 };

static void expect_hex(const gr_buf *b, const char *hex)
{
	gr_buf want;

	gr_buf_init(&want);
	HEX(&want, hex);
	CHECK_MSG(b->len == want.len && memcmp(b->data, want.data, want.len) == 0,
		  "bytes differ from %s", hex);
	gr_buf_deinit(&want);
}

/* The worked example of PROTOCOL.md, byte for byte. */
static void test_worked_example(void)
{
	static const int32_t data[2] = { 1, 2 };
	gr_value v = { .kind = GR_KIND_I64, .i = 3 };
	gr_buf b;

	gr_buf_init(&b);
	CHECK(gr_msg_write_reduce_header(&b, 1, GR_OP_SUM, GR_DT_I32, sizeof(data)) == 0);
	CHECK(gr_buf_append(&b, data, sizeof(data)) == 0);
	expect_hex(&b, "94 00 01 a6 72 65 64 75 63 65 91 83 a2 6f 70 a3 73 75 6d"
		       " a5 64 74 79 70 65 a3 69 33 32 a4 64 61 74 61 c4 08"
		       " 01 00 00 00 02 00 00 00");
	b.len = 0;
	CHECK(gr_msg_write_response_value(&b, 1, &v, 2) == 0);
	expect_hex(&b, "94 01 01 c0 82 a5 76 61 6c 75 65 03 a5 63 6f 75 6e 74 02");
	b.len = 0;
	/* argmin of [1, 2]: the value 1 at index 0 */
	v.i = 1;
	CHECK(gr_msg_write_response_index(&b, 1, &v, 0, 2) == 0);
	expect_hex(&b, "94 01 01 c0 83 a5 76 61 6c 75 65 01 a5 63 6f 75 6e 74 02"
		       " a5 69 6e 64 65 78 00");
	b.len = 0;
	CHECK(gr_msg_write_error(&b, 7, GR_ERR_UNKNOWN_METHOD, "unknown method 'nope'") == 0);
	expect_hex(&b, "94 01 07 82 a4 63 6f 64 65 ae 75 6e 6b 6e 6f 77 6e 5f 6d 65 74 68 6f 64"
		       " a7 6d 65 73 73 61 67 65 b5 75 6e 6b 6e 6f 77 6e 20 6d 65 74 68 6f 64 20"
		       " 27 6e 6f 70 65 27 c0");
	b.len = 0;
	CHECK(gr_msg_write_request(&b, 9, GR_METHOD_PING) == 0);
	expect_hex(&b, "94 00 09 a4 70 69 6e 67 90");
	b.len = 0;
	CHECK(gr_msg_write_response_header(&b, 9) == 0 && gr_mpw_cstr(&b, "pong") == 0);
	expect_hex(&b, "94 01 09 c0 a4 70 6f 6e 67");
	gr_buf_deinit(&b);
}

/* Requests the client writes are what the daemon's parser accepts. */
static void test_requests_parse(void)
{
	static const gr_method methods[] = { GR_METHOD_PING, GR_METHOD_STATS, GR_METHOD_INFO };
	gr_req_parser *p;
	gr_req_event ev;
	const gr_req *r;
	uint8_t dst[64];
	double payload[3] = { 1.0, -2.5, 4.0 };
	gr_buf b;
	size_t n;

	CHECK(gr_req_parser_new(NULL, &p) == 0);
	gr_buf_init(&b);
	for (unsigned i = 0; i < 3; i++) {
		b.len = 0;
		CHECK(gr_msg_write_request(&b, 4000000000u + i, methods[i]) == 0);
		n = gr_req_parser_feed(p, b.data, b.len, &ev);
		r = gr_req_parser_req(p);
		CHECK(n == b.len && ev == GR_REQ_DONE && r->method == methods[i] &&
		      r->has_msgid && r->msgid == 4000000000u + i);
	}
	for (int op = 0; op < GR_OP_N; op++) {
		for (int dt = 0; dt < GR_DT_N; dt++) {
			b.len = 0;
			CHECK(gr_msg_write_reduce_header(&b, 77, op, dt, 24) == 0);
			CHECK(gr_buf_append(&b, payload, sizeof(payload)) == 0);
			n = gr_req_parser_feed(p, b.data, b.len, &ev);
			r = gr_req_parser_req(p);
			CHECK(ev == GR_REQ_DATA && r->has_op && r->op == (gr_op)op && r->has_dtype &&
			      r->dtype == (gr_dtype)dt && r->data_bytes == 24 && !r->data_is_array);
			gr_req_parser_set_dest(p, dst, sizeof(dst));
			n += gr_req_parser_feed(p, b.data + n, b.len - n, &ev);
			CHECK(n == b.len && ev == GR_REQ_DONE && r->msgid == 77 && r->data_done == 24);
			CHECK(memcmp(dst, payload, 24) == 0);
		}
	}
	/* The header of a 4 GiB - 1 payload uses bin32. */
	b.len = 0;
	CHECK(gr_msg_write_reduce_header(&b, 1, GR_OP_SUM, GR_DT_U32, UINT32_MAX) == 0);
	CHECK(b.len >= 5 && b.data[b.len - 5] == 0xc6);

	/* A parameterized header for a future method shape. */
	b.len = 0;
	CHECK(gr_msg_write_request_header(&b, 5, GR_METHOD_PING, 1) == 0 && gr_mpw_uint(&b, 1) == 0);
	n = gr_req_parser_feed(p, b.data, b.len, &ev);
	CHECK(ev == GR_REQ_ERROR && gr_req_parser_req(p)->err == GR_ERR_INVALID_PARAMS);
	n += gr_req_parser_feed(p, b.data + n, b.len - n, &ev);
	CHECK(n == b.len && ev == GR_REQ_NEED_MORE && gr_req_parser_idle(p));

	/* Arguments outside the protocol. */
	b.len = 0;
	CHECK(gr_msg_write_request(&b, 1, GR_METHOD_NONE) == -EINVAL);
	CHECK(gr_msg_write_request(&b, 1, (gr_method)42) == -EINVAL);
	CHECK(gr_msg_write_reduce_header(&b, 1, GR_OP_N, GR_DT_I32, 0) == -EINVAL);
	CHECK(gr_msg_write_reduce_header(&b, 1, GR_OP_SUM, GR_DT_N, 0) == -EINVAL);
	CHECK(gr_msg_write_error(&b, 1, GR_OK, "x") == -EINVAL);
	CHECK(gr_msg_write_error(&b, 1, GR_ERR_N, "x") == -EINVAL);
	CHECK(b.len == 0);

	gr_buf_deinit(&b);
	gr_req_parser_free(p);
}

/* Parse one whole message with our reader and check the response shape. */
static int parse(const gr_buf *b, gr_obj_tree *t, uint32_t *msgid, gr_err *code, const char **msg,
		 uint32_t *msglen, const gr_obj **result)
{
	CHECK(gr_obj_parse(b->data, b->len, &lim, t) == (long)b->len);
	return gr_msg_parse_response(t->root, msgid, code, msg, msglen, result);
}

/* And msgpack-c's reading of the same bytes: [1, msgid, nil, {value, count}]. */
static msgpack_object_type c_value_type(const gr_buf *b)
{
	msgpack_unpacked u;
	msgpack_object_type ty;
	size_t off = 0;

	msgpack_unpacked_init(&u);
	CHECK(msgpack_unpack_next(&u, (const char *)b->data, b->len, &off) == MSGPACK_UNPACK_SUCCESS);
	CHECK(off == b->len && u.data.type == MSGPACK_OBJECT_ARRAY && u.data.via.array.size == 4);
	CHECK(u.data.via.array.ptr[2].type == MSGPACK_OBJECT_NIL);
	CHECK(u.data.via.array.ptr[3].type == MSGPACK_OBJECT_MAP);
	ty = u.data.via.array.ptr[3].via.map.ptr[0].val.type;
	msgpack_unpacked_destroy(&u);
	return ty;
}

static void test_responses(void)
{
	static const gr_value values[] = {
		{ .kind = GR_KIND_I64, .i = -5 },
		{ .kind = GR_KIND_I64, .i = INT64_MIN },
		{ .kind = GR_KIND_I64, .i = 42 },
		{ .kind = GR_KIND_U64, .u = UINT64_MAX },
		{ .kind = GR_KIND_U64, .u = 0 },
		{ .kind = GR_KIND_F64, .f = 2.0 },
		{ .kind = GR_KIND_F64, .f = -0.0 },
		{ .kind = GR_KIND_F64, .f = NAN },
		{ .kind = GR_KIND_F64, .f = 1e308 },
	};
	gr_obj_tree t = { 0 };
	const gr_obj *result;
	const char *msg;
	uint32_t msgid, msglen;
	gr_value got;
	uint64_t count;
	gr_err code;
	gr_buf b;

	gr_buf_init(&b);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		const gr_value *v = &values[i];

		b.len = 0;
		CHECK(gr_msg_write_response_value(&b, 12345, v, 1000 + i) == 0);
		CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0);
		CHECK(msgid == 12345 && code == GR_OK && msg == NULL && msglen == 0 && result);
		CHECK(gr_msg_parse_reduce_result(result, v->kind, &got, &count) == 0);
		CHECK(count == 1000 + i && got.kind == v->kind);
		switch (v->kind) {
		case GR_KIND_I64:
			CHECK(got.i == v->i);
			CHECK(c_value_type(&b) == (v->i < 0 ? MSGPACK_OBJECT_NEGATIVE_INTEGER
							    : MSGPACK_OBJECT_POSITIVE_INTEGER));
			break;
		case GR_KIND_U64:
			CHECK(got.u == v->u);
			CHECK(c_value_type(&b) == MSGPACK_OBJECT_POSITIVE_INTEGER);
			/* a uint above INT64_MAX is no i64 */
			if (v->u > INT64_MAX)
				CHECK(gr_msg_parse_reduce_result(result, GR_KIND_I64, &got, &count) == -EBADMSG);
			break;
		default:
			CHECK(memcmp(&got.f, &v->f, sizeof(double)) == 0 || (isnan(got.f) && isnan(v->f)));
			/* float64 on the wire, even when integral */
			CHECK(c_value_type(&b) == MSGPACK_OBJECT_FLOAT64);
			CHECK(gr_msg_parse_reduce_result(result, GR_KIND_I64, &got, &count) == -EBADMSG);
			CHECK(gr_msg_parse_reduce_result(result, GR_KIND_U64, &got, &count) == -EBADMSG);
			break;
		}
		gr_obj_tree_deinit(&t);
		/* no index in a plain result; the one written in argmin's */
		uint64_t index = 7;
		b.len = 0;
		CHECK(gr_msg_write_response_value(&b, 1, v, 3) == 0);
		CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0);
		CHECK(gr_msg_parse_reduce_index(result, &index) == -EBADMSG && index == 7);
		gr_obj_tree_deinit(&t);
		b.len = 0;
		CHECK(gr_msg_write_response_index(&b, 1, v, UINT64_MAX - i, 3) == 0);
		CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0);
		CHECK(gr_msg_parse_reduce_result(result, v->kind, &got, &count) == 0 && count == 3);
		CHECK(gr_msg_parse_reduce_index(result, &index) == 0 && index == UINT64_MAX - i);
		gr_obj_tree_deinit(&t);
	}
	{
		gr_value bad = { .kind = (gr_kind)9 };

		b.len = 0;
		CHECK(gr_msg_write_response_value(&b, 1, &bad, 0) == -EINVAL && b.len == 0);
	}

	/* Errors. */
	for (int e = GR_ERR_INVALID_REQUEST; e < GR_ERR_N; e++) {
		b.len = 0;
		CHECK(gr_msg_write_error(&b, (uint32_t)e, (gr_err)e, "it went wrong") == 0);
		CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0);
		CHECK(msgid == (uint32_t)e && code == (gr_err)e && result == NULL);
		CHECK(msglen == 13 && memcmp(msg, "it went wrong", 13) == 0);
		gr_obj_tree_deinit(&t);
	}
	b.len = 0;
	CHECK(gr_msg_write_error(&b, 0, GR_ERR_BUSY, NULL) == 0);
	CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0);
	CHECK(msgid == 0 && code == GR_ERR_BUSY && msglen == 4 && memcmp(msg, "busy", 4) == 0);
	gr_obj_tree_deinit(&t);

	/* Other results after the header: stats maps, "pong". */
	b.len = 0;
	CHECK(gr_msg_write_response_header(&b, 3) == 0 && gr_mpw_cstr(&b, "pong") == 0);
	CHECK(parse(&b, &t, &msgid, NULL, NULL, NULL, &result) == 0);
	CHECK(msgid == 3 && result->type == GR_MP_STR && result->len == 4 &&
	      memcmp(result->v.str, "pong", 4) == 0);
	CHECK(gr_msg_parse_reduce_result(result, GR_KIND_F64, &got, &count) == -EBADMSG);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);
}

static void test_bad_responses(void)
{
	static const struct {
		const char *hex;
		int want;
	} cases[] = {
		{ "94 01 01 c0 c0", 0 },                    /* nil result is a result */
		{ "93 01 01 c0", -EBADMSG },                /* three elements */
		{ "01", -EBADMSG },                         /* not an array */
		{ "94 00 01 c0 c0", -EBADMSG },             /* a request */
		{ "94 02 01 c0 c0", -EBADMSG },             /* a notification */
		{ "94 01 ff c0 c0", -EBADMSG },             /* msgid -1 */
		{ "94 01 cf 00 00 00 01 00 00 00 00 c0 c0", -EBADMSG }, /* msgid 2^32 */
		{ "94 01 a1 31 c0 c0", -EBADMSG },          /* msgid a string */
		{ "94 01 01 05 c0", -EBADMSG },             /* error neither nil nor map */
		{ "94 01 01 80 c0", -EBADMSG },             /* error without code */
		{ "94 01 01 81 a4 63 6f 64 65 05 c0", -EBADMSG },  /* code not a string */
		{ "94 01 01 81 a4 63 6f 64 65 a4 62 75 73 79 05", -EBADMSG }, /* error and result */
		{ "94 01 01 82 a4 63 6f 64 65 a4 62 75 73 79 a7 6d 65 73 73 61 67 65 05 c0",
		  -EBADMSG },                               /* message not a string */
		{ "94 01 01 81 a4 63 6f 64 65 a4 62 75 73 79 c0", 0 }, /* message optional */
	};
	gr_buf b;

	gr_buf_init(&b);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gr_obj_tree t = { 0 };

		b.len = 0;
		HEX(&b, cases[i].hex);
		CHECK(gr_obj_parse(b.data, b.len, &lim, &t) == (long)b.len);
		CHECK_MSG(gr_msg_parse_response(t.root, NULL, NULL, NULL, NULL, NULL) == cases[i].want,
			  "%s", cases[i].hex);
		gr_obj_tree_deinit(&t);
	}
	/* A code from a newer server reads as internal. */
	{
		gr_obj_tree t = { 0 };
		gr_err code = GR_OK;

		b.len = 0;
		HEX(&b, "94 01 01 81 a4 63 6f 64 65 a3 6e 65 77 c0");
		CHECK(gr_obj_parse(b.data, b.len, &lim, &t) == (long)b.len);
		CHECK(gr_msg_parse_response(t.root, NULL, &code, NULL, NULL, NULL) == 0);
		CHECK(code == GR_ERR_INTERNAL);
		gr_obj_tree_deinit(&t);
	}
	CHECK(gr_msg_parse_response(NULL, NULL, NULL, NULL, NULL, NULL) == -EBADMSG);
	/* reduce results missing pieces */
	{
		gr_obj_tree t = { 0 };
		gr_value v;

		b.len = 0;
		HEX(&b, "81 a5 76 61 6c 75 65 01"); /* no count */
		CHECK(gr_obj_parse(b.data, b.len, &lim, &t) > 0);
		CHECK(gr_msg_parse_reduce_result(t.root, GR_KIND_U64, &v, NULL) == -EBADMSG);
		gr_obj_tree_deinit(&t);
		b.len = 0;
		HEX(&b, "82 a5 76 61 6c 75 65 ff a5 63 6f 75 6e 74 01"); /* -1 as u64 */
		CHECK(gr_obj_parse(b.data, b.len, &lim, &t) > 0);
		CHECK(gr_msg_parse_reduce_result(t.root, GR_KIND_U64, &v, NULL) == -EBADMSG);
		CHECK(gr_msg_parse_reduce_result(t.root, GR_KIND_I64, &v, NULL) == 0 && v.i == -1);
		gr_obj_tree_deinit(&t);
	}
	gr_buf_deinit(&b);
}

/* moments: PROTOCOL.md's example, and its result read back. */
static void test_moments(void)
{
	static const int32_t data[4] = { 1, 2, 3, 6 };
	gr_moments m = {
		.count = 4,
		.sum = { .kind = GR_KIND_I64, .i = 12 },
		.min = { .kind = GR_KIND_I64, .i = 1 },
		.max = { .kind = GR_KIND_I64, .i = 6 },
		.mean = 3.0,
		.var = 14.0 / 3.0,
	}, got;
	gr_obj_tree t;
	const gr_obj *result;
	const char *msg;
	uint32_t msgid, msglen;
	gr_err code;
	gr_buf b;

	gr_buf_init(&b);
	CHECK(gr_msg_write_reduce_moments_header(&b, 7, GR_DT_I32, 1, sizeof(data)) == 0);
	CHECK(gr_buf_append(&b, data, sizeof(data)) == 0);
	expect_hex(&b, "94 00 07 a6 72 65 64 75 63 65 91 84 a2 6f 70 a7 6d 6f 6d 65 6e 74 73"
		       " a5 64 74 79 70 65 a3 69 33 32 a4 64 64 6f 66 01 a4 64 61 74 61 c4 10"
		       " 01 00 00 00 02 00 00 00 03 00 00 00 06 00 00 00");
	b.len = 0;
	CHECK(gr_msg_write_response_moments(&b, 7, &m) == 0);
	expect_hex(&b, "94 01 07 c0 86 a5 63 6f 75 6e 74 04 a3 73 75 6d 0c a3 6d 69 6e 01"
		       " a3 6d 61 78 06 a4 6d 65 61 6e cb 40 08 00 00 00 00 00 00"
		       " a3 76 61 72 cb 40 12 aa aa aa aa aa ab");
	CHECK(parse(&b, &t, &msgid, &code, &msg, &msglen, &result) == 0 && msgid == 7);
	CHECK(gr_msg_parse_moments_result(result, GR_KIND_I64, &got) == 0);
	CHECK(got.count == 4 && got.sum.kind == GR_KIND_I64 && got.sum.i == 12 && got.min.i == 1 &&
	      got.max.i == 6 && got.mean == 3.0 && got.var == 14.0 / 3.0);
	/* the kinds are checked, and every key is needed */
	CHECK(gr_msg_parse_moments_result(result, GR_KIND_F64, &got) == -EBADMSG);
	CHECK(gr_msg_parse_reduce_result(result, GR_KIND_I64, NULL, NULL) == -EBADMSG);
	gr_obj_tree_deinit(&t);
	m.max.kind = GR_KIND_U64;
	b.len = 0;
	CHECK(gr_msg_write_response_moments(&b, 7, &m) == -EINVAL && b.len == 0);
	CHECK(gr_msg_write_reduce_moments_header(&b, 7, GR_DT_N, 0, 0) == -EINVAL);
	gr_buf_deinit(&b);
}

/* cumsum: PROTOCOL.md's example reply, header then values; a region's
 * reply; and the bin's limit. */
static void test_cumsum(void)
{
	static const double values[3] = { 1.0, 1.5, -1.5 };
	gr_buf b;

	gr_buf_init(&b);
	CHECK(gr_msg_write_response_cumsum_header(&b, 4, 3) == 0);
	CHECK(gr_buf_append(&b, values, sizeof(values)) == 0);
	expect_hex(&b, "94 01 04 c0 82 a5 63 6f 75 6e 74 03 a6 76 61 6c 75 65 73 c4 18 00 00 00 00"
		       " 00 00 f0 3f 00 00 00 00 00 00 f8 3f 00 00 00 00 00 00 f8 bf");
	b.len = 0;
	CHECK(gr_msg_write_response_cumsum_header(&b, 4, 0) == 0);
	expect_hex(&b, "94 01 04 c0 82 a5 63 6f 75 6e 74 00 a6 76 61 6c 75 65 73 c4 00");
	b.len = 0;
	CHECK(gr_msg_write_response_cumsum_header(&b, 4, 1u << 20) == 0);
	expect_hex(&b, "94 01 04 c0 82 a5 63 6f 75 6e 74 ce 00 10 00 00 a6 76 61 6c 75 65 73"
		       " c6 00 80 00 00");
	b.len = 0;
	CHECK(gr_msg_write_response_cumsum_header(&b, 4, UINT32_MAX / 8 + 1) == -E2BIG);
	CHECK(gr_msg_write_response_count(&b, 5, 1024) == 0);
	expect_hex(&b, "94 01 05 c0 81 a5 63 6f 75 6e 74 cd 04 00");
	gr_buf_deinit(&b);
}

int main(void)
{
	test_worked_example();
	test_requests_parse();
	test_responses();
	test_bad_responses();
	test_moments();
	test_cumsum();
	return 0;
}
