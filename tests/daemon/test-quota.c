/*
 * The fair-share rule (daemon/quota.h) and the users' registry that
 * applies it (daemon/peer.h): a user alone, newcomers beside greedy
 * holders, any number of users, the operators' caps, and the closer's
 * descriptors counted down.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "daemon/peer.h"
#include "daemon/quota.h"
#include "tests/check.h"

/* Everything user p can take, one unit at a time (or step at a time). */
static uint64_t take_all(gr_peers *ps, gr_peer *p, gr_res r, uint64_t step)
{
	uint64_t got = 0;

	while (gr_peer_may(ps, p, r, step)) {
		gr_peer_charge(ps, p, r, step);
		got += step;
	}
	return got;
}

static void test_alone(void)
{
	gr_peers ps = {0};
	ps.pool[GR_RES_CONNECTIONS].cap = 1024;
	gr_peer *a = gr_peers_join(&ps, 1000);
	CHECK(a);
	/* a user alone: all but the reserve, a quarter */
	CHECK_EQ(take_all(&ps, a, GR_RES_CONNECTIONS, 1), 768);
	CHECK_EQ(ps.pool[GR_RES_CONNECTIONS].holders, 1);
	/* a large first ask: an even split that leaves the reserve */
	gr_peers qs = {0};
	qs.pool[GR_RES_MAPPED].cap = 12 << 20;
	gr_peer *b = gr_peers_join(&qs, 1);
	CHECK(gr_peer_may(&qs, b, GR_RES_MAPPED, 8 << 20));
	CHECK(gr_peer_may(&qs, b, GR_RES_MAPPED, 9 << 20));
	CHECK(!gr_peer_may(&qs, b, GR_RES_MAPPED, (9 << 20) + 1));
	CHECK_EQ(gr_quota_room(&qs.pool[GR_RES_MAPPED], 0), 9 << 20);
	gr_peers_deinit(&ps);
	gr_peers_deinit(&qs);
}

/*
 * k users each take all they can, in turn and then again in rounds; the
 * next user still gets one unit, and no user ever makes the pool leave
 * less than its reserve, newcomers' first units aside.
 */
static void test_no_k_deny_the_next(void)
{
	for (unsigned k = 1; k <= 40; k++) {
		gr_peers ps = {0};
		ps.pool[GR_RES_CONNECTIONS].cap = 1024;
		gr_peer *u[64];
		for (unsigned i = 0; i < k; i++) {
			u[i] = gr_peers_join(&ps, 1000 + i);
			CHECK(u[i]);
			take_all(&ps, u[i], GR_RES_CONNECTIONS, 1);
		}
		for (unsigned round = 0; round < 3; round++)
			for (unsigned i = 0; i < k; i++)
				take_all(&ps, u[i], GR_RES_CONNECTIONS, 1);
		gr_peer *next = gr_peers_join(&ps, 5000);
		CHECK_MSG(gr_peer_may(&ps, next, GR_RES_CONNECTIONS, 1),
			  "%u greedy users deny the next one (%llu of 1024 used)", k,
			  (unsigned long long)ps.pool[GR_RES_CONNECTIONS].used);
		gr_peers_deinit(&ps);
	}
}

/* Byte pools with asks of many sizes: a newcomer's small ask is served
 * whatever 3 greedy users did. */
static void test_bytes(void)
{
	gr_peers ps = {0};
	gr_pool *pool = &ps.pool[GR_RES_STAGING];
	pool->cap = 60u << 20;
	gr_peer *a = gr_peers_join(&ps, 1), *b = gr_peers_join(&ps, 2), *c = gr_peers_join(&ps, 3);
	take_all(&ps, a, GR_RES_STAGING, 256 << 10);
	take_all(&ps, b, GR_RES_STAGING, 4 << 20);
	take_all(&ps, c, GR_RES_STAGING, 64);
	take_all(&ps, a, GR_RES_STAGING, 256 << 10);
	CHECK(pool->used <= pool->cap);
	gr_peer *v = gr_peers_join(&ps, 4);
	CHECK(gr_peer_may(&ps, v, GR_RES_STAGING, 1 << 20));
	/* what a user gives back, it can take again; the pool counts right */
	uint64_t held = a->held[GR_RES_STAGING];
	gr_peer_discharge(&ps, a, GR_RES_STAGING, held);
	CHECK_EQ(a->held[GR_RES_STAGING], 0);
	CHECK_EQ(pool->holders, 2);
	gr_peer_discharge(&ps, b, GR_RES_STAGING, b->held[GR_RES_STAGING]);
	gr_peer_discharge(&ps, c, GR_RES_STAGING, c->held[GR_RES_STAGING]);
	CHECK_EQ(pool->used, 0);
	CHECK_EQ(pool->holders, 0);
	gr_peers_deinit(&ps);
}

static void test_caps_and_unlimited(void)
{
	gr_peers ps = {0};
	gr_peer *a = gr_peers_join(&ps, 1);
	/* no pool cap: no limit */
	CHECK(gr_peer_may(&ps, a, GR_RES_DEVICE_BYTES, UINT64_MAX));
	/* an operator's cap per user on top of the share */
	ps.pool[GR_RES_CONNECTIONS].cap = 100;
	ps.user_cap[GR_RES_CONNECTIONS] = 10;
	CHECK_EQ(take_all(&ps, a, GR_RES_CONNECTIONS, 1), 10);
	gr_peers_deinit(&ps);
}

/* Descriptors the closer has: counted until it counts them down, and a
 * user's entry stays until then. */
static void test_closing(void)
{
	gr_peers ps = {0};
	ps.pool[GR_RES_FDS].cap = 1000;
	gr_peer *a = gr_peers_join(&ps, 7);
	gr_peer_closing(&ps, a, 3);
	CHECK_EQ(ps.pool[GR_RES_FDS].used, 3);
	gr_peers_leave(&ps, a);
	CHECK_EQ(ps.n, 1); /* kept: its closes are pending */
	atomic_fetch_sub(&a->closing, 2);
	gr_peers_sweep(&ps);
	CHECK_EQ(ps.n, 1);
	CHECK_EQ(ps.pool[GR_RES_FDS].used, 1);
	atomic_fetch_sub(&a->closing, 1);
	gr_peers_sweep(&ps);
	CHECK_EQ(ps.n, 0);
	CHECK_EQ(ps.pool[GR_RES_FDS].used, 0);
	CHECK_EQ(ps.pool[GR_RES_FDS].holders, 0);
	gr_peers_deinit(&ps);
}

int main(void)
{
	test_alone();
	test_no_k_deny_the_next();
	test_bytes();
	test_caps_and_unlimited();
	test_closing();
	return 0;
}
