/*
 * The server's request parser against every rule of PROTOCOL.md and the
 * hostile inputs we know of. Each case runs whole, byte by byte and in
 * seeded random pieces, with large and tiny destinations, with feed() and
 * with window()/commit(): all runs must tell the same story, at the same
 * byte offsets. A fuzz loop then mutates the cases' bytes.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "mk.h"

int h_counting;
unsigned h_allocs;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n)
{
	/* The one allocation the parser may make: a request's offsets, 8
	 * bytes each and at least two (proto/offsets.c). */
	if (n % 8 != 0 || n < 16)
		h_allocs += h_counting;
	return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t m)
{
	h_allocs += h_counting;
	return __real_calloc(n, m);
}

void *__wrap_realloc(void *p, size_t n)
{
	h_allocs += h_counting;
	return __real_realloc(p, n);
}

typedef struct req_case {
	const char *input;  /* mk.h notation */
	const char *expect; /* fnmatch pattern of the harness's line */
	uint64_t max_data;  /* 0: the default limit */
	uint64_t reject_over;
} req_case;

#define PING "[0, 99, \"ping\", []]"
#define AFTER "; DONE 99 ping; END idle"
#define RED(m) "[0, 1, \"reduce\", [" m "]] " PING

static const req_case cases[] = {
	/* Requests that succeed. */
	{ "[0, 1, \"ping\", []]", "DONE 1 ping; END idle" },
	{ "[0, 2, \"stats\", []] [0, 3, \"info\", []]", "DONE 2 stats; DONE 3 info; END idle" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; DONE 1 reduce sum i32 bin 8:0100000002000000" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, -2, 2147483647, -2147483648]}"),
	  "DATA 16; DONE 1 reduce sum i32 arr 16:01000000feffffffffffff7f00000080" AFTER },
	{ RED("{\"op\": \"max\", \"dtype\": \"u32\", \"data\": [0, u64:7, 4294967295, i8:5]}"),
	  "DATA 16; DONE 1 reduce max u32 arr 16:0000000007000000ffffffff05000000" AFTER },
	{ RED("{\"op\": \"min\", \"dtype\": \"i64\", \"data\": [-9223372036854775808, 9223372036854775807]}"),
	  "DATA 16; DONE 1 reduce min i64 arr 16:0000000000000080ffffffffffffff7f" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [18446744073709551615, 1]}"),
	  "DATA 16; DONE 1 reduce sum u64 arr 16:ffffffffffffffff0100000000000000" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [1, -1, 1.5, f32:0.25, nan, inf, -inf, 3.4028234663852886e38]}"),
	  "DATA 32; DONE 1 reduce sum f32 arr 32:0000803f000080bf0000c03f0000803e0000c07f0000807f000080ffffff7f7f" AFTER },
	{ RED("{\"op\": \"argmin\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; DONE 1 reduce argmin i32 bin 8:0100000002000000" AFTER },
	{ RED("{\"op\": \"argmax\", \"dtype\": \"f32\", \"data\": [1, -1]}"),
	  "DATA 8; DONE 1 reduce argmax f32 arr 8:0000803f000080bf" AFTER },
	{ RED("{\"op\": \"sumsq\", \"dtype\": \"f64\", \"data\": [1, -2, 0.5, f32:0.25]}"),
	  "DATA 32; DONE 1 reduce sumsq f64 arr 32:000000000000f03f00000000000000c0000000000000e03f000000000000d03f" AFTER },
	/* Keys in any order; data before op and dtype is the caller's call. */
	{ RED("{\"data\": x\"0100000002000000\", \"dtype\": \"u32\", \"op\": \"max\"}"),
	  "DATA 8; DONE 1 reduce max u32 bin 8:0100000002000000" AFTER },
	{ RED("{\"dtype\": \"f64\", \"data\": x\"0000000000000000\", \"op\": \"min\"}"),
	  "DATA 8; DONE 1 reduce min f64 bin 8:0000000000000000" AFTER },
	/* Empty data. */
	{ RED("{\"op\": \"min\", \"dtype\": \"i32\", \"data\": x\"\"}"),
	  "DATA 0; DONE 1 reduce min i32 bin 0:" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": []}"),
	  "DATA 0; DONE 1 reduce sum i32 arr 0:" AFTER },
	{ "[0, 1, \"reduce\", [{\"op\": \"min\", \"dtype\": \"i32\", \"data\": x\"\"}]]",
	  "DATA 0; DONE 1 reduce min i32 bin 0:; END idle" },
	/* A method named by a bin is the method of the same bytes in a str. */
	{ "[0, 5, x\"70696e67\", []] [0, 6, b16:x\"696e666f\", []] [0, 7, b32:x\"7374617473\", []]",
	  "DONE 5 ping; DONE 6 info; DONE 7 stats; END idle" },
	{ "[0, 1, x\"726564756365\", [{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}]] " PING,
	  "DATA 8; DONE 1 reduce sum i32 bin 8:0100000002000000" AFTER },
	{ "[0, 1, x\"726564756365\", [{\"op\": \"max\", \"dtype\": \"f64\", \"data\": [1, 2.5]}]] " PING,
	  "DATA 16; DONE 1 reduce max f64 arr 16:000000000000f03f0000000000000440" AFTER },
	/* Wide encodings of everything are still the same request. */
	{ "a32:[u64:0, u32:4294967295, s32:\"reduce\", a16:[m32:{s8:\"op\", s16:\"sum\", \"dtype\", \"u64\", \"data\", b32:x\"0100000000000000\"}]]",
	  "DATA 8; DONE 4294967295 reduce sum u64 bin 8:0100000000000000; END idle" },
	{ "[0, i8:5, \"ping\", []] [0, i64:6, \"ping\", []] [0, u16:7, \"info\", []]",
	  "DONE 5 ping; DONE 6 ping; DONE 7 info; END idle" },
	/* Larger data through small destinations. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01020304\"*100}"),
	  "DATA 400; DONE 1 reduce sum i32 bin 400:h=*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}"),
	  "DATA 104; DONE 1 reduce sum u64 arr 104:h=*" AFTER },

	/* Notifications: read with the same rules, no event. */
	{ "[2, \"ping\", []] [2, \"reduce\", [{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01000000\"}]] "
	  "[2, \"nope\", [1, {\"a\": [nil, \"x\"*40]}]] [2, \"x\"*100, []] " PING,
	  "DONE 99 ping; END idle" },
	{ "[2, x\"70696e67\", []] [2, x\"726564756365\", [{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01000000\"}]] "
	  "[2, x\"6e6f7065\", [1]] [2, x\"78\"*100, []] " PING,
	  "DONE 99 ping; END idle" },
	{ "[2, \"ping\", [[[[]]]]]", "FATAL - invalid_request: nesting too deep*" },
	{ "[2, \"ping\", [<d4 01 00>]]", "FATAL - invalid_request: msgpack ext types*" },
	{ "[2, 5, []]", "FATAL - invalid_request: method must be a string (str or bin)" },
	{ "[2, \"ping\", {}]", "FATAL - invalid_request: params must be an array" },

	/* The envelope: anything else ends the stream. */
	{ "1", "FATAL - invalid_request: a message must be an array*" },
	{ "{} " PING, "FATAL - invalid_request: a message must be an array*" },
	{ "[]", "FATAL - invalid_request: a message must be an array*" },
	{ "[0, 1]", "FATAL - invalid_request: a message must be an array*" },
	{ "[0, 1, \"ping\", [], 5]", "FATAL - invalid_request: a message must be an array*" },
	{ "s32:\"ping\"", "FATAL - invalid_request: a message must be an array*" },
	{ "<dd ff ff ff ff>", "FATAL - invalid_request: a message must be an array*" },
	{ "[1, 1, nil, nil]", "FATAL - invalid_request: responses (type 1) are not accepted" },
	{ "[3, 1, \"ping\", []]", "FATAL - invalid_request: message type must be 0*" },
	{ "[-1, 1, \"ping\", []]", "FATAL - invalid_request: message type must be 0*" },
	{ "[\"0\", 1, \"ping\", []]", "FATAL - invalid_request: message type must be 0*" },
	{ "[0.0, 1, \"ping\", []]", "FATAL - invalid_request: message type must be 0*" },
	{ "[0, \"ping\", []]", "FATAL - invalid_request: a request must have 4 elements*" },
	{ "[2, 1, \"ping\", []]", "FATAL - invalid_request: a notification must have 3 elements*" },
	{ "[0, -1, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, i64:-5, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, 4294967296, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, 18446744073709551615, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, 1.0, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, \"1\", \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, nil, \"ping\", []]", "FATAL - invalid_request: msgid must be an integer*" },
	{ "[0, 4294967295, \"ping\", []]", "DONE 4294967295 ping; END idle" },
	{ "[0, 5, 7, []]", "FATAL 5 invalid_request: method must be a string (str or bin)" },
	{ "[0, 5, nil, []]", "FATAL 5 invalid_request: method must be a string (str or bin)" },
	{ "[0, 5, [\"ping\"], []]", "FATAL 5 invalid_request: method must be a string (str or bin)" },
	{ "[0, 5, \"ping\", {}]", "FATAL 5 invalid_request: params must be an array" },
	{ "[0, 5, \"ping\", nil]", "FATAL 5 invalid_request: params must be an array" },
	{ "[0, 5, \"reduce\", \"x\"]", "FATAL 5 invalid_request: params must be an array" },
	{ "[0, 5, \"nope\", 1]", "FATAL 5 invalid_request: params must be an array" },
	{ "[0, 5, \"ping\", []] 7", "DONE 5 ping; FATAL - invalid_request: a message must be*" },

	/* Unknown methods: an error, and the stream goes on. */
	{ "[0, 3, \"nope\", []] " PING, "ERROR 3 unknown_method: unknown method 'nope'" AFTER },
	{ "[0, 3, \"\", []] " PING, "ERROR 3 unknown_method: unknown method ''" AFTER },
	{ "[0, 3, \"m\"*32, [1, \"x\"]] " PING,
	  "ERROR 3 unknown_method: unknown method 'mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm'" AFTER },
	{ "[0, 3, \"m\"*33, [1, {}]] " PING, "ERROR 3 unknown_method: unknown method (a name of 33 bytes)" AFTER },
	{ "[0, 3, \"pi\x01'g\", []] " PING, "ERROR 3 unknown_method: unknown method 'pi??g'" AFTER },
	{ "[0, 3, \"PING\", []] " PING, "ERROR 3 unknown_method: unknown method 'PING'" AFTER },
	{ "[0, 3, x\"6e6f7065\", []] " PING, "ERROR 3 unknown_method: unknown method 'nope'" AFTER },
	{ "[0, 3, x\"\", []] " PING, "ERROR 3 unknown_method: unknown method ''" AFTER },
	{ "[0, 3, x\"7069002767\", []] " PING, "ERROR 3 unknown_method: unknown method 'pi??g'" AFTER },
	{ "[0, 3, x\"6d\"*33, [1, {}]] " PING, "ERROR 3 unknown_method: unknown method (a name of 33 bytes)" AFTER },

	/* Parameters of the parameterless methods. */
	{ "[0, 3, \"ping\", [1]] " PING, "ERROR 3 invalid_params: 'ping' takes no parameters" AFTER },
	{ "[0, 3, \"stats\", [[]]] " PING, "ERROR 3 invalid_params: 'stats' takes no parameters" AFTER },
	{ "[0, 3, \"info\", [{\"a\": x\"00\"*300}]] " PING, "ERROR 3 invalid_params: 'info' takes no parameters" AFTER },

	/* reduce's parameters. */
	{ "[0, 1, \"reduce\", []] " PING, "ERROR 1 invalid_params: reduce takes exactly one parameter*" AFTER },
	{ "[0, 1, \"reduce\", [{}, {}]] " PING, "ERROR 1 invalid_params: reduce takes exactly one parameter*" AFTER },
	{ RED("5"), "ERROR 1 invalid_params: reduce's parameter must be a map*" AFTER },
	{ RED("\"x\"*40"), "ERROR 1 invalid_params: reduce's parameter must be a map*" AFTER },
	{ RED("[1, 2]"), "ERROR 1 invalid_params: reduce's parameter must be a map*" AFTER },
	{ RED("{}"), "ERROR 1 invalid_params: missing key 'op'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\"}"), "ERROR 1 invalid_params: missing key 'data'" AFTER },
	{ RED("{\"op\": \"sum\", \"data\": x\"01000000\"}"),
	  "DATA 4; ERROR 1 invalid_params: missing key 'dtype'" AFTER },
	{ RED("{\"dtype\": \"i32\", \"data\": x\"01000000\"}"),
	  "DATA 4; ERROR 1 invalid_params: missing key 'op'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"foo\": 1, \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: unknown key 'foo'*" AFTER },
	{ RED("{\"op\": \"sum\", 1: 2}"), "ERROR 1 invalid_params: map keys must be strings*" AFTER },
	{ RED("{nil: 2}"), "ERROR 1 invalid_params: map keys must be strings*" AFTER },
	{ RED("{x\"6f70\": \"sum\"}"), "ERROR 1 invalid_params: map keys must be strings*" AFTER },
	{ RED("{\"k\"*17: \"sum\"}"), "ERROR 1 invalid_params: unknown key (a string of 17 bytes)" AFTER },
	{ RED("{\"op\": \"sum\", \"op\": \"max\"}"), "ERROR 1 invalid_params: duplicate key 'op'" AFTER },
	{ RED("{\"dtype\": \"i32\", \"dtype\": \"i32\"}"), "ERROR 1 invalid_params: duplicate key 'dtype'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01000000\", \"data\": x\"01000000\"}"),
	  "DATA 4; ERROR 1 invalid_params: duplicate key 'data'" AFTER },
	{ RED("{\"op\": 5}"), "ERROR 1 invalid_params: 'op' must be a string" AFTER },
	{ RED("{\"op\": x\"73756d\"}"), "ERROR 1 invalid_params: 'op' must be a string" AFTER },
	{ RED("{\"op\": [\"sum\"]}"), "ERROR 1 invalid_params: 'op' must be a string" AFTER },
	{ RED("{\"op\": \"avg\"}"), "ERROR 1 invalid_params: unknown op 'avg'*" AFTER },
	{ RED("{\"op\": \"argmed\"}"), "ERROR 1 invalid_params: unknown op 'argmed' (ops are sum, min, max, sumsq, argmin, argmax, moments, cumsum)" AFTER },
	{ RED("{\"op\": \"argmi\"}"), "ERROR 1 invalid_params: unknown op 'argmi'*" AFTER },
	{ RED("{\"op\": \"s\"*17}"), "ERROR 1 invalid_params: unknown op (a string of 17 bytes)" AFTER },
	{ RED("{\"op\": s32:\"s\"*70000}"), "ERROR 1 invalid_params: unknown op (a string of 70000 bytes)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f12\"}"), "ERROR 1 invalid_params: unknown dtype 'f12'*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": nil}"), "ERROR 1 invalid_params: 'dtype' must be a string" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i\"*20}"), "ERROR 1 invalid_params: unknown dtype (a string of 20 bytes)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": nil}"), "ERROR 1 invalid_params: 'data' must be a bin*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": \"abcd\"}"), "ERROR 1 invalid_params: 'data' must be a bin*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": {\"a\": 1}}"), "ERROR 1 invalid_params: 'data' must be a bin*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": 5}"), "ERROR 1 invalid_params: 'data' must be a bin*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": true}"), "ERROR 1 invalid_params: 'data' must be a bin*" AFTER },
	/* bin sizes and dtype. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"i64\", \"data\": x\"01020304\"}"),
	  "ERROR 1 invalid_params: 'data' is 4 bytes, not a multiple of the i64 element size (8 bytes)" AFTER },
	{ RED("{\"op\": \"sum\", \"data\": x\"010203040506\", \"dtype\": \"f32\"}"),
	  "DATA 6; ERROR 1 invalid_params: 'data' is 6 bytes, not a multiple of the f32 element size (4 bytes)" AFTER },
	{ RED("{\"data\": x\"0102\", \"op\": \"sum\", \"dtype\": \"u64\"}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' is 2 bytes, not a multiple*" AFTER },
	{ RED("{\"op\": \"sum\", \"data\": [1, 2], \"dtype\": \"i32\"}"),
	  "ERROR 1 invalid_params: 'dtype' must come before an array 'data'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"00\"*20}"),
	  "ERROR 1 too_large: 'data' is 20 bytes, over the limit of 16" AFTER, 16 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"00\"*16}"),
	  "DATA 16; DONE 1 reduce sum i32 bin 16:00000000000000000000000000000000" AFTER, 16 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, 2, 3, 4, 5]}"),
	  "ERROR 1 too_large: 'data' is 5 elements (20 bytes), over the limit of 16 bytes" AFTER, 16 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f64\", \"data\": [1, 2]}"), "DATA 16; DONE*" AFTER, 16 },
	{ RED("{\"op\": \"sum\", \"data\": x\"00\"*17}"), "ERROR 1 too_large*" AFTER, 16 },
	/* Elements that do not fit their dtype. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [2147483648]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype i32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [0, -2147483649]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 1 is out of range (dtype i32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1.0]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 0 is a float, not an integer (dtype i32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u32\", \"data\": [1, 2, 4294967296]}"),
	  "DATA 12; ERROR 1 invalid_params: 'data' element 2 is out of range (dtype u32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u32\", \"data\": [-1]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype u32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i64\", \"data\": [9223372036854775808]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype i64)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i64\", \"data\": [f32:1.5]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is a float*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [i8:-1]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype u64)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [-9223372036854775808]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype u64)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [1e39]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype f32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [1, -3.5e38]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 1 is out of range (dtype f32)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [18446744073709551615, -9223372036854775808]}"),
	  "DATA 8; DONE 1 reduce sum f32 arr 8:0000805f000000df" AFTER },
	/* The narrow dtypes: numbers they hold exactly, and no others. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"f16\", \"data\": [1, -2, 0.5, 65504, -0.0, nan, inf, 5.960464477539063e-08]}"),
	  "DATA 16; DONE 1 reduce sum f16 arr 16:003c00c00038ff7b0080007e007c0100" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"bf16\", \"data\": [1, f32:-3.0, 1.2676506002282294e30, -inf]}"),
	  "DATA 8; DONE 1 reduce sum bf16 arr 8:803f40c0807180ff" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f8e4m3\", \"data\": [448, -0.001953125, nan, 0]}"),
	  "DATA 4; DONE 1 reduce sum f8e4m3 arr 4:7e817f00" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f8e5m2\", \"data\": [57344, inf, -1.5, -0.0]}"),
	  "DATA 4; DONE 1 reduce sum f8e5m2 arr 4:7b7cbe80" AFTER },
	{ RED("{\"op\": \"max\", \"dtype\": \"i8\", \"data\": [127, -128, 0]}"),
	  "DATA 3; DONE 1 reduce max i8 arr 3:7f8000" AFTER },
	{ RED("{\"op\": \"min\", \"dtype\": \"u8\", \"data\": [255, u64:0]}"),
	  "DATA 2; DONE 1 reduce min u8 arr 2:ff00" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i16\", \"data\": [-32768, 32767]}"),
	  "DATA 4; DONE 1 reduce sum i16 arr 4:0080ff7f" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u16\", \"data\": [65535]}"),
	  "DATA 2; DONE 1 reduce sum u16 arr 2:ffff" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u16\", \"data\": x\"010203\"}"),
	  "ERROR 1 invalid_params: 'data' is 3 bytes, not a multiple of the u16 element size (2 bytes)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f16\", \"data\": [0.1]}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' element 0 is not a value of the dtype (dtype f16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f16\", \"data\": [1, 65520]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 1 is not a value of the dtype (dtype f16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f16\", \"data\": [18446744073709551615]}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' element 0 is not a value of the dtype (dtype f16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"bf16\", \"data\": [9223372036854775807]}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' element 0 is not a value of the dtype (dtype bf16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f8e4m3\", \"data\": [-inf]}"),
	  "DATA 1; ERROR 1 invalid_params: 'data' element 0 is an infinity, which the dtype does not have (dtype f8e4m3)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f8e4m3\", \"data\": [480]}"),
	  "DATA 1; ERROR 1 invalid_params: 'data' element 0 is not a value of the dtype (dtype f8e4m3)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i8\", \"data\": [128]}"),
	  "DATA 1; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype i8)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u8\", \"data\": [-1]}"),
	  "DATA 1; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype u8)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i16\", \"data\": [f32:1.5]}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' element 0 is a float, not an integer (dtype i16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"u16\", \"data\": [65536]}"),
	  "DATA 2; ERROR 1 invalid_params: 'data' element 0 is out of range (dtype u16)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f24\", \"data\": [1]}"),
	  "ERROR 1 invalid_params: unknown dtype 'f24'*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f64\", \"data\": [nil]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is not a number (dtype f64)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f64\", \"data\": [1, \"a\"*50, 2]}"),
	  "DATA 24; ERROR 1 invalid_params: 'data' element 1 is not a number (dtype f64)" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f64\", \"data\": [true]}"),
	  "DATA 8; ERROR 1 invalid_params: 'data' element 0 is not a number*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [x\"00000000\"]}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' element 0 is not a number*" AFTER },

	/* Reduce in place: region, offset, count instead of data. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 3, \"offset\": 16, \"count\": 5}"),
	  "DONE 1 reduce sum f32 region 3 @16 #5" AFTER },
	{ RED("{\"count\": u64:18446744073709551615, \"region\": 0, \"dtype\": \"u64\", \"op\": \"max\"}"),
	  "DONE 1 reduce max u64 region 0 @0 #18446744073709551615" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 3}"),
	  "ERROR 1 invalid_params: missing key 'count'*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"offset\": 3, \"count\": 1}"),
	  "ERROR 1 invalid_params: 'offset' needs 'region'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 1, \"count\": 1, \"data\": x\"00000000\"}"),
	  "DATA 4; ERROR 1 invalid_params: 'data' and 'region' exclude each other" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": -1, \"count\": 1}"),
	  "ERROR 1 invalid_params: 'region' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 1, \"count\": 1.0}"),
	  "ERROR 1 invalid_params: 'count' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 1, \"offset\": \"0\", \"count\": 1}"),
	  "ERROR 1 invalid_params: 'offset' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 1, \"region\": 2, \"count\": 1}"),
	  "ERROR 1 invalid_params: duplicate key 'region'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"bytes\": 1}"),
	  "ERROR 1 invalid_params: unknown key 'bytes' (reduce's keys are*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f64\", \"partial\": true, \"data\": x\"0000000000000000\"}"),
	  "DATA 8; DONE 1 reduce sum f64 bin 8:0000000000000000" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"region\": 1, \"count\": 1, \"partial\": false}"),
	  "DONE 1 reduce sum f32 region 1 @0 #1" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"partial\": 1, \"data\": x\"00000000\"}"),
	  "ERROR 1 invalid_params: 'partial' must be true or false" AFTER },
	{ RED("{\"op\": \"sum\", \"partial\": true, \"partial\": true}"),
	  "ERROR 1 invalid_params: duplicate key 'partial'" AFTER },
	/* moments and its ddof */
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; DONE 1 reduce moments i32 bin 8:0100000002000000" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\", \"ddof\": 1}"),
	  "DATA 8; DONE 1 reduce moments i32 bin 8:0100000002000000 ddof 1" AFTER },
	{ RED("{\"ddof\": 2, \"dtype\": \"i32\", \"data\": [1, 2, 3], \"op\": \"moments\"}"),
	  "DATA 12; DONE 1 reduce moments i32 arr 12:010000000200000003000000 ddof 2" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\", \"ddof\": 2}"),
	  "DATA 8; ERROR 1 invalid_params: 'ddof' is 2, not less than the 2 elements" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"ddof\": u64:18446744073709551615, \"data\": [7]}"),
	  "DATA 4; ERROR 1 invalid_params: 'ddof' is 18446744073709551615, not less than the 1 elements" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"f64\", \"ddof\": 5, \"data\": x\"\"}"),
	  "DATA 0; DONE 1 reduce moments f64 bin 0: ddof 5" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"f32\", \"region\": 1, \"count\": 4, \"ddof\": 3}"),
	  "DONE 1 reduce moments f32 region 1 @0 #4 ddof 3" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"f32\", \"region\": 1, \"count\": 4, \"ddof\": 4}"),
	  "ERROR 1 invalid_params: 'ddof' is 4, not less than the 4 elements" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"ddof\": -1, \"data\": [7]}"),
	  "ERROR 1 invalid_params: 'ddof' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"i32\", \"ddof\": 1.0, \"data\": [7]}"),
	  "ERROR 1 invalid_params: 'ddof' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"moments\", \"ddof\": 0, \"ddof\": 0}"),
	  "ERROR 1 invalid_params: duplicate key 'ddof'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"ddof\": 0, \"data\": [7]}"),
	  "DATA 4; ERROR 1 invalid_params: 'ddof' is only for op moments, not sum" AFTER },
	{ RED("{\"op\": \"argmin\", \"dtype\": \"f32\", \"region\": 1, \"count\": 4, \"ddof\": 0}"),
	  "ERROR 1 invalid_params: 'ddof' is only for op moments, not argmin" AFTER },
	/* Segments ("offsets"): before the data, 0 first, none decreasing, the count last. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"000000000000000001000000000000000200000000000000\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; DONE 1 reduce sum i32 bin 8:0100000002000000 segs 2:0,1,2" AFTER },
	{ RED("{\"offsets\": x\"0000000000000000000000000000000003000000000000000300000000000000\", \"op\": \"max\", \"dtype\": \"f32\", \"data\": [1, 2, 3]}"),
	  "DATA 12; DONE 1 reduce max f32 arr 12:0000803f0000004000004040 segs 3:0,0,3,3" AFTER },
	{ RED("{\"op\": \"moments\", \"dtype\": \"f32\", \"ddof\": 1, \"offsets\": x\"00000000000000000300000000000000\", \"region\": 1, \"count\": 3}"),
	  "DONE 1 reduce moments f32 region 1 @0 #3 ddof 1 segs 1:0,3" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00000000000000000000000000000000\", \"data\": x\"\"}"),
	  "DATA 0; DONE 1 reduce sum i32 bin 0: segs 1:0,0" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01000000\", \"offsets\": x\"00000000000000000100000000000000\"}"),
	  "DATA 4; ERROR 1 invalid_params: 'offsets' must come before 'data'" AFTER },
	{ RED("{\"op\": \"sum\", \"offsets\": x\"00000000000000000100000000000000\", \"data\": x\"01000000\", \"dtype\": \"i32\"}"),
	  "ERROR 1 invalid_params: 'op' and 'dtype' must come before 'data' in a request with 'offsets'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00000000000000000200000000000000\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' ends at 2, not at the 1 elements of 'data'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00000000000000000200000000000000\", \"data\": [1, 2, 3]}"),
	  "ERROR 1 invalid_params: 'offsets' ends at 2, not at the 3 elements of 'data'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"01000000000000000100000000000000\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' must start at 0, not 1" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"0000000000000000020000000000000001000000000000000200000000000000\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' must not decrease: offset 2 is 1, below the 2 before it" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"0000000000000000\", \"data\": x\"\"}"),
	  "ERROR 1 invalid_params: 'offsets' is 8 bytes: it must be 8 bytes for each of k + 1 offsets, k >= 1 segments" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"0000000000000000010000000000000000\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' is 17 bytes*" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": [0, 1], \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' must be a bin of little-endian u64 element offsets" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"partial\": true, \"offsets\": x\"00000000000000000100000000000000\", \"data\": x\"0000803f\"}"),
	  "DATA 4; ERROR 1 invalid_params: 'partial' is not available with 'offsets'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"offsets\": x\"00000000000000000100000000000000\", \"region\": 1, \"count\": 2}"),
	  "ERROR 1 invalid_params: 'offsets' ends at 1, not at the 2 elements to reduce" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"offsets\": x\"00000000000000000100000000000000\", \"offsets\": x\"\"}"),
	  "ERROR 1 invalid_params: duplicate key 'offsets'" AFTER },
	/* cumsum: sum's prefix sums; a region's go to out_region. */
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; DONE 1 reduce cumsum i32 bin 8:0100000002000000" AFTER },
	{ RED("{\"dtype\": \"u32\", \"data\": [1, 2], \"partial\": false, \"op\": \"cumsum\"}"),
	  "DATA 8; DONE 1 reduce cumsum u32 arr 8:0100000002000000" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"f64\", \"region\": 1, \"count\": 4, \"out_region\": 2, \"out_offset\": 16}"),
	  "DONE 1 reduce cumsum f64 region 1 @0 #4 out 2 @16" AFTER },
	{ RED("{\"out_region\": 1, \"region\": 1, \"offset\": 3, \"count\": 0, \"dtype\": \"i32\", \"op\": \"cumsum\"}"),
	  "DONE 1 reduce cumsum i32 region 1 @3 #0 out 1 @0" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"f32\", \"partial\": true, \"data\": x\"0000803f\"}"),
	  "ERROR 1 invalid_params: 'partial' is not available with op cumsum" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"f32\", \"data\": x\"0000803f\", \"partial\": true}"),
	  "DATA 4; ERROR 1 invalid_params: 'partial' is not available with op cumsum" AFTER },
	{ RED("{\"partial\": true, \"op\": \"cumsum\", \"dtype\": \"f32\", \"data\": x\"0000803f\"}"),
	  "ERROR 1 invalid_params: 'partial' is not available with op cumsum" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"ddof\": 0, \"data\": [7]}"),
	  "ERROR 1 invalid_params: 'ddof' is only for op moments, not cumsum" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"offsets\": x\"00000000000000000100000000000000\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' is not available with op cumsum" AFTER },
	{ RED("{\"offsets\": x\"00000000000000000100000000000000\", \"dtype\": \"i32\", \"op\": \"cumsum\", \"data\": x\"01000000\"}"),
	  "ERROR 1 invalid_params: 'offsets' is not available with op cumsum" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"out_region\": 2, \"data\": [1]}"),
	  "ERROR 1 invalid_params: 'out_region' is for the cumsum of a region; the cumsum of 'data' answers 'values'" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"data\": [1], \"out_offset\": 8}"),
	  "DATA 4; ERROR 1 invalid_params: 'out_offset' is for the cumsum of a region; the cumsum of 'data' answers 'values'" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3}"),
	  "ERROR 1 invalid_params: the cumsum of a region writes its prefix sums to a writable region: missing key 'out_region'" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3, \"out_offset\": 8}"),
	  "ERROR 1 invalid_params: the cumsum of a region writes its prefix sums to a writable region: missing key 'out_region'" AFTER },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3, \"out_region\": 2}"),
	  "ERROR 1 invalid_params: 'out_region' is only for op cumsum, not sum" AFTER },
	{ RED("{\"out_offset\": 8, \"dtype\": \"i32\", \"op\": \"max\", \"region\": 1, \"count\": 3}"),
	  "ERROR 1 invalid_params: 'out_offset' is only for op cumsum, not max" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3, \"out_region\": 2, \"out_offset\": 4}"),
	  "ERROR 1 invalid_params: 'out_offset' must be a multiple of 8 (the prefix sums are 8 bytes each), not 4" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3, \"out_region\": -1}"),
	  "ERROR 1 invalid_params: 'out_region' must be an unsigned integer" AFTER },
	{ RED("{\"op\": \"cumsum\", \"dtype\": \"i32\", \"region\": 1, \"count\": 3, \"out_region\": 1, \"out_region\": 1}"),
	  "ERROR 1 invalid_params: duplicate key 'out_region'" AFTER },
	{ "[0, 1, \"reduce\", [{\"op\": \"cumsum\", \"dtype\": \"i32\", \"data\": <c6 ff ff ff fc> |}]]",
	  "ERROR 1 too_large: the prefix sums of 1073741823 elements would pass a bin's 4 GiB (at most 536870911 elements); END busy skip=4294967292",
	  (uint64_t)1 << 33 },
	{ "[0, 4, \"map\", [{\"bytes\": 4096, \"writable\": true}]] " PING,
	  "DONE 4 map 4096 host writable" AFTER },
	{ "[0, 4, \"map\", [{\"writable\": false, \"bytes\": 4096}]] " PING, "DONE 4 map 4096 host" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 4096, \"writable\": 1}]] " PING,
	  "ERROR 4 invalid_params: 'writable' must be true or false" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-0\", \"writable\": true}]] " PING,
	  "DONE 4 map 8 cuda GPU-0 writable" AFTER },
	{ RED("{\"op\": \"cumsum\", \"writable\": true}"),
	  "ERROR 1 invalid_params: unknown key 'writable' (reduce's keys are*" AFTER },
	/* map and unmap. */
	{ "[0, 4, \"map\", [{\"bytes\": 4096}]] " PING, "DONE 4 map 4096 host" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"host\", \"bytes\": u64:1099511627776}]] " PING,
	  "DONE 4 map 1099511627776 host" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-8c5f2a7e-0000-4000-8000-0123456789ab\"}]] " PING,
	  "DONE 4 map 8 cuda GPU-8c5f2a7e-0000-4000-8000-0123456789ab" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda_ipc\", \"bytes\": 8, \"device\": \"0000:19:00.0\", \"handle\": x\"ab\"*64}]] " PING,
	  "DONE 4 map 8 cuda_ipc 0000:19:00.0 h=*" AFTER },
	{ "[0, 4, \"map\", []] " PING, "ERROR 4 invalid_params: map takes exactly one parameter*" AFTER },
	{ "[0, 4, \"map\", [5]] " PING, "ERROR 4 invalid_params: map's parameter must be a map*" AFTER },
	{ "[0, 4, \"map\", [{}]] " PING, "ERROR 4 invalid_params: missing key 'bytes'" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 0}]] " PING, "ERROR 4 invalid_params: 'bytes' must be at least 1" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": -5}]] " PING, "ERROR 4 invalid_params: 'bytes' must be an unsigned integer" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"gpu\"}]] " PING, "ERROR 4 invalid_params: unknown kind 'gpu'*" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": 1}]] " PING, "ERROR 4 invalid_params: 'kind' must be a string" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"cuda\"}]] " PING,
	  "ERROR 4 invalid_params: kind cuda needs 'device'*" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"device\": \"0000:19:00.0\"}]] " PING,
	  "ERROR 4 invalid_params: 'device' is only for kind cuda or cuda_ipc" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"cuda_ipc\", \"device\": \"x\"}]] " PING,
	  "ERROR 4 invalid_params: kind cuda_ipc needs 'handle'*" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"cuda_ipc\", \"device\": \"x\", \"handle\": x\"00\"*63}]] " PING,
	  "ERROR 4 invalid_params: 'handle' must be a bin of 64 bytes" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"cuda_ipc\", \"device\": \"x\", \"handle\": \"a\"*64}]] " PING,
	  "ERROR 4 invalid_params: 'handle' must be a bin of 64 bytes" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"kind\": \"cuda\", \"device\": \"d\"*64}]] " PING,
	  "ERROR 4 invalid_params: 'device' is longer than 63 bytes" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"op\": \"sum\"}]] " PING,
	  "ERROR 4 invalid_params: unknown key 'op' (map's keys are*" AFTER },
	/* a range of several GPU allocations: part_bytes, then map_part */
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 4194304, \"device\": \"GPU-0\", \"part_bytes\": 2097152}]] " PING,
	  "DONE 4 map 4194304 cuda GPU-0 part 2097152" AFTER },
	{ "[0, 4, \"map\", [{\"part_bytes\": 8, \"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-0\"}]] " PING,
	  "DONE 4 map 8 cuda GPU-0 part 8" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-0\", \"part_bytes\": 9}]] " PING,
	  "ERROR 4 invalid_params: 'part_bytes' (9) must be at least 1 and at most 'bytes' (8)" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-0\", \"part_bytes\": 0}]] " PING,
	  "ERROR 4 invalid_params: 'part_bytes' (0) must be at least 1*" AFTER },
	{ "[0, 4, \"map\", [{\"bytes\": 8, \"part_bytes\": 4}]] " PING,
	  "ERROR 4 invalid_params: 'part_bytes' is only for kind cuda*" AFTER },
	{ "[0, 4, \"map\", [{\"kind\": \"cuda\", \"bytes\": 8, \"device\": \"GPU-0\", \"part_bytes\": -1}]] " PING,
	  "ERROR 4 invalid_params: 'part_bytes' must be an unsigned integer" AFTER },
	{ "[0, 6, \"map_part\", [{\"region\": 7, \"bytes\": 2097152}]] " PING,
	  "DONE 6 map_part 7 2097152" AFTER },
	{ "[0, 6, x\"6d61705f70617274\", [{\"bytes\": 8, \"region\": 7}]] " PING,
	  "DONE 6 map_part 7 8" AFTER },
	{ "[0, 6, \"map_part\", [{\"region\": 7}]] " PING,
	  "ERROR 6 invalid_params: missing key 'bytes'" AFTER },
	{ "[0, 6, \"map_part\", [{\"bytes\": 8}]] " PING,
	  "ERROR 6 invalid_params: missing key 'region'" AFTER },
	{ "[0, 6, \"map_part\", [{\"region\": 7, \"bytes\": 0}]] " PING,
	  "ERROR 6 invalid_params: 'bytes' must be at least 1" AFTER },
	{ "[0, 6, \"map_part\", [{\"region\": 7, \"bytes\": 8, \"kind\": \"cuda\"}]] " PING,
	  "ERROR 6 invalid_params: unknown key 'kind' (map_part's keys are region, bytes)" AFTER },
	{ "[0, 5, \"unmap\", [{\"region\": 7}]] " PING, "DONE 5 unmap 7" AFTER },
	{ "[0, 5, \"unmap\", [{}]] " PING, "ERROR 5 invalid_params: missing key 'region'" AFTER },
	{ "[0, 5, \"unmap\", [{\"region\": 7, \"count\": 1}]] " PING,
	  "ERROR 5 invalid_params: unknown key 'count' (unmap's keys are region)" AFTER },
	{ "[0, 5, \"unmap\", [{\"region\": nil}]] " PING,
	  "ERROR 5 invalid_params: 'region' must be an unsigned integer" AFTER },

	/* Nesting: four levels are the most a request needs. */
	{ "[0, 1, \"ping\", [[[[]]]]]",
	  "ERROR 1 invalid_params: 'ping' takes no parameters; FATAL 1 invalid_request: nesting too deep*" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [[1]]}"),
	  "DATA 4; FATAL 1 invalid_request: nesting too deep*" },
	{ RED("{\"op\": {\"a\": [1]}}"),
	  "ERROR 1 invalid_params: 'op' must be a string; FATAL 1 invalid_request: nesting too deep*" },
	{ RED("{\"op\": {\"a\": {}}}"),
	  "ERROR 1 invalid_params: 'op' must be a string; FATAL 1 invalid_request: nesting too deep*" },
	{ RED("{\"x\": [], \"op\": {}}"), "ERROR 1 invalid_params: unknown key 'x'*" AFTER },

	/* ext and the reserved byte, anywhere. */
	{ "[0, <d4 01 00>, \"ping\", []]", "FATAL - invalid_request: msgpack ext types are not accepted" },
	{ "<c7 00 05>", "FATAL - invalid_request: msgpack ext types are not accepted" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": <d6 01 00 00 00 00>}"),
	  "FATAL 1 invalid_request: msgpack ext types*" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, <c8 00 01 05 00>]}"),
	  "DATA 8; FATAL 1 invalid_request: msgpack ext types*" },
	{ "[0, 1, \"nope\", [<d4 01 00>]]", "ERROR 1 unknown_method*; FATAL 1 invalid_request: msgpack ext*" },
	{ "<c1>", "FATAL - invalid_request: malformed msgpack*" },
	{ PING " <c1>", "DONE 99 ping; FATAL - invalid_request: malformed msgpack*" },
	{ "[0, 1, \"ping\", [<c1>]]", "ERROR 1 invalid_params*; FATAL 1 invalid_request: malformed msgpack*" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, <c1>]}"),
	  "DATA 8; FATAL 1 invalid_request: malformed msgpack*" },
	{ "[0, 1, <c1> | []]", "FATAL 1 invalid_request: malformed msgpack*" },

	/* Huge announced sizes cost nothing until their bytes arrive. */
	{ "[0, 1, \"ping\", <dd ff ff ff ff>]", "ERROR 1 invalid_params: 'ping' takes no parameters; END busy" },
	{ "[0, 1, \"reduce\", [{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": <dd ff ff ff ff> |}]]",
	  "ERROR 1 too_large: 'data' is 4294967295 elements (17179869180 bytes), over the limit of 1073741824 bytes; END busy" },
	{ "[0, 1, \"reduce\", [{\"data\": <c6 ff ff ff ff 00 00 00 00 00 00 00 00 00 00> |}]]",
	  "ERROR 1 too_large: 'data' is 4294967295 bytes, over the limit of 1073741824; END busy skip=4294967285" },
	{ "[0, 1, <db ff ff ff ff 61 61 61 61> | []]", "ERROR 1 unknown_method: unknown method (a name of 4294967295 bytes); END busy skip=4294967291" },
	{ "[0, 1, \"reduce\", [{\"op\": <db ff ff ff ff> |}]]", "ERROR 1 invalid_params: unknown op (a string of 4294967295 bytes); END busy skip=4294967295" },
	{ "[0, 1, \"reduce\", [<df ff ff ff ff> |]]", "END busy" },
	{ "[0, 1, \"reduce\", [{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": <c6 3f ff ff fc 01 00 00 00> |}]]",
	  "DATA 1073741820; END busy" },

	/* Truncated requests: no event until the bytes are there. */
	{ "[0, 1, \"ping\" | []]", "END busy" },
	{ "<94 00 01 a4 70 69>", "END busy" },
	{ "<94 00 cd 01>", "END busy" },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"01000000\"}") " <94 00>",
	  "DATA 4; DONE 1 reduce sum i32 bin 4:01000000; DONE 99 ping; END busy" },

	/* Rejected requests: no event, and the next request is read. */
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
	  "DATA 8; REJECT" AFTER, 0, 4 },
	{ RED("{\"data\": x\"0100000002000000\", \"op\": \"sum\", \"dtype\": \"i32\"}"),
	  "DATA 8; REJECT" AFTER, 0, 4 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, 2, 3], \"foo\": 1}"),
	  "DATA 12; REJECT" AFTER, 0, 4 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, 2, 3]}") " " RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1]}"),
	  "DATA 12; REJECT; DONE 99 ping; DATA 4; DONE 1 reduce sum i32 arr 4:01000000" AFTER, 0, 4 },
	{ RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [1, 2, [3]]}"),
	  "DATA 12; REJECT; FATAL 1 invalid_request: nesting too deep*", 0, 4 },
};

