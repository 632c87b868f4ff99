/*
 * libgpured against a scripted server (wire-server.h), no daemon: the
 * bytes of segmented reduces both ways, and of device maps, read-only and
 * writable, and of ranges of several allocations (map, then map_part).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "client/gpured.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "tests/client/wire-server.h"

/* ---- scenario: segmented reduces, their bytes both ways ---------------- */

static void reply_segments(gr_buf *b, uint32_t id, uint64_t count, uint64_t nseg,
			   const void *records, size_t bytes)
{
	reply_head(b, id);
	CHECK(gr_mpw_map(b, 3) == 0);
	CHECK(gr_mpw_cstr(b, "count") == 0);
	CHECK(gr_mpw_uint(b, count) == 0);
	CHECK(gr_mpw_cstr(b, "segments") == 0);
	CHECK(gr_mpw_uint(b, nseg) == 0);
	CHECK(gr_mpw_cstr(b, "values") == 0);
	CHECK(gr_mpw_bin(b, records, bytes) == 0);
}

static void srv_segments(server *s)
{
	static const uint8_t offs1[] = { 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
					 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0 };
	const double data1[3] = { 1, 2, 4 };
	uint8_t *b1, *b2, *b3;
	gr_obj_tree t1 = { 0 }, t2 = { 0 }, t3 = { 0 };
	const gr_obj *m1, *m2, *m3;
	char keys[128];
	gr_buf out;

	gr_buf_init(&out);
	/* op, dtype and ddof, then the offsets, then the data */
	srv_next_map(s, &b1, &t1, &m1);
	map_keys(m1, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype ddof offsets data") == 0, "%s", keys);
	const gr_obj *o = gr_obj_get(m1, "offsets"), *d = gr_obj_get(m1, "data");
	CHECK(o->type == GR_MP_BIN && o->len == sizeof(offs1) && memcmp(o->v.str, offs1, o->len) == 0);
	CHECK(d->type == GR_MP_BIN && d->len == sizeof(data1) && memcmp(d->v.str, data1, d->len) == 0);
	CHECK(gr_obj_get(m1, "ddof")->v.u == 1);
	/* a region's keys after the offsets too */
	srv_next_map(s, &b2, &t2, &m2);
	map_keys(m2, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype offsets region offset count") == 0, "%s", keys);
	CHECK(gr_obj_get(m2, "region")->v.u == 7 && gr_obj_get(m2, "offset")->v.u == 12 &&
	      gr_obj_get(m2, "count")->v.u == 5 && gr_obj_get(m2, "offsets")->len == 16);
	srv_next_map(s, &b3, &t3, &m3);
	map_keys(m3, keys, sizeof(keys));
	CHECK_MSG(strcmp(keys, "op dtype offsets data") == 0, "%s", keys);

	/* the second first, then the first in one-byte pieces */
	gpured_arg_record a = { .value.i = -3, .index = 4 };
	reply_segments(&out, (uint32_t)t2.root->v.items[1].v.u, 5, 1, &a, sizeof(a));
	srv_write(s, out.data, out.len);
	out.len = 0;
	gpured_moments_record m[3] = {
		{ .sum.f = 1, .min.f = 1, .max.f = 1, .mean = 1, .var = NAN },
		{ .sum.f = 0, .min.f = INFINITY, .max.f = -INFINITY, .mean = NAN, .var = NAN },
		{ .sum.f = 6, .min.f = 2, .max.f = 4, .mean = 3, .var = 2 },
	};
	reply_segments(&out, (uint32_t)t1.root->v.items[1].v.u, 3, 3, m, sizeof(m));
	srv_write_slowly(s, &out);
	out.len = 0;
	/* the third's records a byte short, once the client has the others
	 * and has sent one more request (whose reply never comes) */
	srv_next(s, NULL);
	reply_segments(&out, (uint32_t)t3.root->v.items[1].v.u, 2, 1, "\x0b\0\0\0\0\0\0", 7);
	srv_write(s, out.data, out.len);
	gr_buf_deinit(&out);
	gr_obj_tree_deinit(&t1);
	gr_obj_tree_deinit(&t2);
	gr_obj_tree_deinit(&t3);
	free(b1);
	free(b2);
	free(b3);
	char x;
	(void)!read(s->fd, &x, 1);
}

static void test_segments(void)
{
	const double x[3] = { 1, 2, 4 };
	const int64_t y[2] = { 5, 6 };
	gpured_moments_record m[3];
	gpured_arg_record a;
	uint32_t id1, id2, id3, id4;
	server s;
	gpured_t *g;

	server_start(&s, srv_segments);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_MOMENTS, GPURED_F64, x, 3,
					(const uint64_t[]){ 0, 1, 1, 3 }, 3, 1, &id1), 0);
	CHECK_EQ(gpured_submit_region_segments(g, 7, GPURED_OP_ARGMIN, GPURED_I32, 12, 5,
					       (const uint64_t[]){ 0, 5 }, 1, 0, &id2), 0);
	CHECK_EQ(gpured_submit_segments(g, GPURED_OP_SUM, GPURED_I64, y, 2,
					(const uint64_t[]){ 0, 2 }, 1, 0, &id3), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id1, m, sizeof(m)), 0);
	CHECK(m[0].mean == 1 && isnan(m[0].var) && m[1].min.f == INFINITY && isnan(m[1].mean) &&
	      m[2].sum.f == 6 && m[2].var == 2);
	CHECK_EQ(gpured_wait_id_segments(g, id2, &a, sizeof(a)), 0);
	CHECK(a.value.i == -3 && a.index == 4);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUM, GPURED_I64, y, 2, &id4), 0);
	CHECK_EQ(gpured_wait_id_segments(g, id3, NULL, 0), -EPROTO);
	CHECK_MSG(strstr(gpured_errmsg(g), "7 bytes, not 1 records of 8"), "%s", gpured_errmsg(g));
	gpured_close(g);
	server_stop(&s);
}

