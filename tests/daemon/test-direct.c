/*
 * Direct replies (engine/direct.h) on a socket pair: a backend thread's
 * answers go straight out while the loop writes nothing, are held while
 * it writes, go in front of the loop's next bytes, survive a full socket
 * whole and in order, and stop once the loop closes the connection; a
 * peer that is gone marks the connection broken; a run that interleaves
 * many connections gives each its own replies in order.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/direct.h"
#include "proto/message.h"
#include "tests/check.h"

static gr_direct *d;
static int peer;

/* Answer one job of msgid tag, as a backend thread does, and its bytes. */
static void answer(uint32_t tag, int32_t value, gr_buf *expect)
{
	gr_partial p = {.count = 3, .v.u = (uint64_t)(int64_t)value};
	gr_direct_early.answer(d, tag, GR_OP_SUM, GR_DT_I32, &p);
	if (expect) {
		gr_value v = {.kind = GR_KIND_I64, .i = value};
		CHECK(gr_msg_write_response_value(expect, tag, &v, 3) == 0);
	}
}

/* What the peer can read now, appended to b. */
static size_t drain(gr_buf *b)
{
	uint8_t tmp[65536];
	size_t got = 0;
	for (;;) {
		ssize_t n = recv(peer, tmp, sizeof(tmp), MSG_DONTWAIT);
		if (n <= 0) {
			CHECK(n == 0 || errno == EAGAIN);
			return got;
		}
		if (b)
			CHECK(gr_buf_append(b, tmp, (size_t)n) == 0);
		got += (size_t)n;
	}
}

int main(void)
{
	int sv[2];
	gr_buf expect, got, wbuf;

	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	peer = sv[1];
	CHECK((d = gr_direct_new(sv[0])) != NULL);
	gr_buf_init(&expect);
	gr_buf_init(&got);
	gr_buf_init(&wbuf);

	/* The loop writes nothing: a run goes out in one send. */
	answer(1, 6, &expect);
	answer(2, -7, &expect);
	CHECK_EQ(drain(NULL), 0);
	gr_direct_early.end();
	drain(&got);
	CHECK(got.len == expect.len && !memcmp(got.data, expect.data, got.len));
	CHECK_EQ(gr_direct_check(d), 0);
	CHECK_EQ(gr_direct_held(d), 0);

	/* While the loop writes, answers are held, then go in front of the
	 * loop's next bytes. */
	got.len = expect.len = 0;
	CHECK(gr_direct_take(d, &wbuf) == 0);
	CHECK_EQ(wbuf.len, 0);
	answer(3, 1, &expect);
	gr_direct_early.end();
	CHECK_EQ(drain(NULL), 0);
	CHECK(gr_direct_check(d) == GR_DIRECT_HELD);
	CHECK_EQ(gr_direct_held(d), expect.len);
	CHECK(gr_direct_written(d)); /* more came meanwhile */
	CHECK(gr_buf_append(&wbuf, "LOOP", 4) == 0);
	CHECK(gr_direct_take(d, &wbuf) == 0);
	CHECK_EQ(gr_direct_check(d), 0);
	CHECK_EQ(gr_direct_held(d), 0);
	CHECK_EQ(wbuf.len, expect.len + 4);
	CHECK(!memcmp(wbuf.data, expect.data, expect.len));
	CHECK(!memcmp(wbuf.data + expect.len, "LOOP", 4));
	wbuf.len = 0;
	CHECK(!gr_direct_written(d));
	answer(4, 2, NULL);
	gr_direct_early.end();
	CHECK(drain(NULL) > 0); /* the loop is done: straight out again */

	/* A full socket: what send() does not take is held, message parts
	 * included, and the two together are every reply, in order. */
	int small = 4096;
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	got.len = expect.len = 0;
	for (uint32_t tag = 100; tag < 2100; tag++) {
		answer(tag, (int32_t)tag * 1000, &expect);
		if (tag % 7 == 0)
			gr_direct_early.end();
	}
	gr_direct_early.end();
	CHECK(gr_direct_check(d) == GR_DIRECT_HELD);
	CHECK(gr_direct_held(d) > 0);
	drain(&got);
	CHECK(got.len > 0 && got.len < expect.len);
	CHECK(gr_direct_take(d, &wbuf) == 0);
	CHECK_EQ(got.len + wbuf.len, expect.len);
	CHECK(!memcmp(got.data, expect.data, got.len));
	CHECK(!memcmp(wbuf.data, expect.data + got.len, wbuf.len));
	wbuf.len = 0;
	CHECK(!gr_direct_written(d));

	/* After the loop closes the connection nothing is sent or held. */
	gr_direct *keep = gr_direct_ref(d);
	gr_direct_close(d);
	answer(5, 5, NULL);
	gr_direct_early.end();
	CHECK_EQ(drain(NULL), 0);
	CHECK_EQ(gr_direct_held(d), 0);
	CHECK(gr_direct_unref(keep) == NULL);
	gr_direct_unref(d);

	/* A peer that is gone: the loop is told to close. */
	CHECK((d = gr_direct_new(sv[0])) != NULL);
	close(peer);
	answer(6, 6, NULL);
	gr_direct_early.end();
	CHECK(gr_direct_check(d) & GR_DIRECT_BROKEN);
	gr_direct_unref(d);

	/* A run that interleaves more connections than it gathers at once:
	 * each gets its own replies, in order. */
	enum { NCONN = 11 };
	int pairs[NCONN][2];
	gr_direct *ds[NCONN];
	gr_buf want[NCONN];
	for (int i = 0; i < NCONN; i++) {
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, pairs[i]) == 0);
		CHECK((ds[i] = gr_direct_new(pairs[i][0])) != NULL);
		gr_buf_init(&want[i]);
	}
	for (uint32_t k = 0; k < 400; k++) {
		int i = (int)((k * 7 + k / 13) % NCONN);
		d = ds[i];
		answer(k, (int32_t)k, &want[i]);
	}
	gr_direct_early.end();
	for (int i = 0; i < NCONN; i++) {
		peer = pairs[i][1];
		got.len = 0;
		drain(&got);
		CHECK(got.len == want[i].len && !memcmp(got.data, want[i].data, got.len));
		CHECK_EQ(gr_direct_check(ds[i]), 0);
		gr_direct_unref(ds[i]);
		close(pairs[i][0]);
		close(pairs[i][1]);
		gr_buf_deinit(&want[i]);
	}

	close(sv[0]);
	gr_buf_deinit(&expect);
	gr_buf_deinit(&got);
	gr_buf_deinit(&wbuf);
	printf("ok: direct replies sent, held, taken, stopped\n");
	return 0;
}