static const size_t chunks[] = { 1 << 20, 8, 1 };

/* One run of input with a given style; the harness's line goes to h. */
static void run_one(harness *h, const mk_out *m, const req_case *c, size_t chunk, bool direct,
		    unsigned split, unsigned seed)
{
	gr_req_limits lim = { .max_data_bytes = c->max_data };

	h_init(h, &lim, chunk, direct, c->reject_over);
	h_run(h, m->b.data, m->b.len, split, seed);
}

static void check_case(const req_case *c, unsigned idx)
{
	harness ref, h;
	mk_out m;

	mk(&m, c->input);
	run_one(&ref, &m, c, chunks[0], false, 0, 0);
	CHECK_MSG(fnmatch(c->expect, ref.log, 0) == 0, "case %u: %s\n  got:    %s\n  wanted: %s", idx,
		  c->input, ref.log, c->expect);

	/* A DONE comes exactly at the end of its message, never later. */
	for (unsigned i = 0; i < ref.n_done; i++) {
		bool at_end = false;

		for (unsigned j = 0; j < m.n_ends; j++)
			at_end |= ref.done_at[i] == m.ends[j];
		CHECK_MSG(at_end, "case %u: DONE #%u at %zu is not the end of a message", idx, i,
			  ref.done_at[i]);
	}

	for (size_t ci = 0; ci < sizeof(chunks) / sizeof(chunks[0]); ci++) {
		for (int direct = 0; direct <= 1; direct++) {
			for (unsigned split = 0; split < 5; split++) {
				run_one(&h, &m, c, chunks[ci], direct, split, idx);
				CHECK_MSG(strcmp(h.log, ref.log) == 0,
					  "case %u (chunk %zu, direct %d, split %u): %s\n  got:  %s\n  whole: %s",
					  idx, chunks[ci], direct, split, c->input, h.log, ref.log);
				CHECK(h.n_events == ref.n_events);
				CHECK(memcmp(h.offsets, ref.offsets, h.n_events * sizeof(h.offsets[0])) == 0);
				h_deinit(&h);
			}
		}
	}
	h_deinit(&ref);
	gr_buf_deinit(&m.b);
}