/* ---- scenario: device maps, read-only and writable -------------------- */

#define DEVICE_UUID "GPU-01234567-89ab-cdef-0123-456789abcdef"

static const struct {
	const char *keys, *kind;
	bool writable;
} device_maps[] = {
	{ "bytes writable kind device", "cuda", true },
	{ "bytes writable kind device handle", "cuda_ipc", true },
	{ "bytes kind device", "cuda", false },
	{ "bytes kind device handle", "cuda_ipc", false },
};

static void ipc_handle(uint8_t h[64])
{
	for (int i = 0; i < 64; i++)
		h[i] = (uint8_t)(3 * i + 1);
}

static void srv_device_maps(server *s)
{
	uint8_t handle[64];
	char keys[128];
	gr_buf out;

	ipc_handle(handle);
	gr_buf_init(&out);
	for (size_t i = 0; i < sizeof(device_maps) / sizeof(device_maps[0]); i++) {
		uint8_t *bytes;
		gr_obj_tree t = { 0 };
		const gr_obj *m;

		srv_next_map(s, &bytes, &t, &m);
		CHECK(str_is(&t.root->v.items[2], "map"));
		map_keys(m, keys, sizeof(keys));
		CHECK_MSG(strcmp(keys, device_maps[i].keys) == 0, "map %zu: %s", i, keys);
		CHECK(gr_obj_get(m, "bytes")->v.u == 4096);
		CHECK(str_is(gr_obj_get(m, "kind"), device_maps[i].kind));
		CHECK(str_is(gr_obj_get(m, "device"), DEVICE_UUID));
		if (device_maps[i].writable) {
			const gr_obj *w = gr_obj_get(m, "writable");
			CHECK(w->type == GR_MP_BOOL && w->v.b);
		}
		const gr_obj *h = gr_obj_get(m, "handle");
		if (h)
			CHECK(h->type == GR_MP_BIN && h->len == 64 && memcmp(h->v.str, handle, 64) == 0);
		reply_head(&out, (uint32_t)t.root->v.items[1].v.u);
		CHECK(gr_mpw_map(&out, 2) == 0);
		CHECK(gr_mpw_cstr(&out, "region") == 0);
		CHECK(gr_mpw_uint(&out, 100 + i) == 0);
		CHECK(gr_mpw_cstr(&out, "bytes") == 0);
		CHECK(gr_mpw_uint(&out, 4096) == 0);
		srv_write(s, out.data, out.len);
		out.len = 0;
		gr_obj_tree_deinit(&t);
		free(bytes);
	}
	/* unknown flags were refused without a request: a ping comes next */
	srv_pong(s, &out);
	gr_buf_deinit(&out);
}

/* The device maps' requests, flags 0 and GPURED_REGION_WRITABLE (a CUDA
 * daemon is what tests/gpu/test-device-map.cu drives): "writable": true
 * only with the flag, the handle's 64 bytes, unknown flags refused here. */
