/*
 * The requests outstanding on a connection: one entry each, in
 * submission order in a ring whose ids are consecutive (a reply finds its
 * entry by arithmetic), from client_pending_add() until the caller
 * collects it; and the ids of reduces whose replies arrived, in arrival
 * order, for the waits that take the next one (gpured_wait()).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/conn.h"

/* A request far older than the newest keeps the ring this long at most. */
#define MAX_SLOTS (16u * GPURED_MAX_OUTSTANDING)

static pending *slot(gpured_t *g, size_t i)
{
	return &g->pend[(g->head + i) & (g->cap_pend - 1)];
}

/* Free what e holds; it may be cleared again. */
static void clear(pending *e)
{
	free(e->errmsg);
	free(e->errcode);
	e->errmsg = e->errcode = NULL;
	if (e->kind && e->kind->clear)
		e->kind->clear(e);
	memset(&e->u, 0, sizeof(e->u));
}

pending *client_pending_find(gpured_t *g, uint32_t id)
{
	uint32_t base, off;
	pending *e;

	if (g->n_slots == 0 || id == 0)
		return NULL;
	base = slot(g, 0)->id;
	off = id - base;
	/* Ids skip 0 when they wrap around. */
	if (id < base)
		off--;
	if (off >= g->n_slots)
		return NULL;
	e = slot(g, off);
	return e->id == id && e->live ? e : NULL;
}

/* The count of kind's live entries (NULL if there is no room for it). */
static size_t *live_count(gpured_t *g, const client_kind *kind)
{
	for (size_t i = 0; i < CLIENT_KINDS_MAX; i++) {
		if (g->live_kinds[i].kind == kind)
			return &g->live_kinds[i].n;
		if (!g->live_kinds[i].kind) {
			g->live_kinds[i].kind = kind;
			return &g->live_kinds[i].n;
		}
	}
	return NULL;
}

size_t client_pending_live(const gpured_t *g, const client_kind *kind)
{
	if (!kind)
		return g->n_live_reduce;
	for (size_t i = 0; i < CLIENT_KINDS_MAX && g->live_kinds[i].kind; i++)
		if (g->live_kinds[i].kind == kind)
			return g->live_kinds[i].n;
	return 0;
}

int client_pending_add(gpured_t *g, gr_method m, gr_op op, gr_dtype dt, const client_kind *kind,
		       pending **ret)
{
	size_t *live = live_count(g, kind);
	pending *e;

	if (!live)
		/* not reachable: the library has fewer kinds */
		return client_error(g, -EINVAL, "too many kinds of request");
	if (g->n_live >= GPURED_MAX_OUTSTANDING)
		return client_error(g, -EAGAIN, "%u requests outstanding", GPURED_MAX_OUTSTANDING);
	if (g->n_slots >= MAX_SLOTS)
		return client_error(g, -EAGAIN, "request %u still outstanding after %u newer ones",
				    slot(g, 0)->id, MAX_SLOTS);
	if (g->n_slots == g->cap_pend) {
		size_t cap = g->cap_pend ? g->cap_pend * 2 : 16;
		pending *p = malloc(cap * sizeof(*p));

		if (!p)
			return client_error(g, -ENOMEM, "out of memory");
		/* Unwrap the ring into the new array. */
		for (size_t i = 0; i < g->n_slots; i++)
			p[i] = *slot(g, i);
		free(g->pend);
		g->pend = p;
		g->cap_pend = cap;
		g->head = 0;
	}
	e = slot(g, g->n_slots++);
	*e = (pending){ .id = g->next_id, .live = true, .method = m, .op = op, .dtype = dt,
			.kind = kind };
	g->n_live++;
	(*live)++;
	if (m == GR_METHOD_REDUCE)
		g->n_live_reduce++;
	/* 0 is the server's "unknown request"; skip it on wrap-around. */
	g->next_id++;
	if (g->next_id == 0)
		g->next_id = 1;
	*ret = e;
	return 0;
}

void client_pending_remove(gpured_t *g, pending *e)
{
	clear(e);
	e->live = false;
	g->n_live--;
	(*live_count(g, e->kind))--;
	if (e->method == GR_METHOD_REDUCE)
		g->n_live_reduce--;
	/* Nothing left to collect: what the queue holds is stale. */
	if (g->n_live_reduce == 0) {
		g->doneq_head = 0;
		g->doneq_len = 0;
	}
	/* Collected entries at the old end leave the ring. */
	while (g->n_slots > 0 && !slot(g, 0)->live) {
		g->head = (g->head + 1) & (g->cap_pend - 1);
		g->n_slots--;
	}
}

void client_pending_unadd(gpured_t *g, pending *e)
{
	client_pending_remove(g, e);
	if (g->n_slots > 0 && slot(g, g->n_slots - 1) == e)
		g->n_slots--;
	g->next_id = e->id;
}

int client_pending_unwritten(gpured_t *g, pending *e, int err)
{
	client_pending_unadd(g, e);
	return client_error(g, err, "cannot write the request: %s", gpured_strerror(err));
}

static int doneq_push(gpured_t *g, uint32_t id)
{
	if (g->doneq_head + g->doneq_len == g->doneq_cap) {
		size_t k = 0;

		/* Drop the ids that gpured_wait_id() collected meanwhile and
		 * move the rest to the front; grow only if that leaves the
		 * queue more than half full, so pushes stay O(1) amortized
		 * and the queue holds about as many ids as there are
		 * uncollected replies, whatever mix of waits the caller uses. */
		for (size_t i = 0; i < g->doneq_len; i++) {
			uint32_t x = g->doneq[g->doneq_head + i];
			const pending *e = client_pending_find(g, x);

			if (e && e->done)
				g->doneq[k++] = x;
		}
		g->doneq_head = 0;
		g->doneq_len = k;
		if (k + 1 > g->doneq_cap / 2) {
			size_t cap = g->doneq_cap ? g->doneq_cap * 2 : 64;
			uint32_t *q = realloc(g->doneq, cap * sizeof(*q));

			if (!q)
				return -ENOMEM;
			g->doneq = q;
			g->doneq_cap = cap;
		}
	}
	g->doneq[g->doneq_head + g->doneq_len++] = id;
	return 0;
}

int client_pending_done(gpured_t *g, pending *e)
{
	e->done = true;
	return e->method == GR_METHOD_REDUCE ? doneq_push(g, e->id) : 0;
}

pending *client_pending_next_done(gpured_t *g, const client_kind *kind)
{
	/* Drop the ids at the queue's head that were collected already;
	 * an entry of another kind stays queued for the wait that takes it. */
	while (g->doneq_len > 0) {
		const pending *e = client_pending_find(g, g->doneq[g->doneq_head]);

		if (e && e->done)
			break;
		g->doneq_head++;
		g->doneq_len--;
	}
	if (g->doneq_len == 0)
		g->doneq_head = 0;
	for (size_t i = 0; i < g->doneq_len; i++) {
		pending *e = client_pending_find(g, g->doneq[g->doneq_head + i]);

		if (!e || !e->done || (kind && e->kind != kind))
			continue;
		if (i == 0) {
			g->doneq_head++;
			g->doneq_len--;
			if (g->doneq_len == 0)
				g->doneq_head = 0;
		}
		return e;
	}
	return NULL;
}

void client_pending_free_values(pending *e)
{
	free(e->u.values);
}

void client_pending_deinit(gpured_t *g)
{
	for (size_t i = 0; i < g->n_slots; i++)
		clear(slot(g, i));
	free(g->pend);
	free(g->doneq);
	g->pend = NULL;
	g->doneq = NULL;
}