static void test_cases(void)
{
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_case(&cases[i], i);
}

/* 1000 levels of nesting, at the top and inside a request. */
static void test_deep(void)
{
	static const char *const prefixes[] = {
		"", "<94 00 01 a4 70 69 6e 67>", "<93 02 a4 70 69 6e 67>",
		"<94 00 01 a6 72 65 64 75 63 65 91 81 a2 6f 70>",
	};
	static const char *const expect[] = {
		"FATAL - invalid_request: a message must be*",
		"ERROR 1 invalid_params*; FATAL 1 invalid_request: nesting too deep*",
		"FATAL - invalid_request: nesting too deep*",
		"ERROR 1 invalid_params: 'op' must be a string; FATAL 1 invalid_request: nesting too deep*",
	};

	for (unsigned i = 0; i < 4; i++) {
		char *s = malloc(strlen(prefixes[i]) + 4 * 1000 + 8);
		req_case c = { .input = s, .expect = expect[i] };

		strcpy(s, prefixes[i]);
		strcat(s, " <");
		for (int k = 0; k < 1000; k++)
			strcat(s, "91 ");
		strcat(s, "c0>");
		check_case(&c, 1000 + i);
		free(s);
	}
}

/*
 * Every prefix of a stream yields a prefix of the whole stream's events:
 * nothing is reported before its bytes are there.
 */