static void test_device_maps(void)
{
	uint8_t handle[64];
	uint64_t id;
	server s;
	gpured_t *g;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	ipc_handle(handle);
	server_start(&s, srv_device_maps);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE, &id), 0);
	CHECK_EQ(id, 100);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE,
					   &id), 0);
	CHECK_EQ(id, 101);
	CHECK_EQ(gpured_map_cuda_fd(g, fd, 4096, DEVICE_UUID, &id), 0);
	CHECK_EQ(id, 102);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, 0, &id), 0);
	CHECK_EQ(id, 103);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, DEVICE_UUID, 2, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "unknown region flags"), "%s", gpured_errmsg(g));
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, handle, 4096, DEVICE_UUID, 6, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_ipc_flags(g, NULL, 4096, DEVICE_UUID, GPURED_REGION_WRITABLE, &id),
		 -EINVAL);
	CHECK_EQ(gpured_map_cuda_fd_flags(g, fd, 4096, NULL, GPURED_REGION_WRITABLE, &id), -EINVAL);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	server_stop(&s);
	close(fd);
}

/* A range of three allocations: map with part_bytes, two map_parts of
 * which the second is refused, then the unmap the client owes. */
static void srv_device_parts(server *s)
{
	static const char *const want[] = { "map", "map_part", "map_part", "unmap" };
	static const char *const keys_want[] = { "bytes kind device part_bytes", "region bytes",
						 "region bytes", "region" };
	char keys[128];
	gr_buf out;

	gr_buf_init(&out);
	for (size_t i = 0; i < 4; i++) {
		uint8_t *bytes;
		gr_obj_tree t = { 0 };
		const gr_obj *m;

		srv_next_map(s, &bytes, &t, &m);
		CHECK_MSG(str_is(&t.root->v.items[2], want[i]), "request %zu", i);
		map_keys(m, keys, sizeof(keys));
		CHECK_MSG(strcmp(keys, keys_want[i]) == 0, "request %zu: %s", i, keys);
		uint32_t id = (uint32_t)t.root->v.items[1].v.u;
		if (i == 0) {
			CHECK(gr_obj_get(m, "bytes")->v.u == 3u << 21);
			CHECK(gr_obj_get(m, "part_bytes")->v.u == 2u << 20);
		} else {
			CHECK(gr_obj_get(m, "region")->v.u == 7);
		}
		if (i == 1 || i == 2)
			CHECK(gr_obj_get(m, "bytes")->v.u == 2u << 20);
		if (i == 2) {
			reply_error(&out, id, "invalid_params", "the third part is refused");
		} else if (i == 3) {
			reply_head(&out, id);
			CHECK(gr_mpw_bool(&out, true) == 0);
		} else {
			reply_head(&out, id);
			CHECK(gr_mpw_map(&out, 3) == 0);
			CHECK(gr_mpw_kv_uint(&out, "region", 7) == 0);
			CHECK(gr_mpw_kv_uint(&out, "bytes", 3u << 21) == 0);
			CHECK(gr_mpw_kv_uint(&out, "mapped", (i + 1) << 21) == 0);
		}
		srv_write(s, out.data, out.len);
		out.len = 0;
		gr_obj_tree_deinit(&t);
		free(bytes);
	}
	/* the bad arguments were refused without a request */
	srv_pong(s, &out);
	gr_buf_deinit(&out);
}

static void test_device_parts(void)
{
	const size_t sizes[] = { 2u << 20, 2u << 20, 2u << 20 }, zero[] = { 2u << 20, 0 };
	uint64_t id = 0;
	server s;
	gpured_t *g;
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	const int fds[] = { fd, fd, fd };

	CHECK(fd >= 0);
	server_start(&s, srv_device_parts);
	CHECK_EQ(gpured_connect(s.path, &g), 0);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 3, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_MSG(strstr(gpured_errmsg(g), "the third part is refused"), "%s", gpured_errmsg(g));
	CHECK(strcmp(gpured_errcode(g), "invalid_params") == 0);
	CHECK_EQ(id, 0);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 0, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, zero, 2, DEVICE_UUID, 0, &id), -EINVAL);
	CHECK_EQ(gpured_map_cuda_fds(g, fds, sizes, 3, DEVICE_UUID, 4, &id), -EINVAL);
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	server_stop(&s);
	close(fd);
}

int main(void)
{
	/* A SIGPIPE would kill the test: the library must never raise one. */
	signal(SIGPIPE, SIG_DFL);

	test_segments();
	test_device_maps();
	test_device_parts();
	return 0;
}
