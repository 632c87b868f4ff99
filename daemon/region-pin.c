/*
 * Pinning host regions off the loop. A backend that registers a region's
 * memory (the CUDA backend page-locks it so chunks move by DMA) spends
 * time in proportion to its size: tens of milliseconds for a few GiB, in
 * which the loop would serve no one. Registering and unregistering run on
 * libuv's thread pool instead: a map is answered once its region is
 * registered, and a region's last reference hands its unregistering and
 * unmapping to the pool too. Meanwhile the region holds a reference (or
 * is not yet freed) and its connection is held (gr_conn_hold), so that
 * nothing goes under the work. The region counts in its user's share from
 * the map on (daemon/region.c), so no one can queue more than that.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "daemon/conn.h"
#include "daemon/server.h"
#include "util/log.h"

typedef struct region_pin {
	uv_work_t work;
	gr_region *r;
	gr_conn *c;      /* to answer, NULL when unpinning */
	uint32_t msgid;
	void *reg;       /* what register_host() gave */
	int err;
	char why[192];
} region_pin;

static void pin_work(uv_work_t *w)
{
	region_pin *p = w->data;
	gr_region *r = p->r;
	gr_backend *be = r->srv->backend;

	p->err = be->ops->register_host(be, r->base, r->bytes, r->writable, &p->reg, p->why,
					sizeof(p->why));
}

static void pin_done(uv_work_t *w, int status)
{
	region_pin *p = w->data;
	gr_region *r = p->r;
	gr_server *s = r->srv;
	gr_conn *c = p->c;

	s->pins--;
	if (status == 0 && p->err == 0) {
		r->reg = p->reg;
	} else {
		/* still readable, only slower to move */
		log_warning("region %" PRIu64 " (%zu bytes) not registered with the backend: %s",
			    r->id, r->bytes, status < 0 ? uv_strerror(status) : p->why);
	}
	r->pinning = false;
	if (!c->closing)
		gr_conn_map_reply(c, p->msgid, r);
	gr_conn_release(c);
	gr_region_unref(r);
	free(p);
}

bool gr_region_pin(gr_conn *c, gr_region *r, uint32_t msgid)
{
	gr_server *s = c->srv;
	gr_backend *be = s->backend;
	region_pin *p;

	if (!be->ops->register_host || s->pins_closed || !(p = calloc(1, sizeof(*p))))
		return false;
	p->work.data = p;
	p->r = gr_region_ref(r);
	p->c = c;
	p->msgid = msgid;
	r->pinning = true;
	if (uv_queue_work(s->loop, &p->work, pin_work, pin_done) < 0) {
		r->pinning = false;
		gr_region_unref(r);
		free(p);
		return false;
	}
	gr_conn_hold(c);
	s->pins++;
	return true;
}

static void unpin_work(uv_work_t *w)
{
	region_pin *p = w->data;
	gr_region *r = p->r;
	gr_backend *be = r->srv->backend;

	be->ops->unregister_host(be, r->reg);
	munmap((void *)r->base, r->bytes);
}

static void unpin_done(uv_work_t *w, int status)
{
	region_pin *p = w->data;
	gr_region *r = p->r;
	gr_server *s = r->srv;

	s->pins--;
	free(r);
	free(p);
}

bool gr_region_unpin(gr_region *r)
{
	gr_server *s = r->srv;
	gr_backend *be = s->backend;
	region_pin *p;

	if (!r->reg || !be || !be->ops->unregister_host || s->pins_closed ||
	    !(p = calloc(1, sizeof(*p))))
		return false;
	p->work.data = p;
	p->r = r;
	if (uv_queue_work(s->loop, &p->work, unpin_work, unpin_done) < 0) {
		free(p);
		return false;
	}
	/* gone for clients and the counters now; the pool lets go of it */
	s->mapped_bytes -= r->bytes;
	s->stats.regions--;
	s->pins++;
	return true;
}

void gr_region_pins_close(gr_server *s)
{
	while (s->pins > 0)
		uv_run(s->loop, UV_RUN_ONCE);
	s->pins_closed = true;
}