static void test_prefixes(void)
{
	static const char *const inputs[] = {
		RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"),
		RED("{\"op\": \"sum\", \"dtype\": \"f32\", \"data\": [1, 2.5, f32:3]}"),
		"[0, 3, \"nope\", [1, 2]] [2, \"ping\", []] " RED("{\"op\": \"sum\", \"dtype\": \"u64\", \"data\": [1, -1]}"),
	};

	for (unsigned i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		req_case c = { .input = inputs[i] };
		harness whole, h;
		mk_out m;
		char *end;

		mk(&m, inputs[i]);
		run_one(&whole, &m, &c, 1 << 20, false, 0, 0);
		end = strstr(whole.log, "END");
		CHECK(end);
		for (size_t n = 0; n < m.b.len; n++) {
			char *e;

			h_init(&h, NULL, 3, n % 2, 0);
			h_run(&h, m.b.data, n, n % 3, (unsigned)n);
			e = strstr(h.log, "END ");
			CHECK_MSG(e, "prefix %zu: %s", n, h.log);
			CHECK_MSG(strncmp(h.log, whole.log, (size_t)(e - h.log)) == 0,
				  "prefix %zu of input %u: %s\n  whole: %s", n, i, h.log, whole.log);
			h_deinit(&h);
		}
		h_deinit(&whole);
		gr_buf_deinit(&m.b);
	}
}

