/*
 * Fuzz target: what a client makes of the daemon's replies (proto/obj.c,
 * proto/message.c), the way libgpured reads them. The input's first byte
 * chooses where to cut each message for the partial-read check; the rest
 * is the stream of replies.
 *
 * Each message is parsed with the client's limits and taken apart with
 * gr_msg_parse_response() and gr_msg_parse_reduce_result() for every
 * result kind, and its exact partial read with gr_fsum_parse() (proto/
 * fsum.h), then combined and rounded. Checked: a message that parses is
 * not taken for a whole one when cut short; every string points inside
 * the message and every container's items inside the tree; the tree,
 * written out again with the gr_mpw_* writers, parses back to the same
 * tree; a partial that reads is canonical and valid, combines with
 * itself and with the empty partial as the rules say, and a refused one
 * says why.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "math/fsum.h"
#include "proto/message.h"
#include "proto/obj.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every node of t lies in t's node array, every string in p[0..n). */
static void check_node(const gr_obj_tree *t, const gr_obj *o, const uint8_t *p, size_t n,
		       unsigned depth)
{
	uint64_t kids;

	CHECK(o >= t->nodes && o < t->nodes + t->n_nodes);
	CHECK(depth <= gr_msg_response_limits.max_depth + 1);
	switch (o->type) {
	case GR_MP_STR:
	case GR_MP_BIN:
		CHECK(o->len <= gr_msg_response_limits.max_str);
		CHECK(o->len == 0 || ((const uint8_t *)o->v.str >= p &&
				      (const uint8_t *)o->v.str + o->len <= p + n));
		break;
	case GR_MP_ARRAY:
	case GR_MP_MAP:
		kids = o->type == GR_MP_MAP ? 2 * (uint64_t)o->len : o->len;
		CHECK(kids <= t->n_nodes);
		if (kids == 0)
			break;
		CHECK(o->v.items > t->nodes && o->v.items + kids <= t->nodes + t->n_nodes);
		for (uint64_t i = 0; i < kids; i++)
			check_node(t, &o->v.items[i], p, n, depth + 1);
		break;
	case GR_MP_NIL:
	case GR_MP_BOOL:
	case GR_MP_UINT:
	case GR_MP_INT:
	case GR_MP_FLOAT:
		break;
	default:
		CHECK(!"a type the reader does not return");
	}
}

static void write_node(gr_buf *b, const gr_obj *o)
{
	uint64_t kids;

	switch (o->type) {
	case GR_MP_NIL:
		CHECK(gr_mpw_nil(b) == 0);
		break;
	case GR_MP_BOOL:
		CHECK(gr_mpw_bool(b, o->v.b) == 0);
		break;
	case GR_MP_UINT:
		CHECK(gr_mpw_uint(b, o->v.u) == 0);
		break;
	case GR_MP_INT:
		CHECK(o->v.i < 0);
		CHECK(gr_mpw_int(b, o->v.i) == 0);
		break;
	case GR_MP_FLOAT:
		CHECK(gr_mpw_f64(b, o->v.f) == 0);
		break;
	case GR_MP_STR:
		CHECK(gr_mpw_str(b, o->v.str, o->len) == 0);
		break;
	case GR_MP_BIN:
		CHECK(gr_mpw_bin(b, o->v.str, o->len) == 0);
		break;
	case GR_MP_ARRAY:
	case GR_MP_MAP:
		CHECK((o->type == GR_MP_MAP ? gr_mpw_map(b, o->len) : gr_mpw_array(b, o->len)) == 0);
		kids = o->type == GR_MP_MAP ? 2 * (uint64_t)o->len : o->len;
		for (uint64_t i = 0; i < kids; i++)
			write_node(b, &o->v.items[i]);
		break;
	default:
		CHECK(!"a type the reader does not return");
	}
}

static void check_same(const gr_obj *a, const gr_obj *b)
{
	uint64_t kids;

	CHECK(a->type == b->type && a->len == b->len);
	switch (a->type) {
	case GR_MP_BOOL:
		CHECK(a->v.b == b->v.b);
		break;
	case GR_MP_UINT:
		CHECK(a->v.u == b->v.u);
		break;
	case GR_MP_INT:
		CHECK(a->v.i == b->v.i);
		break;
	case GR_MP_FLOAT:
		CHECK(memcmp(&a->v.f, &b->v.f, sizeof(double)) == 0);
		break;
	case GR_MP_STR:
	case GR_MP_BIN:
		CHECK(a->len == 0 || memcmp(a->v.str, b->v.str, a->len) == 0);
		break;
	case GR_MP_ARRAY:
	case GR_MP_MAP:
		kids = a->type == GR_MP_MAP ? 2 * (uint64_t)a->len : a->len;
		for (uint64_t i = 0; i < kids; i++)
			check_same(&a->v.items[i], &b->v.items[i]);
		break;
	default:
		break;
	}
}

