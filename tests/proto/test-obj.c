/*
 * The bounded object reader: trees come out right, limits refuse before
 * anything is allocated, and a partial message is reported as such.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "check.h"
#include "proto/obj.h"

/*
 * Count the allocations the library makes while a flag is up (the test is
 * linked with --wrap for malloc, calloc and realloc): refused messages must
 * not allocate at all.
 */
static int counting;
static unsigned n_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

static const gr_obj_limits lim = { .max_depth = 8, .max_items = 64, .max_str = 100 };

static long parse_hex(const char *hex, gr_obj_tree *t, gr_buf *b)
{
	gr_buf_init(b);
	HEX(b, hex);
	return gr_obj_parse(b->data, b->len, &lim, t);
}

/* The result code of parsing hex, and whether anything was allocated. */
static long refused(const char *hex, const gr_obj_limits *l)
{
	gr_obj_tree t = { 0 };
	gr_buf b;
	long r;

	gr_buf_init(&b);
	HEX(&b, hex);
	counting = 1;
	n_allocs = 0;
	r = gr_obj_parse(b.data, b.len, l ? l : &lim, &t);
	counting = 0;
	CHECK_MSG(n_allocs == 0, "%s: %u allocations", hex, n_allocs);
	CHECK(t.nodes == NULL);
	gr_buf_deinit(&b);
	return r;
}

static void test_tree(void)
{
	gr_obj_tree t = { 0 };
	const gr_obj *o, *v;
	gr_buf b;
	long r;

	/* [1, -2, "ab", {"k": [true, nil], "z": 1.5}, bin(2)] */
	r = parse_hex("95 01 fe a2 61 62 82 a1 6b 92 c3 c0 a1 7a cb 3f f8 00 00 00 00 00 00 c4 02 00 ff",
		      &t, &b);
	CHECK(r == (long)b.len);
	CHECK(t.n_nodes == 12);
	o = t.root;
	CHECK(o->type == GR_MP_ARRAY && o->len == 5);
	CHECK(o->v.items[0].type == GR_MP_UINT && o->v.items[0].v.u == 1);
	CHECK(o->v.items[1].type == GR_MP_INT && o->v.items[1].v.i == -2);
	CHECK(o->v.items[2].type == GR_MP_STR && o->v.items[2].len == 2 &&
	      memcmp(o->v.items[2].v.str, "ab", 2) == 0);
	CHECK(o->v.items[3].type == GR_MP_MAP && o->v.items[3].len == 2);
	v = gr_obj_get(&o->v.items[3], "k");
	CHECK(v && v->type == GR_MP_ARRAY && v->len == 2);
	CHECK(v->v.items[0].type == GR_MP_BOOL && v->v.items[0].v.b);
	CHECK(v->v.items[1].type == GR_MP_NIL);
	v = gr_obj_get(&o->v.items[3], "z");
	CHECK(v && v->type == GR_MP_FLOAT && v->v.f == 1.5);
	CHECK(gr_obj_get(&o->v.items[3], "q") == NULL);
	CHECK(gr_obj_get(&o->v.items[0], "k") == NULL);
	CHECK(o->v.items[4].type == GR_MP_BIN && o->v.items[4].len == 2 &&
	      (uint8_t)o->v.items[4].v.str[1] == 0xff);
	gr_obj_tree_deinit(&t);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);

	/* Only the first message is parsed; trailing bytes are the next one's. */
	r = parse_hex("91 90 c0", &t, &b);
	CHECK(r == 2 && t.n_nodes == 2 && t.root->v.items[0].len == 0);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);

	/* A scalar is a message too. */
	r = parse_hex("2a", &t, &b);
	CHECK(r == 1 && t.root->type == GR_MP_UINT && t.root->v.u == 42);
	gr_obj_tree_deinit(&t);
	gr_buf_deinit(&b);
}

static void test_partial(void)
{
	static const char *const whole =
		"94 01 05 c0 82 a5 76 61 6c 75 65 cb 40 00 00 00 00 00 00 00 a5 63 6f 75 6e 74 03";
	gr_buf b;

	gr_buf_init(&b);
	HEX(&b, whole);
	for (size_t i = 0; i < b.len; i++) {
		gr_obj_tree t = { 0 };

		counting = 1;
		n_allocs = 0;
		CHECK(gr_obj_parse(b.data, i, &lim, &t) == 0);
		counting = 0;
		CHECK(n_allocs == 0);
	}
	{
		/* The whole message: exactly one allocation, so the counting works. */
		gr_obj_tree t = { 0 };

		counting = 1;
		n_allocs = 0;
		CHECK(gr_obj_parse(b.data, b.len, &lim, &t) == (long)b.len);
		counting = 0;
		CHECK(n_allocs == 1);
		gr_obj_tree_deinit(&t);
	}
	gr_buf_deinit(&b);
	CHECK(refused("", NULL) == 0);
	CHECK(refused("a5 61 62", NULL) == 0);      /* str body incomplete */
	CHECK(refused("cb 00 00", NULL) == 0);      /* float header incomplete */
}