/* A large array through destinations of a few elements: every value lands. */
static void test_large_array(void)
{
	gr_buf b;
	harness h;
	int64_t want[1000];

	gr_buf_init(&b);
	CHECK(gr_mpw_array(&b, 4) == 0 && gr_mpw_uint(&b, 0) == 0 && gr_mpw_uint(&b, 8) == 0);
	CHECK(gr_mpw_cstr(&b, "reduce") == 0 && gr_mpw_array(&b, 1) == 0 && gr_mpw_map(&b, 3) == 0);
	CHECK(gr_mpw_cstr(&b, "op") == 0 && gr_mpw_cstr(&b, "max") == 0);
	CHECK(gr_mpw_cstr(&b, "dtype") == 0 && gr_mpw_cstr(&b, "i64") == 0);
	CHECK(gr_mpw_cstr(&b, "data") == 0 && gr_mpw_array(&b, 1000) == 0);
	for (int i = 0; i < 1000; i++) {
		want[i] = (int64_t)i * 7919 * (i % 2 ? -1 : 1) * 1000003;
		CHECK(gr_mpw_int(&b, want[i]) == 0);
	}
	for (unsigned split = 0; split < 4; split++) {
		h_init(&h, NULL, 24, split % 2, 0);
		h_run(&h, b.data, b.len, split, 7);
		CHECK_MSG(fnmatch("DATA 8000; DONE 8 reduce max i64 arr 8000:*; END idle", h.log, 0) == 0, "%s", h.log);
		/* h.data was reset at DONE; run again keeping it */
		h_deinit(&h);
	}
	/* Check the bytes themselves: stop before DONE resets them. */
	h_init(&h, NULL, 24, false, 0);
	h_feed(&h, b.data, b.len - 1);
	h_flush(&h);
	CHECK(h.data_len == 999 * 8);
	CHECK(memcmp(h.data, want, 999 * 8) == 0);
	h_deinit(&h);
	gr_buf_deinit(&b);
}

