/*
 * The closer (util/closer.h): a descriptor handed over is closed and its
 * counter counted down; and once gr_closer_free has given up waiting for
 * a close that hangs, that close, when it ends, touches no counter, so
 * the daemon may free what holds them (its users' peers) right after.
 * The close that hangs is a TCP socket with SO_LINGER and unsent data to
 * a peer that never reads: close() waits out the linger time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/closer.h"
#include "tests/check.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* A connected TCP socket whose close() lingers for linger_s seconds: its
 * peer (*peer, kept open) never reads, and both buffers are full. */
static int lingering_socket(int linger_s, int *peer)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 1) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0);
	int c = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(c >= 0);
	CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
	*peer = accept(l, NULL, NULL);
	CHECK(*peer >= 0);
	close(l);
	int small = 4096;
	CHECK(setsockopt(*peer, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
	CHECK(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	int fl = fcntl(c, F_GETFL);
	CHECK(fcntl(c, F_SETFL, fl | O_NONBLOCK) == 0);
	static const char junk[4096];
	while (write(c, junk, sizeof(junk)) > 0)
		;
	CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
	CHECK(fcntl(c, F_SETFL, fl) == 0);
	struct linger lg = {.l_onoff = 1, .l_linger = linger_s};
	CHECK(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	return c;
}

static void test_counts_down(void)
{
	static _Atomic uint64_t closing = 2;
	gr_closer *cl;
	int p[2];

	CHECK(gr_closer_new(&cl) == 0);
	CHECK(pipe(p) == 0);
	gr_closer_close(cl, p[0], 7, &closing);
	gr_closer_close(cl, p[1], 7, &closing);
	for (int i = 0; i < 200 && atomic_load(&closing) != 0; i++)
		sleep_ms(10);
	CHECK_EQ(atomic_load(&closing), 0);
	CHECK_EQ(gr_closer_pending(cl), 0);
	CHECK(gr_closer_free(cl, 1000) == NULL);
	/* closed: the descriptor numbers are free again */
	CHECK(fcntl(p[0], F_GETFD) < 0 && errno == EBADF);
}

static void test_abandoned_close_counts_nothing(void)
{
	/* static, never freed: a write after gr_closer_free shows as a value */
	static _Atomic uint64_t closing = 1;
	gr_closer *cl;
	int peer;

	CHECK(gr_closer_new(&cl) == 0);
	int fd = lingering_socket(2, &peer);
	double t0 = now_s();
	gr_closer_close(cl, fd, 9, &closing);
	sleep_ms(200);
	/* the close hangs, as it must for this test to mean anything */
	CHECK_EQ(atomic_load(&closing), 1);
	CHECK(gr_closer_free(cl, 100) == NULL);
	/* what held the counter is gone, its memory used for something else */
	atomic_store(&closing, 1000);
	/* the close ends (the linger time runs out) */
	sleep_ms(2600);
	CHECK(now_s() - t0 > 2.5);
	CHECK_MSG(atomic_load(&closing) == 1000,
		  "a close that ended after gr_closer_free counted down: %llu",
		  (unsigned long long)atomic_load(&closing));
	close(peer);
}

int main(void)
{
	test_counts_down();
	test_abandoned_close_counts_nothing();
	printf("ok\n");
	return 0;
}