static void test_limits(void)
{
	gr_obj_limits l = lim;
	char deep[200] = "";

	/* An announced size that cannot fit is refused at once, partial or not. */
	CHECK(refused("dd ff ff ff ff", NULL) == -E2BIG);
	CHECK(refused("df ff ff ff ff", NULL) == -E2BIG);
	CHECK(refused("df 00 00 00 20", NULL) == -E2BIG); /* 64 children + the map > 64 */
	CHECK(refused("dc 00 3f", NULL) == 0);               /* 64 nodes: fits, but partial */
	CHECK(refused("dc 00 40", NULL) == -E2BIG);
	/* Strings past max_str, even before their bytes arrive. */
	CHECK(refused("db ff ff ff ff", NULL) == -E2BIG);
	CHECK(refused("c6 ff ff ff ff", NULL) == -E2BIG);
	CHECK(refused("d9 65", NULL) == -E2BIG);            /* 101 > 100 */
	CHECK(refused("d9 64", NULL) == 0);                 /* 100: fits, partial */

	/* Depth: 8 nested arrays are fine, 9 are refused. */
	for (int i = 0; i < 8; i++)
		strcat(deep, "91 ");
	strcat(deep, "c0");
	{
		gr_obj_tree t = { 0 };
		gr_buf b;

		CHECK(parse_hex(deep, &t, &b) == 9);
		CHECK(t.n_nodes == 9);
		gr_obj_tree_deinit(&t);
		gr_buf_deinit(&b);
	}
	memmove(deep + 3, deep, strlen(deep) + 1);
	memcpy(deep, "91 ", 3);
	CHECK(refused(deep, NULL) == -E2BIG);
	/* Even an empty container counts as a level. */
	CHECK(refused("91 91 91 91 91 91 91 91 90", NULL) == -E2BIG);
	l.max_depth = 0;
	CHECK(refused("90", &l) == -E2BIG);
	{
		gr_obj_tree t = { 0 };
		gr_buf b;

		gr_buf_init(&b);
		HEX(&b, "05");
		CHECK(gr_obj_parse(b.data, b.len, &l, &t) == 1); /* a scalar needs no depth */
		gr_obj_tree_deinit(&t);
		gr_buf_deinit(&b);
	}
	/* A depth beyond the internal cap is clamped, not trusted. */
	l.max_depth = 100000;
	l.max_items = 1000000;
	{
		char *s = malloc(3 * 200 + 3);

		s[0] = '\0';
		for (int i = 0; i < 200; i++)
			strcat(s, "91 ");
		strcat(s, "c0");
		CHECK(refused(s, &l) == -E2BIG);
		free(s);
	}
	/* Items: 64 in total, the root included. */
	l = lim;
	l.max_items = 3;
	CHECK(refused("93 01 02 03", &l) == -E2BIG);
	{
		gr_obj_tree t = { 0 };
		gr_buf b;

		gr_buf_init(&b);
		HEX(&b, "92 01 02");
		CHECK(gr_obj_parse(b.data, b.len, &l, &t) == 3);
		gr_obj_tree_deinit(&t);
		b.len = 0;
		HEX(&b, "93 01 02 03");
		CHECK(gr_obj_parse(b.data, b.len, &l, &t) == -E2BIG);
		b.len = 0;
		/* items counted across nesting: [[1],[2]] is 5 nodes */
		HEX(&b, "92 91 01 91 02");
		CHECK(gr_obj_parse(b.data, b.len, &l, &t) == -E2BIG);
		gr_buf_deinit(&b);
	}

	/* Malformed input and ext types. */
	CHECK(refused("c1", NULL) == -EBADMSG);
	CHECK(refused("92 01 c1", NULL) == -EBADMSG);
	CHECK(refused("d4 01 00", NULL) == -EBADMSG);
	CHECK(refused("91 c7 01 05 00", NULL) == -EBADMSG);
}

void *__wrap_malloc(size_t n)
{
	if (counting)
		n_allocs++;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	if (counting)
		n_allocs++;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (counting)
		n_allocs++;
	return __real_realloc(p, n);
}

int main(void)
{
	test_tree();
	test_partial();
	test_limits();
	return 0;
}