/* The parser's own API edges. */
static void test_api(void)
{
	gr_req_parser *p;
	gr_req_event ev;
	uint8_t dst[4];
	void *w;
	mk_out m;
	size_t n;

	CHECK(gr_req_parser_new(NULL, &p) == 0);
	CHECK(gr_req_parser_idle(p));
	CHECK(gr_req_parser_window(p, &w) == 0 && w == NULL);
	CHECK(gr_req_parser_feed(p, NULL, 0, &ev) == 0 && ev == GR_REQ_NEED_MORE);
	/* reject between requests does nothing */
	gr_req_parser_reject(p, GR_ERR_BUSY, "x");
	mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": x\"0100000002000000\"}"));
	n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
	CHECK(ev == GR_REQ_DATA && !gr_req_parser_idle(p));
	/* No destination yet: DEST_FULL, nothing taken. */
	CHECK(gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev) == 0 && ev == GR_REQ_DEST_FULL);
	gr_req_parser_set_dest(p, dst, sizeof(dst));
	CHECK(gr_req_parser_window(p, &w) == 4 && w == dst);
	/* commit more than the window: clamped */
	memcpy(dst, m.b.data + n, 4);
	ev = gr_req_parser_commit(p, 100);
	CHECK(ev == GR_REQ_DEST_FULL && gr_req_parser_req(p)->data_done == 4);
	CHECK(gr_req_parser_window(p, &w) == 0);
	n += 4;
	gr_req_parser_set_dest(p, dst, sizeof(dst));
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && memcmp(dst, "\2\0\0\0", 4) == 0);
	CHECK(gr_req_parser_idle(p));
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
	CHECK(n == m.b.len);
	/* commit(0) outside a payload runs nothing and asks for more */
	CHECK(gr_req_parser_commit(p, 0) == GR_REQ_NEED_MORE);
	gr_buf_deinit(&m.b);
	CHECK(gr_req_parser_free(p) == NULL);
	CHECK(gr_req_parser_free(NULL) == NULL);

	/* Offsets: the limit on segments, and taking the array over. */
	gr_req_limits lim = { .max_segments = 2 };
	CHECK(gr_req_parser_new(&lim, &p) == 0);
	mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00\"*32, \"data\": x\"\"}")
	       " " RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"offsets\": x\"00\"*24, \"data\": x\"\"}"));
	n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
	CHECK(ev == GR_REQ_ERROR && gr_req_parser_req(p)->err == GR_ERR_TOO_LARGE);
	CHECK(strcmp(gr_req_parser_req(p)->errmsg, "'offsets' has 3 segments, over the limit of 2") == 0);
	CHECK(gr_req_parser_take_offsets(p) == NULL);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DATA && gr_req_parser_req(p)->nsegments == 2);
	uint64_t *offs = gr_req_parser_take_offsets(p);
	CHECK(offs && offs[0] == 0 && offs[2] == 0 && gr_req_parser_req(p)->offsets == NULL);
	CHECK(gr_req_parser_take_offsets(p) == NULL);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->has_offsets);
	n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
	CHECK(ev == GR_REQ_DONE && n == m.b.len);
	free(offs);
	gr_buf_deinit(&m.b);
	gr_req_parser_free(p);

	/*
	 * A destination changed while an element's header is half read (not
	 * how it should be used): the element waits for room rather than
	 * overflow, and a reject then drops it.
	 */
	for (int do_reject = 0; do_reject <= 1; do_reject++) {
		uint8_t small[2], big[8];

		CHECK(gr_req_parser_new(NULL, &p) == 0);
		mk(&m, RED("{\"op\": \"sum\", \"dtype\": \"i32\", \"data\": [i32:1, i32:2, i32:3]}"));
		n = gr_req_parser_feed(p, m.b.data, m.b.len, &ev);
		CHECK(ev == GR_REQ_DATA);
		gr_req_parser_set_dest(p, big, sizeof(big));
		n += gr_req_parser_feed(p, m.b.data + n, 5 + 2, &ev); /* element 0 and 2 bytes of 1 */
		CHECK(ev == GR_REQ_NEED_MORE);
		gr_req_parser_set_dest(p, small, sizeof(small));
		n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
		CHECK(ev == GR_REQ_DEST_FULL && gr_req_parser_req(p)->data_done == 4);
		if (do_reject) {
			gr_req_parser_reject(p, GR_ERR_BUSY, "no room");
			n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
			CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->method == GR_METHOD_PING);
		} else {
			gr_req_parser_set_dest(p, big, sizeof(big));
			n += gr_req_parser_feed(p, m.b.data + n, m.b.len - n, &ev);
			CHECK(ev == GR_REQ_DONE && gr_req_parser_req(p)->data_done == 12);
			CHECK(memcmp(big, "\2\0\0\0\3\0\0\0", 8) == 0);
		}
		gr_buf_deinit(&m.b);
		gr_req_parser_free(p);
	}
}

