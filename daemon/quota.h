/*
 * Fair shares of what the daemon has: the rule that decides whether one
 * user (uid) may take more of a resource, given what every user holds.
 *
 * Each resource a client can hold (connections, descriptors, bytes in
 * flight, mapped host bytes, device regions and their bytes) is a pool
 * of cap units, of which used are held, by holders users. A user holding
 * held asks for ask more:
 *
 *  - any user may take more while a reserve (a quarter of the pool)
 *    stays free, up to an even split of what it could reach:
 *    (held + ask) * n <= free + held, n being the users holding it, the
 *    asker counted;
 *  - a user that holds none of it may also dip into the reserve, for up
 *    to half of what is free, or one unit of the pool if that is more:
 *    whatever the others hold, a newcomer is served, and the next one
 *    after it still finds half of the rest.
 *
 * So a user alone may hold three quarters of a pool, k users together
 * never more than all but the reserve, and no set of users can deny the
 * next one while the reserve holds two units of what it asks. A pool
 * whose cap is 0 has no limit. An operator's fixed per-user cap, where
 * one is set, applies on top (gr_quota_allows' caller).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef enum gr_res {
	GR_RES_CONNECTIONS,    /* connections open */
	GR_RES_FDS,            /* descriptors: 2 a connection, parked, being closed */
	GR_RES_STAGING,        /* staging bytes a request's data is read into */
	GR_RES_INFLIGHT,       /* bytes requests hold: staging, chunks, offsets, state */
	GR_RES_MAPPED,         /* host bytes mapped by regions */
	GR_RES_DEVICE_REGIONS, /* device-memory regions mapped */
	GR_RES_DEVICE_BYTES,   /* their bytes */
	GR_RES_N
} gr_res;

/* The name of a resource in stats and errors ("connections", ...). */
const char *gr_res_name(gr_res r);

typedef struct gr_pool {
	uint64_t cap;      /* 0: no limit */
	/* the least that is any use to a newcomer (a staging slot, a
	 * connection's descriptors): one is granted while that much is
	 * free, even past half of it (0 counts as 1) */
	uint64_t unit;
	uint64_t used;     /* held by every user together */
	unsigned holders;  /* users holding some */
	uint64_t refused;  /* asks refused (or made to wait) */
} gr_pool;

/* The reserve a holder must leave free: a quarter of the pool. */
static inline uint64_t gr_pool_reserve(const gr_pool *p)
{
	return p->cap / 4;
}

/* May a user holding held of pool p take ask more? */
bool gr_quota_allows(const gr_pool *p, uint64_t held, uint64_t ask);

/* The most a user holding held could take now (for errors and stats). */
uint64_t gr_quota_room(const gr_pool *p, uint64_t held);
