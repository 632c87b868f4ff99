#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/peer.h"

gr_peer *gr_peers_join(gr_peers *ps, uid_t uid)
{
	for (unsigned i = 0; i < ps->n; i++)
		if (ps->v[i]->uid == uid) {
			ps->v[i]->conns++;
			return ps->v[i];
		}
	if (ps->n == ps->cap) {
		unsigned cap = ps->cap ? 2 * ps->cap : 8;
		gr_peer **v = realloc(ps->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		ps->v = v;
		ps->cap = cap;
	}
	gr_peer *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->uid = uid;
	p->conns = 1;
	ps->v[ps->n++] = p;
	return p;
}

/* Settle what p's closer has closed since the last look: the pool no
 * longer counts those descriptors. */
static void peer_settle_closing(gr_peers *ps, gr_peer *p)
{
	uint64_t now = atomic_load(&p->closing);

	if (now < p->closing_seen) {
		gr_peer_discharge(ps, p, GR_RES_FDS, p->closing_seen - now);
		p->closing_seen = now;
	}
}

static void peer_free_at(gr_peers *ps, unsigned i)
{
	gr_peer *p = ps->v[i];
	for (unsigned r = 0; r < GR_RES_N; r++)
		if (p->held[r])
			gr_peer_discharge(ps, p, (gr_res)r, p->held[r]);
	ps->v[i] = ps->v[--ps->n];
	free(p);
}

void gr_peers_leave(gr_peers *ps, gr_peer *p)
{
	if (!p || --p->conns > 0)
		return;
	peer_settle_closing(ps, p);
	if (p->closing_seen > 0)
		return; /* gr_peers_sweep frees it once its closer is done */
	for (unsigned i = 0; i < ps->n; i++)
		if (ps->v[i] == p) {
			peer_free_at(ps, i);
			break;
		}
}

void gr_peers_sweep(gr_peers *ps)
{
	for (unsigned i = ps->n; i-- > 0;) {
		gr_peer *p = ps->v[i];
		peer_settle_closing(ps, p);
		if (p->conns == 0 && p->closing_seen == 0)
			peer_free_at(ps, i);
	}
}

void gr_peers_deinit(gr_peers *ps)
{
	for (unsigned i = 0; i < ps->n; i++)
		free(ps->v[i]);
	free(ps->v);
	ps->v = NULL;
	ps->n = ps->cap = 0;
}

bool gr_peer_may(const gr_peers *ps, const gr_peer *p, gr_res r, uint64_t n)
{
	uint64_t cap = ps->user_cap[r];

	if (cap && (n > cap || p->held[r] > cap - n))
		return false;
	return gr_quota_allows(&ps->pool[r], p->held[r], n);
}

void gr_peer_charge(gr_peers *ps, gr_peer *p, gr_res r, uint64_t n)
{
	if (n == 0)
		return;
	if (p->held[r] == 0)
		ps->pool[r].holders++;
	p->held[r] += n;
	ps->pool[r].used += n;
}

void gr_peer_discharge(gr_peers *ps, gr_peer *p, gr_res r, uint64_t n)
{
	if (n == 0)
		return;
	if (n > p->held[r])
		n = p->held[r];
	p->held[r] -= n;
	ps->pool[r].used -= n;
	if (p->held[r] == 0)
		ps->pool[r].holders--;
}

void gr_peer_closing(gr_peers *ps, gr_peer *p, uint64_t n)
{
	gr_peer_charge(ps, p, GR_RES_FDS, n);
	p->closing_seen += n;
	atomic_fetch_add(&p->closing, n);
}

bool gr_peer_cred(int fd, uid_t *ret_uid, gid_t *ret_gid, pid_t *ret_pid)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || len != sizeof(uc))
		return false;
	*ret_uid = uc.uid;
	*ret_gid = uc.gid;
	*ret_pid = uc.pid;
	return true;
}

static int id_parse(const char *s, size_t len, bool groups, uint32_t *ret)
{
	char buf[256];

	if (len == 0 || len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (isdigit((unsigned char)buf[0])) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(buf, &end, 10);
		if (errno || *end || v >= UINT32_MAX)
			return -EINVAL;
		*ret = (uint32_t)v;
		return 0;
	}
	if (groups) {
		struct group *g = getgrnam(buf);
		if (!g)
			return -EINVAL;
		*ret = g->gr_gid;
	} else {
		struct passwd *pw = getpwnam(buf);
		if (!pw)
			return -EINVAL;
		*ret = pw->pw_uid;
	}
	return 0;
}

int gr_ids_parse(const char *s, bool groups, uint32_t **ret, unsigned *ret_n, char *bad,
		 size_t badlen)
{
	uint32_t *v = NULL;
	unsigned n = 0;

	while (*s) {
		size_t len = strcspn(s, ", ");
		if (len > 0) {
			uint32_t *nv = realloc(v, (n + 1) * sizeof(*v));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
			if (id_parse(s, len, groups, &v[n]) < 0) {
				snprintf(bad, badlen, "%.*s", (int)(len < 64 ? len : 64), s);
				free(v);
				return -EINVAL;
			}
			n++;
		}
		s += len;
		s += strspn(s, ", ");
	}
	free(*ret);
	*ret = v;
	*ret_n = n;
	return 0;
}

bool gr_ids_contain(const uint32_t *ids, unsigned n, uint32_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}