/*
 * Mutations of the cases' bytes, and plain noise, in random pieces with
 * random destinations: the guards must hold, nothing may crash, and the
 * pieces must not change the story.
 */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_fuzz(unsigned iterations)
{
	mk_out corpus[sizeof(cases) / sizeof(cases[0])];
	size_t n_corpus = sizeof(cases) / sizeof(cases[0]);
	uint64_t s = 0x9e3779b97f4a7c15u;
	uint8_t buf[4096];
	unsigned stats[4] = { 0 };

	for (size_t i = 0; i < n_corpus; i++)
		mk(&corpus[i], cases[i].input);

	for (unsigned it = 0; it < iterations; it++) {
		gr_req_limits lim = { 0 };
		harness ref, h;
		size_t len;
		unsigned kind;

		kind = rnd(&s) % 8;
		if (kind == 0) {
			len = rnd(&s) % 200;
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rnd(&s);
		} else {
			const mk_out *m = &corpus[rnd(&s) % n_corpus];
			unsigned muts = 1 + rnd(&s) % 4;

			len = m->b.len < sizeof(buf) / 2 ? m->b.len : sizeof(buf) / 2;
			memcpy(buf, m->b.data, len);
			if (kind == 1 && len < sizeof(buf) / 2) { /* splice another case after it */
				const mk_out *m2 = &corpus[rnd(&s) % n_corpus];
				size_t l2 = m2->b.len < sizeof(buf) / 2 - len ? m2->b.len : sizeof(buf) / 2 - len;

				memcpy(buf + len, m2->b.data, l2);
				len += l2;
			}
			for (unsigned k = 0; k < muts && len > 0; k++) {
				size_t at = rnd(&s) % len;

				switch (rnd(&s) % 5) {
				case 0:
					buf[at] ^= (uint8_t)(1u << (rnd(&s) % 8));
					break;
				case 1:
					buf[at] = (uint8_t)rnd(&s);
					break;
				case 2: /* a byte that means a lot */
					buf[at] = (uint8_t[]){ 0xc1, 0xdd, 0xdf, 0xdb, 0xc6, 0xd4, 0xcf, 0xff, 0x00, 0x9f, 0x8f }[rnd(&s) % 11];
					break;
				case 3:
					len = at;
					break;
				default:
					if (len < sizeof(buf) - 1) {
						memmove(buf + at + 1, buf + at, len - at);
						buf[at] = (uint8_t)rnd(&s);
						len++;
					}
					break;
				}
			}
		}
		lim.max_data_bytes = rnd(&s) % 3 == 0 ? 1 + rnd(&s) % 64 : 0;
		{
			uint64_t reject = rnd(&s) % 3 == 0 ? 1 + rnd(&s) % 16 : 0;
			size_t chunk = 1 + rnd(&s) % 20;
			req_case c = { .max_data = lim.max_data_bytes, .reject_over = reject };
			mk_out m = { .b = { .data = buf, .len = len } };

			run_one(&ref, &m, &c, 1 << 16, false, 0, 0);
			bool direct = rnd(&s) % 2;
			unsigned split = 1 + rnd(&s) % 4, seed = (unsigned)rnd(&s);

			run_one(&h, &m, &c, chunk, direct, split, seed);
			CHECK_MSG(strcmp(h.log, ref.log) == 0, "fuzz %u: %s\n  vs %s", it, h.log, ref.log);
			stats[0] += strstr(ref.log, "FATAL") != NULL;
			stats[1] += strstr(ref.log, "DONE") != NULL;
			stats[2] += strstr(ref.log, "ERROR") != NULL;
			stats[3] += strstr(ref.log, "DATA") != NULL;
			CHECK(memcmp(h.offsets, ref.offsets, h.n_events * sizeof(h.offsets[0])) == 0);
			h_deinit(&h);
			h_deinit(&ref);
		}
	}
	for (size_t i = 0; i < n_corpus; i++)
		gr_buf_deinit(&corpus[i].b);
	printf("fuzz: %u runs with FATAL, %u with DONE, %u with ERROR, %u with DATA\n", stats[0],
	       stats[1], stats[2], stats[3]);
}

/* Write each case's bytes as a seed for fuzz-request (4 bytes of settings first). */
static void write_corpus(const char *dir)
{
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char path[4096];
		uint8_t settings[4] = { 0, 0, (uint8_t)(i % 64), (uint8_t)i };
		mk_out m;
		FILE *f;

		mk(&m, cases[i].input);
		snprintf(path, sizeof(path), "%s/case-%03u", dir, i);
		f = fopen(path, "wb");
		CHECK(f);
		CHECK(fwrite(settings, 1, 4, f) == 4 && fwrite(m.b.data, 1, m.b.len, f) == m.b.len);
		CHECK(fclose(f) == 0);
		gr_buf_deinit(&m.b);
	}
}

/* Usage: test-request [fuzz-iterations] | --corpus DIR */
int main(int argc, char **argv)
{
	unsigned iterations;

	if (argc > 2 && strcmp(argv[1], "--corpus") == 0) {
		write_corpus(argv[2]);
		return 0;
	}
	iterations = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 100000;

	test_api();
	test_cases();
	test_deep();
	test_prefixes();
	test_large_array();
	test_fuzz(iterations);
	printf("%zu cases, %u fuzz iterations\n", sizeof(cases) / sizeof(cases[0]), iterations);
	return 0;
}
