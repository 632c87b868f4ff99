#include "daemon/quota.h"

static const char *const res_names[GR_RES_N] = {
	[GR_RES_CONNECTIONS] = "connections",
	[GR_RES_FDS] = "fds",
	[GR_RES_STAGING] = "staging_bytes",
	[GR_RES_INFLIGHT] = "inflight_bytes",
	[GR_RES_MAPPED] = "mapped_bytes",
	[GR_RES_DEVICE_REGIONS] = "device_regions",
	[GR_RES_DEVICE_BYTES] = "device_bytes",
};

const char *gr_res_name(gr_res r)
{
	return (unsigned)r < GR_RES_N ? res_names[r] : "?";
}

bool gr_quota_allows(const gr_pool *p, uint64_t held, uint64_t ask)
{
	if (p->cap == 0)
		return true;
	uint64_t free = p->used < p->cap ? p->cap - p->used : 0;
	if (ask > free)
		return false;
	/* a newcomer may dip into the reserve, for half of what is free or
	 * one unit */
	uint64_t unit = p->unit ? p->unit : 1;
	if (held == 0 && (ask <= free / 2 || ask <= unit))
		return true;
	if (free - ask < gr_pool_reserve(p))
		return false;
	/* (held + ask) * n <= free + held, n counting the asker: held and
	 * ask are each at most cap, so neither side overflows */
	unsigned n = p->holders + (held == 0);
	return held + ask <= (free + held) / n;
}

uint64_t gr_quota_room(const gr_pool *p, uint64_t held)
{
	if (p->cap == 0)
		return UINT64_MAX;
	uint64_t free = p->used < p->cap ? p->cap - p->used : 0;
	uint64_t unit = p->unit ? p->unit : 1;
	uint64_t newcomer = held == 0 ? (free / 2 > unit ? free / 2 : (unit < free ? unit : free)) : 0;
	uint64_t reserve = gr_pool_reserve(p);
	if (free <= reserve)
		return newcomer;
	unsigned n = p->holders + (held == 0);
	uint64_t even = (free + held) / n;
	uint64_t by_split = even > held ? even - held : 0;
	uint64_t by_reserve = free - reserve;
	uint64_t room = by_split < by_reserve ? by_split : by_reserve;
	return room > newcomer ? room : newcomer;
}