/* The exact partial of a result of count elements, if it has one. */
static void check_exact(const gr_obj *res, uint64_t count)
{
	char why[128];
	gr_fsum x, y, e;
	double v;

	memset(why, 0, sizeof(why));
	if (gr_fsum_parse(res, count, &x, why, sizeof(why)) < 0) {
		/* a reason, NUL-terminated */
		CHECK(why[0] && memchr(why, '\0', sizeof(why)));
		return;
	}
	CHECK(x.count == count);
	CHECK(gr_fsum_check(&x, NULL, 0) == 0);
	CHECK(x.nlimbs <= GR_FSUM_LIMBS_MAX);
	for (unsigned k = x.nlimbs; k < GR_FSUM_LIMBS_MAX; k++)
		CHECK(x.limbs[k] == 0);
	CHECK(x.nlimbs == 0 ? x.scale == 0 : (x.limbs[0] & 1) != 0);
	v = gr_fsum_round(&x);
	if (x.specials & GR_FSUM_NAN)
		CHECK(isnan(v));
	if (x.nlimbs == 0 && !(x.specials & (GR_FSUM_NAN | GR_FSUM_PINF | GR_FSUM_NINF)))
		CHECK(v == 0 && !signbit(v) == !(x.specials & GR_FSUM_NEGZERO));

	/* the empty partial changes nothing, either side */
	gr_fsum_init(&e);
	y = x;
	CHECK(gr_fsum_combine(&y, &e) == 0 && memcmp(&y, &x, sizeof(x)) == 0);
	CHECK(gr_fsum_combine(&e, &x) == 0 && memcmp(&e, &x, sizeof(x)) == 0);
	/* twice: the same specials, the value doubled (one more trailing
	 * zero: the same limbs one scale up), or out of range */
	y = x;
	int r = gr_fsum_combine(&y, &x);
	if (count > UINT64_MAX / 2) {
		CHECK(r == -ERANGE);
	} else if (r == 0) {
		CHECK(y.count == 2 * count);
		CHECK(y.nlimbs == x.nlimbs && memcmp(y.limbs, x.limbs, sizeof(x.limbs)) == 0);
		CHECK(x.nlimbs == 0 ? y.scale == 0 : y.scale == x.scale + 1);
		CHECK(y.specials == x.specials);
		double w = gr_fsum_round(&y);
		/* below the normals, twice the value may round otherwise */
		if (isnan(v))
			CHECK(isnan(w));
		else if (!(fabs(v) < 0x1p-1021))
			CHECK(w == 2 * v || (isinf(w) && signbit(w) == signbit(v)));
	} else {
		CHECK(r == -ERANGE && x.scale >= GR_FSUM_SCALE_MAX - 64 * (int)x.nlimbs);
	}
}

static void check_message(const gr_obj_tree *t, const uint8_t *p, size_t n)
{
	static const char *const keys[] = { "code", "message", "value", "count", "uptime_s",
					     "devices", "backend" };
	const gr_obj *res = NULL;
	const char *msg = NULL;
	uint32_t msglen = 0, id = 0;
	gr_err code = GR_OK;
	gr_obj_tree again = { 0 };
	gr_buf b;
	long k;

	CHECK(t->root == t->nodes && t->n_nodes >= 1);
	CHECK(t->n_nodes <= gr_msg_response_limits.max_items);
	check_node(t, t->root, p, n, 0);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		(void)gr_obj_get(t->root, keys[i]);

	if (gr_msg_parse_response(t->root, &id, &code, &msg, &msglen, &res) == 0) {
		if (code == GR_OK) {
			CHECK(res && !msg && msglen == 0);
			for (int kind = GR_KIND_I64; kind <= GR_KIND_F64; kind++) {
				gr_value v;
				uint64_t count;

				if (gr_msg_parse_reduce_result(res, (gr_kind)kind, &v, &count) == 0)
					CHECK(v.kind == (gr_kind)kind);
			}
			const gr_obj *c = gr_obj_get(res, "count");
			check_exact(res, c && c->type == GR_MP_UINT ? c->v.u : 0);
		} else {
			CHECK(code > GR_OK && code < GR_ERR_N && !res);
			CHECK(msg ? (const uint8_t *)msg >= p && (const uint8_t *)msg + msglen <= p + n
				  : msglen == 0);
			CHECK(gr_obj_get(&t->root->v.items[2], "code"));
		}
	}

	/* Written out again, it reads back the same. */
	gr_buf_init(&b);
	write_node(&b, t->root);
	k = gr_obj_parse(b.data, b.len, &gr_msg_response_limits, &again);
	CHECK_MSG(k > 0 && (size_t)k == b.len, "rewritten message does not parse: %ld", k);
	CHECK(again.n_nodes == t->n_nodes);
	check_same(t->root, again.root);
	gr_obj_tree_deinit(&again);
	gr_buf_deinit(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 1;
	unsigned cut;

	if (size < 1)
		return 0;
	cut = data[0];
	while (off < size) {
		const uint8_t *p = data + off;
		size_t n = size - off;
		gr_obj_tree t = { 0 };
		long k;

		k = gr_obj_parse(p, n, &gr_msg_response_limits, &t);
		CHECK(k >= 0 || k == -E2BIG || k == -ENOMEM || k == -EBADMSG);
		if (k <= 0) {
			CHECK(t.nodes == NULL);
			break;
		}
		CHECK((size_t)k <= n);
		check_message(&t, p, (size_t)k);
		gr_obj_tree_deinit(&t);

		/* Cut short, it is a partial message. */
		{
			size_t m = (size_t)k - 1 - cut % (size_t)k;
			gr_obj_tree part = { 0 };

			CHECK_MSG(gr_obj_parse(p, m, &gr_msg_response_limits, &part) == 0,
				  "%zu of %ld bytes read as a whole message or as an error", m, k);
			CHECK(part.nodes == NULL);
		}
		off += (size_t)k;
	}
	return 0;
}
