/*
 * gpured-benchmark: a load generator in the manner of redis-benchmark.
 *
 * All -c connections are driven by one thread with an epoll loop (or by
 * --threads N loops, connections dealt out among them), each connection
 * keeping up to -P reduce requests in flight until -n requests in all are
 * done (or -t seconds have passed). A load generator must cost less than
 * what it measures: one thread blocked per connection would make every
 * reply wake a thread, and that wake-up is charged to the daemon. So the
 * wire is spoken here directly, with the proto layer's writers and bounded
 * reader, over non-blocking sockets; requests freed up by one read of
 * replies go out together in one writev().
 *
 * Every request sends the same array, filled so that its result is known
 * exactly (small integers, whose float sums are exact in any order), so
 * every reply is checked; a wrong value counts as an error. Latency is per
 * request, from its submission to the read that brought its reply.
 *
 * The array repeats with a period of three elements but for two, so a
 * large one is sent out of one buffer of about --send-buffer bytes (1 MiB)
 * named again and again in the writev(), with the two odd elements spliced
 * in: the client's copies then come from its cache, as gpured-sockbw's
 * writes of one reused 1 MiB buffer do, and the two measure the daemon's
 * side of the socket alike. --send-buffer 0 sends from one flat array.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench-region.h"
#include "client/gpured.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/types.h"

/* Slots are numbered in 16 bits of the msgid (see conn_msgid()). */
#define BENCH_MAX_DEPTH 65536u
#define BENCH_MAX_CONNS 10000u
#define READ_CHUNK 65536u
/* The request header with its msgid as a 5-byte uint32, and room to spare. */
#define HDR_MAX 96u
/* A large payload is sent out of a buffer of this many bytes, repeated. */
#define SEND_BUFFER_DEFAULT (1u << 20)
#define SEND_BUFFER_MIN 4096u

typedef struct bench_opts {
	const char *socket;
	unsigned conns;
	unsigned threads;
	unsigned depth;
	uint64_t requests;
	uint64_t elements;
	gr_dtype dtype;
	gr_op op;
	double seconds; /* 0: no limit */
	uint64_t send_buffer; /* bytes a payload is sent out of; 0: the whole array */
	bool region;          /* the array in a shared-memory region, named by each request */
	bool json;
} bench_opts;

/* The array every request sends, and what every reply must say. */
typedef struct bench_data {
	void *data;          /* the memory segs point into */
	struct iovec *segs;  /* the payload, in order: nbytes in all */
	unsigned nsegs;
	size_t n;
	size_t nbytes;
	size_t wire_bytes;   /* sent after the header: nbytes, or 0 with --region */
	int memfd;           /* --region: the array's memfd (-1 otherwise) */
	size_t region_id_at; /* --region: where the header holds the region id */
	gr_value expect;
	double tolerance; /* for floats: allowed |got - expect| */
	/* The request's header for msgid 0x10000; the msgid is patched in. */
	uint8_t hdr[HDR_MAX];
	size_t hdr_len;
} bench_data;

/*
 * Latencies in a log-linear histogram: 64 sub-buckets per power of two of
 * nanoseconds, so a percentile is within 1/64 (1.6%) of the true value and
 * a run of any length needs the same 32 KiB per thread.
 */
#define LAT_SUB_BITS 6
#define LAT_BUCKETS (64 << LAT_SUB_BITS)

typedef struct latency_hist {
	uint64_t count[LAT_BUCKETS];
	uint64_t n;
	uint64_t max_ns;
} latency_hist;

static unsigned lat_bucket(uint64_t ns)
{
	unsigned msb;

	if (ns < (1u << LAT_SUB_BITS))
		return (unsigned)ns;
	msb = 63u - (unsigned)__builtin_clzll(ns);
	/* The power of two, then the LAT_SUB_BITS bits below the top one. */
	return ((msb - LAT_SUB_BITS + 1) << LAT_SUB_BITS) |
	       (unsigned)((ns >> (msb - LAT_SUB_BITS)) & ((1u << LAT_SUB_BITS) - 1));
}

/* The middle of a bucket's range, in nanoseconds. */
static double lat_bucket_mid(unsigned b)
{
	unsigned e = b >> LAT_SUB_BITS, m = b & ((1u << LAT_SUB_BITS) - 1);

	if (e == 0)
		return m;
	/* Bucket (e, m) holds [(64 + m) << (e - 1), (65 + m) << (e - 1)). */
	return ((double)(64 + m) + 0.5) * (double)(1ull << (e - 1));
}

static void lat_add(latency_hist *h, uint64_t ns)
{
	h->count[lat_bucket(ns)]++;
	h->n++;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

static double lat_pct_us(const latency_hist *h, double p)
{
	uint64_t rank, seen = 0;

	if (h->n == 0)
		return 0;
	rank = (uint64_t)ceil(p / 100.0 * (double)h->n);
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < LAT_BUCKETS; b++) {
		seen += h->count[b];
		if (seen >= rank) {
			double mid = lat_bucket_mid(b);

			/* Never report more than the largest sample. */
			return (mid < (double)h->max_ns ? mid : (double)h->max_ns) / 1e3;
		}
	}
	return (double)h->max_ns / 1e3;
}

/* One request in flight: its slot holds its header until it is written. */
typedef struct slot {
	uint64_t t0;     /* submission time */
	uint32_t msgid;  /* 0 while free */
	uint8_t hdr[HDR_MAX];
} slot;

typedef struct conn {
	int fd;
	bool closed;
	bool want_out;     /* EPOLLOUT is in the interest set */
	uint16_t gen;      /* the msgid's upper half, bumped per request */
	uint64_t quota;
	uint64_t submitted;
	uint64_t answered; /* replies received, good or bad */
	slot *slots;       /* -P of them */
	uint32_t *free;    /* stack of free slot indexes */
	unsigned n_free;
	/* Slots submitted and not yet wholly written, in order: a ring. */
	uint32_t *wq;
	unsigned wq_head, wq_len;
	size_t w_off;      /* bytes of the ring's first request already written */
	/* Bytes read and not yet parsed: rbuf[r_start..r_end). */
	uint8_t *rbuf;
	size_t r_start, r_end, r_cap;
	int fail;
	char failmsg[128];
} conn;

typedef struct worker {
	pthread_t thread;
	const bench_opts *o;
	const bench_data *d;
	conn *conns;
	unsigned n_conns;
	int epfd;
	uint64_t done;
	uint64_t errors;
	uint64_t mismatches;
	latency_hist lat;
	uint64_t t_start; /* when this thread's connections started sending */
	int fail;         /* a thread-level failure, 0 if none */
	char failmsg[128];
} worker;

static atomic_bool stop_flag;
static pthread_barrier_t start_barrier;
static uint64_t t_deadline_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool time_up(uint64_t now)
{
	if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
		return true;
	if (t_deadline_ns && now >= t_deadline_ns) {
		atomic_store(&stop_flag, true);
		return true;
	}
	return false;
}

static bool value_ok(const bench_data *d, const gr_value *v, uint64_t count);

/* A reduce result as expected: its value, or for moments its sum. */
static bool reply_ok(gr_op op, const bench_data *d, const gr_obj *result)
{
	gr_moments m;
	gr_value v;
	uint64_t count;

	if (op == GR_OP_MOMENTS)
		return gr_msg_parse_moments_result(result, d->expect.kind, &m) == 0 &&
		       value_ok(d, &m.sum, m.count);
	return gr_msg_parse_reduce_result(result, d->expect.kind, &v, &count) == 0 &&
	       value_ok(d, &v, count);
}

static bool value_ok(const bench_data *d, const gr_value *v, uint64_t count)
{
	if (count != d->n || v->kind != d->expect.kind)
		return false;
	switch (v->kind) {
	case GR_KIND_I64:
		return v->i == d->expect.i;
	case GR_KIND_U64:
		return v->u == d->expect.u;
	case GR_KIND_F64:
		return fabs(v->f - d->expect.f) <= d->tolerance;
	}
	return false;
}

/*
 * A msgid names its slot in its low 16 bits; the upper 16 bits, never 0,
 * tell one use of the slot from the next. Every msgid is thus at least
 * 0x10000 and is written as a 5-byte uint32, so the header is one template
 * with the msgid patched in.
 */
static uint32_t conn_msgid(conn *c, uint32_t s)
{
	if (++c->gen == 0)
		c->gen = 1;
	return (uint32_t)c->gen << 16 | s;
}

static void conn_fail(worker *w, conn *c, int err, const char *what)
{
	if (c->fail)
		return;
	c->fail = err;
	snprintf(c->failmsg, sizeof(c->failmsg), "%s: %s", what, strerror(-err));
}

static void conn_close(worker *w, conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	/* What was submitted and not answered failed. */
	w->errors += c->submitted - c->answered;
	if (c->fd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
}

/* Take free slots for new requests, up to -P in flight and the quota. */
static void conn_submit(worker *w, conn *c, uint64_t now)
{
	while (c->n_free && c->submitted < c->quota && !time_up(now)) {
		uint32_t s = c->free[--c->n_free], id = conn_msgid(c, s);
		slot *sl = &c->slots[s];

		sl->msgid = id;
		sl->t0 = now;
		/* Big-endian, after the 0xce that the template check found. */
		sl->hdr[3] = (uint8_t)(id >> 24);
		sl->hdr[4] = (uint8_t)(id >> 16);
		sl->hdr[5] = (uint8_t)(id >> 8);
		sl->hdr[6] = (uint8_t)id;
		c->wq[(c->wq_head + c->wq_len++) % w->o->depth] = s;
		c->submitted++;
	}
}

/*
 * Write what the ring holds, as many requests as one writev() takes: each
 * is its slot's header and the shared payload. Returns 0 (all written, or
 * the socket is full and EPOLLOUT watched) or a negative errno.
 */
static int conn_flush(worker *w, conn *c)
{
	const bench_data *d = w->d;
	unsigned depth = w->o->depth;

	while (c->wq_len) {
		struct iovec iov[IOV_MAX];
		unsigned n = 0;
		ssize_t k;
		size_t off = c->w_off;

		for (unsigned i = 0; i < c->wq_len && n < IOV_MAX; i++) {
			slot *sl = &c->slots[c->wq[(c->wq_head + i) % depth]];

			if (off < d->hdr_len) {
				iov[n++] = (struct iovec){ sl->hdr + off, d->hdr_len - off };
				off = 0;
			} else {
				off -= d->hdr_len;
			}
			for (unsigned j = 0; j < d->nsegs && n < IOV_MAX; j++) {
				const struct iovec *sg = &d->segs[j];

				if (off < sg->iov_len) {
					iov[n++] = (struct iovec){ (uint8_t *)sg->iov_base + off,
								   sg->iov_len - off };
					off = 0;
				} else {
					off -= sg->iov_len;
				}
			}
		}
		k = writev(c->fd, iov, (int)n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		/* Retire the requests written whole. */
		size_t left = c->w_off + (size_t)k, whole = d->hdr_len + d->wire_bytes;

		while (c->wq_len && left >= whole) {
			left -= whole;
			c->wq_head = (c->wq_head + 1) % depth;
			c->wq_len--;
		}
		c->w_off = left;
	}
	bool want = c->wq_len > 0;

	if (want != c->want_out) {
		struct epoll_event ev = {
			.events = EPOLLIN | (want ? EPOLLOUT : 0),
			.data.ptr = c,
		};

		if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0)
			return -errno;
		c->want_out = want;
	}
	return 0;
}

/* One parsed reply: find its slot, record its latency, check its value. */
static int conn_reply(worker *w, conn *c, const gr_obj *root, uint64_t now)
{
	const gr_obj *result;
	const char *msg;
	uint32_t id, s, msglen;
	gr_err code;

	if (gr_msg_parse_response(root, &id, &code, &msg, &msglen, &result) < 0)
		return -EBADMSG;
	s = id & 0xffff;
	/* An error for no request (msgid 0: the daemon is busy, or lost the
	 * stream) ends the connection; say what the daemon said. */
	if (id == 0 && code != GR_OK && !c->fail) {
		c->fail = -EPROTO;
		snprintf(c->failmsg, sizeof(c->failmsg), "the daemon says %s: %.*s",
			 gr_err_name(code), msg ? (int)(msglen > 80 ? 80 : msglen) : 0, msg ? msg : "");
		return -EPROTO;
	}
	if (id == 0 || s >= w->o->depth || c->slots[s].msgid != id)
		return -EPROTO;
	lat_add(&w->lat, now - c->slots[s].t0);
	c->slots[s].msgid = 0;
	c->free[c->n_free++] = s;
	c->answered++;
	if (code != GR_OK) {
		w->errors++;
	} else if (!reply_ok(w->o->op, w->d, result)) {
		w->errors++;
		w->mismatches++;
	} else {
		w->done++;
	}
	return 0;
}

/* Read what the socket has, and take every whole reply out of it. */
static int conn_read(worker *w, conn *c, uint64_t now)
{
	for (;;) {
		ssize_t k;

		if (c->r_start == c->r_end) {
			c->r_start = c->r_end = 0;
		} else if (c->r_cap - c->r_end < READ_CHUNK / 2 && c->r_start > 0) {
			memmove(c->rbuf, c->rbuf + c->r_start, c->r_end - c->r_start);
			c->r_end -= c->r_start;
			c->r_start = 0;
		}
		if (c->r_cap - c->r_end < READ_CHUNK / 2) {
			size_t cap = c->r_cap * 2;
			uint8_t *p;

			if (cap > GR_MSG_RESPONSE_MAX_BYTES)
				return -EMSGSIZE;
			p = realloc(c->rbuf, cap);
			if (!p)
				return -ENOMEM;
			c->rbuf = p;
			c->r_cap = cap;
		}
		size_t room = c->r_cap - c->r_end;

		k = read(c->fd, c->rbuf + c->r_end, room);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		if (k == 0)
			return -ECONNRESET;
		c->r_end += (size_t)k;
		for (;;) {
			gr_obj_tree tree = { 0 };
			long m = gr_obj_parse(c->rbuf + c->r_start, c->r_end - c->r_start,
					      &gr_msg_response_limits, &tree);
			int r;

			if (m == 0)
				break;
			if (m < 0)
				return (int)m;
			r = conn_reply(w, c, tree.root, now);
			gr_obj_tree_deinit(&tree);
			if (r < 0)
				return r;
			c->r_start += (size_t)m;
		}
		/* A short read emptied the socket: spare the read that would
		 * only say EAGAIN. */
		if ((size_t)k < room)
			return 0;
	}
}

/* A write failed: the daemon may have said why before it closed (busy). */
static void conn_write_failed(worker *w, conn *c, int err, uint64_t now)
{
	if (err == -EPIPE || err == -ECONNRESET)
		(void)conn_read(w, c, now);
	conn_fail(w, c, err, "write");
}

static bool conn_finished(const conn *c)
{
	return c->answered == c->submitted &&
	       (c->submitted >= c->quota || atomic_load_explicit(&stop_flag, memory_order_relaxed));
}

static int conn_open(worker *w, conn *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	unsigned depth = w->o->depth;

	c->slots = calloc(depth, sizeof(*c->slots));
	c->free = calloc(depth, sizeof(*c->free));
	c->wq = calloc(depth, sizeof(*c->wq));
	c->r_cap = READ_CHUNK;
	c->rbuf = malloc(c->r_cap);
	if (!c->slots || !c->free || !c->wq || !c->rbuf)
		return -ENOMEM;
	/* Pop slot 0 first: a stack filled from the top. */
	for (unsigned i = 0; i < depth; i++) {
		c->free[i] = depth - 1 - i;
		memcpy(c->slots[i].hdr, w->d->hdr, w->d->hdr_len);
	}
	c->n_free = depth;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	/* the send buffer libgpured's connections ask for */
	int sndbuf = GPURED_SNDBUF_BYTES;
	(void)setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	/* Connect blocking (the daemon may be slow to accept), then not. */
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	if (w->d->memfd >= 0) {
		/* map the array once, and name it in every request */
		uint64_t id;
		int r = bench_region_map(c->fd, w->d->memfd, w->d->nbytes, &id);
		if (r < 0)
			return r;
		for (unsigned i = 0; i < depth; i++)
			for (unsigned k = 0; k < 8; k++)
				c->slots[i].hdr[w->d->region_id_at + k] = (uint8_t)(id >> (56 - 8 * k));
	}
	if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	return 0;
}

static void conn_deinit(conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->slots);
	free(c->free);
	free(c->wq);
	free(c->rbuf);
}

static void *worker_run(void *arg)
{
	worker *w = arg;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
	struct epoll_event evs[64];
	unsigned live = 0;
	int r;

	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	r = gpured_socket_path(w->o->socket, path, sizeof(path));
	for (unsigned i = 0; i < w->n_conns; i++) {
		conn *c = &w->conns[i];

		if (r < 0 || w->epfd < 0) {
			conn_fail(w, c, r < 0 ? r : -EMFILE, "socket");
			continue;
		}
		r = conn_open(w, c, path);
		if (r < 0) {
			conn_fail(w, c, r, "connect");
			r = 0;
		}
	}
	/* Start together, so the wall time covers all connections busy. */
	pthread_barrier_wait(&start_barrier);
	w->t_start = now_ns();
	for (unsigned i = 0; i < w->n_conns; i++) {
		conn *c = &w->conns[i];

		if (c->fail) {
			conn_close(w, c);
			continue;
		}
		conn_submit(w, c, w->t_start);
		r = conn_flush(w, c);
		if (r < 0)
			conn_write_failed(w, c, r, now_ns());
		if (c->fail || conn_finished(c))
			conn_close(w, c);
		else
			live++;
	}
	while (live > 0) {
		int n = epoll_wait(w->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), -1);
		uint64_t now;

		if (n < 0) {
			if (errno == EINTR)
				continue;
			w->fail = -errno;
			snprintf(w->failmsg, sizeof(w->failmsg), "epoll_wait: %s", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			conn *c = evs[i].data.ptr;

			if (c->closed)
				continue;
			/* Per connection, not per wake-up: the ones handled
			 * last must not have their requests' clocks started
			 * early. */
			now = now_ns();
			r = 0;
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
				r = conn_read(w, c, now);
				if (r < 0)
					conn_fail(w, c, r, "read");
			}
			if (r >= 0) {
				conn_submit(w, c, now);
				r = conn_flush(w, c);
				if (r < 0)
					conn_write_failed(w, c, r, now);
			}
			if (c->fail || conn_finished(c)) {
				conn_close(w, c);
				live--;
			}
		}
	}
	for (unsigned i = 0; i < w->n_conns; i++)
		conn_close(w, &w->conns[i]);
	return NULL;
}

/* CPU time this process has used, user and system, in seconds. */
static double cpu_seconds(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* The repeating part of the array: -1 0 1 ... (0 1 2 ... unsigned). */
static int bench_periodic(size_t i, bool is_unsigned)
{
	return (int)(i % 3) - (is_unsigned ? 0 : 1);
}

/* The value of element i of n: small integers, one distinct minimum and
 * one distinct maximum, so that every result is exact. */
static int bench_elem(size_t i, size_t n, bool is_unsigned)
{
	if (n > 2 && i == n / 3)
		return is_unsigned ? 0 : -2;
	if (n > 2 && i == 2 * n / 3)
		return 3;
	return bench_periodic(i, is_unsigned);
}

/* A small integer v's bits as a narrow float (its f32's fields moved:
 * exact, v being small). */
static unsigned bench_narrow_float(gr_dtype dt, int v)
{
	float f = (float)v;
	uint32_t b;
	memcpy(&b, &f, 4);
	if (!v)
		return 0;
	unsigned sign = b >> 31, e = b >> 23 & 0xff, m = b & 0x7fffff;
	switch (dt) {
	case GR_DT_F16:
		return sign << 15 | (e - 112) << 10 | m >> 13;
	case GR_DT_BF16:
		return b >> 16;
	case GR_DT_F8E4M3:
		return sign << 7 | (e - 120) << 3 | m >> 20;
	default: /* GR_DT_F8E5M2: an f16's top byte */
		return (sign << 15 | (e - 112) << 10 | m >> 13) >> 8;
	}
}

/* Element i of a T array at p takes the value v. */
static void bench_store(void *p, size_t i, gr_dtype dt, int v)
{
	switch (dt) {
	case GR_DT_I8: ((int8_t *)p)[i] = (int8_t)v; break;
	case GR_DT_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
	case GR_DT_I16: ((int16_t *)p)[i] = (int16_t)v; break;
	case GR_DT_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
	case GR_DT_F16:
	case GR_DT_BF16: ((uint16_t *)p)[i] = (uint16_t)bench_narrow_float(dt, v); break;
	case GR_DT_F8E4M3:
	case GR_DT_F8E5M2: ((uint8_t *)p)[i] = (uint8_t)bench_narrow_float(dt, v); break;
	case GR_DT_I32: ((int32_t *)p)[i] = v; break;
	case GR_DT_I64: ((int64_t *)p)[i] = v; break;
	case GR_DT_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
	case GR_DT_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
	case GR_DT_F32: ((float *)p)[i] = (float)v; break;
	case GR_DT_F64: ((double *)p)[i] = v; break;
	default: break;
	}
}

/* Elements [a, b) of the periodic part, as pieces of the block. */
static void bench_segs_run(bench_data *d, const uint8_t *block, size_t block_elems,
			   size_t esz, size_t a, size_t b)
{
	while (a < b) {
		size_t off = a % block_elems, len = block_elems - off;

		if (len > b - a)
			len = b - a;
		d->segs[d->nsegs++] = (struct iovec){ (void *)(block + off * esz), len * esz };
		a += len;
	}
}

/*
 * The payload of a large array, out of one block of the periodic pattern
 * (a multiple of its period, so element i is the block's i mod its
 * length) and two cells for the elements that break the period.
 */
static int bench_data_repeat(const bench_opts *o, bench_data *d, bool is_unsigned)
{
	size_t esz = gr_dtype_size(o->dtype), n = o->elements;
	size_t block_elems = (size_t)(o->send_buffer / esz) / 3 * 3;
	size_t odd[2] = { n / 3, 2 * n / 3 };
	uint8_t *p, *cells;

	p = malloc((block_elems + 2) * esz);
	/* each run of the period: a piece per block boundary it crosses,
	 * and one more; and the two cells */
	d->segs = calloc(2 * (n / block_elems + 3), sizeof(*d->segs));
	if (!p || !d->segs) {
		free(p);
		return -ENOMEM;
	}
	for (size_t i = 0; i < block_elems; i++)
		bench_store(p, i, o->dtype, bench_periodic(i, is_unsigned));
	cells = p + block_elems * esz;
	for (unsigned j = 0; j < 2; j++)
		bench_store(cells, j, o->dtype, bench_elem(odd[j], n, is_unsigned));
	bench_segs_run(d, p, block_elems, esz, 0, odd[0]);
	d->segs[d->nsegs++] = (struct iovec){ cells, esz };
	bench_segs_run(d, p, block_elems, esz, odd[0] + 1, odd[1]);
	d->segs[d->nsegs++] = (struct iovec){ cells + esz, esz };
	bench_segs_run(d, p, block_elems, esz, odd[1] + 1, n);
	d->data = p;
	return 0;
}

static int bench_data_fill(const bench_opts *o, bench_data *d)
{
	size_t esz = gr_dtype_size(o->dtype), n = o->elements;
	bool is_unsigned = gr_result_kind(GR_OP_SUM, o->dtype) == GR_KIND_U64;
	/* |x| <= 3 and n < 2^32: the sums fit in 64 bits. */
	int64_t sum = 0, sumsq = 0, mn = INT64_MAX, mx = INT64_MIN;
	gr_buf hb;
	uint8_t *p;
	int r;

	d->memfd = -1;
	if (o->region) {
		if ((r = bench_region_memfd(n * esz, &d->memfd, &d->data)) < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			bench_store(d->data, i, o->dtype, bench_elem(i, n, is_unsigned));
		d->nsegs = 0;
	} else if (o->send_buffer && n * esz > o->send_buffer) {
		if ((r = bench_data_repeat(o, d, is_unsigned)) < 0)
			return r;
	} else {
		/* at most --send-buffer bytes, unless that is 0 */
		p = malloc(n ? n * esz : 1);
		d->segs = calloc(1, sizeof(*d->segs));
		if (!p || !d->segs) {
			free(p);
			return -ENOMEM;
		}
		for (size_t i = 0; i < n; i++)
			bench_store(p, i, o->dtype, bench_elem(i, n, is_unsigned));
		d->data = p;
		d->segs[0] = (struct iovec){ p, n * esz };
		d->nsegs = n ? 1 : 0;
	}
	/* Three of every period, then the two replaced elements corrected. */
	for (size_t i = 0; i < n && i < 3; i++) {
		int64_t x = bench_periodic(i, is_unsigned), k = (int64_t)((n - i + 2) / 3);

		sum += k * x;
		sumsq += k * x * x;
		if (x < mn)
			mn = x;
		if (x > mx)
			mx = x;
	}
	if (n > 2) {
		size_t sp[2] = { n / 3, 2 * n / 3 };

		for (unsigned j = 0; j < 2; j++) {
			int64_t was = bench_periodic(sp[j], is_unsigned);
			int64_t x = bench_elem(sp[j], n, is_unsigned);

			sum += x - was;
			sumsq += x * x - was * was;
			if (x < mn)
				mn = x;
			if (x > mx)
				mx = x;
		}
	}
	d->n = n;
	d->nbytes = n * esz;
	d->expect.kind = gr_result_kind(o->op, o->dtype);
	/* argmin and argmax: their value is checked, not the index; moments:
	 * its sum, not its other fields */
	int64_t e = o->op == GR_OP_SUM || o->op == GR_OP_MOMENTS ? sum : o->op == GR_OP_SUMSQ ? sumsq :
		    o->op == GR_OP_MIN || o->op == GR_OP_ARGMIN ? mn : mx;
	if (o->op != GR_OP_SUM && o->op != GR_OP_SUMSQ && n == 0)
		e = 0; /* the server answers "empty": counted as errors */
	switch (d->expect.kind) {
	case GR_KIND_I64:
		d->expect.i = (int64_t)e;
		break;
	case GR_KIND_U64:
		d->expect.u = (uint64_t)e;
		break;
	case GR_KIND_F64:
		d->expect.f = (double)e;
		break;
	}
	/* Partial sums of these values stay below 2^24 in magnitude when n
	 * does, so even float32 accumulation is exact; past that, allow the
	 * rounding of a float32 pairwise sum. */
	d->tolerance = n <= (1u << 24) ? 0 : 1e-6 * (double)(sumsq > 0 ? sumsq : 1);

	/* The header template, whose msgid conn_submit() rewrites in place:
	 * [0x94, 0x00, 0xce, msgid as 4 bytes big-endian, ...]. */
	gr_buf_init(&hb);
	d->wire_bytes = o->region ? 0 : d->nbytes;
	if (o->region)
		r = bench_region_request(&hb, o->op, o->dtype, n, &d->region_id_at);
	else
		r = gr_msg_write_reduce_header(&hb, 0x10000, o->op, o->dtype, (uint32_t)d->nbytes);
	if (r >= 0 && (hb.len > HDR_MAX || hb.len < 7 ||
		       memcmp(hb.data, "\x94\x00\xce\x00\x01\x00\x00", 7) != 0))
		r = -EPROTO;
	if (r >= 0) {
		memcpy(d->hdr, hb.data, hb.len);
		d->hdr_len = hb.len;
	}
	gr_buf_deinit(&hb);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: gpured-benchmark [OPTIONS]\n"
		"\n"
		"Load the gpured daemon with reduce requests and report throughput and latency.\n"
		"\n"
		"  -s, --socket PATH    Daemon socket (default: $GPURED_SOCKET, else the daemon's default)\n"
		"  -c N                 Connections (default 8)\n"
		"      --threads N      Threads the connections are spread over (default 1)\n"
		"  -P N                 Requests in flight per connection (default 1)\n"
		"  -n N                 Total requests (default 100000; 0 with -t: no limit)\n"
		"  -d N                 Elements per request (default 256)\n"
		"      --dtype T        i32 i64 u32 u64 f32 f64, or f16 bf16 f8e4m3 f8e5m2\n"
		"                       i8 u8 i16 u16 (default f32)\n"
		"      --op OP          sum min max sumsq argmin argmax moments (default sum)\n"
		"  -t SECONDS           Stop after this long, even if fewer than -n are done\n"
		"      --send-buffer N  Send a larger payload out of one buffer of about N bytes,\n"
		"                       named again and again (default 1048576; at least 4096;\n"
		"                       0: out of one array as large as the payload)\n"
		"      --region         Put the array in a shared-memory region that each\n"
		"                       connection maps once; requests name it, not carry it\n"
		"      --json           Print the results as JSON\n"
		"  -h, --help           Show this help\n"
		"\n"
		"Every reply is checked against the known result; wrong values count as errors.\n"
		"Exit status: 0 no errors, 1 errors or failed connections, 2 usage error.\n");
}

static bool parse_u64(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	/* Accept a k/M/G suffix, powers of 1024, for element counts. */
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'M')
		v <<= 20, end++;
	else if (*end == 'G')
		v <<= 30, end++;
	if (errno || *end)
		return false;
	*ret = v;
	return true;
}

int main(int argc, char **argv)
{
	enum { OPT_DTYPE = 256, OPT_OP, OPT_JSON, OPT_THREADS, OPT_SEND_BUFFER, OPT_REGION };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "op", required_argument, NULL, OPT_OP },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "send-buffer", required_argument, NULL, OPT_SEND_BUFFER },
		{ "region", no_argument, NULL, OPT_REGION },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	bench_opts o = {
		.conns = 8, .threads = 1, .depth = 1, .requests = 100000, .elements = 256,
		.dtype = GR_DT_F32, .op = GR_OP_SUM, .send_buffer = SEND_BUFFER_DEFAULT,
	};
	bench_data d = { 0 };
	uint64_t v, done = 0, errors = 0, mismatches = 0, t0, t1;
	latency_hist *lat;
	worker *w;
	conn *cs;
	unsigned failed = 0;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "s:c:P:n:d:t:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'c':
			if (!parse_u64(optarg, &v) || v == 0 || v > BENCH_MAX_CONNS)
				goto bad;
			o.conns = (unsigned)v;
			break;
		case OPT_THREADS:
			if (!parse_u64(optarg, &v) || v == 0 || v > 1024)
				goto bad;
			o.threads = (unsigned)v;
			break;
		case 'P':
			if (!parse_u64(optarg, &v) || v == 0 || v > BENCH_MAX_DEPTH)
				goto bad;
			o.depth = (unsigned)v;
			break;
		case 'n':
			if (!parse_u64(optarg, &o.requests))
				goto bad;
			break;
		case 'd':
			if (!parse_u64(optarg, &o.elements))
				goto bad;
			break;
		case 't':
			errno = 0;
			o.seconds = strtod(optarg, &end);
			if (errno || *end || !(o.seconds > 0))
				goto bad;
			break;
		case OPT_DTYPE:
			if (!gr_dtype_parse(optarg, strlen(optarg), &o.dtype))
				goto bad;
			break;
		case OPT_OP:
			if (!gr_op_parse(optarg, strlen(optarg), &o.op))
				goto bad;
			break;
		case OPT_JSON:
			o.json = true;
			break;
		case OPT_REGION:
			o.region = true;
			break;
		case OPT_SEND_BUFFER:
			if (!parse_u64(optarg, &v) || (v != 0 && v < SEND_BUFFER_MIN))
				goto bad;
			o.send_buffer = v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'gpured-benchmark --help'.\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpured-benchmark: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (o.elements > UINT32_MAX || o.elements * gr_dtype_size(o.dtype) > UINT32_MAX) {
		fprintf(stderr, "gpured-benchmark: -d %llu: a request holds less than 4 GiB\n",
			(unsigned long long)o.elements);
		return 2;
	}
	if (o.threads > o.conns)
		o.threads = o.conns;
	/* A connection the daemon closes must fail its requests, not kill us. */
	signal(SIGPIPE, SIG_IGN);

	c = bench_data_fill(&o, &d);
	if (c < 0) {
		fprintf(stderr, "gpured-benchmark: cannot build the request: %s\n", strerror(-c));
		return 1;
	}
	w = calloc(o.threads, sizeof(*w));
	cs = calloc(o.conns, sizeof(*cs));
	if (!w || !cs) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < o.conns; i++) {
		cs[i].fd = -1;
		if (o.requests == 0 && o.seconds > 0)
			cs[i].quota = UINT64_MAX;
		else
			cs[i].quota = o.requests / o.conns + (i < o.requests % o.conns);
	}
	if (o.seconds > 0)
		t_deadline_ns = now_ns() + (uint64_t)(o.seconds * 1e9);
	if (pthread_barrier_init(&start_barrier, NULL, o.threads) != 0) {
		fprintf(stderr, "gpured-benchmark: cannot create a barrier\n");
		return 1;
	}
	double cpu0 = cpu_seconds();
	/* Thread i takes a contiguous share of the connections. */
	for (unsigned i = 0, first = 0; i < o.threads; i++) {
		w[i].o = &o;
		w[i].d = &d;
		w[i].epfd = -1;
		w[i].conns = cs + first;
		w[i].n_conns = o.conns / o.threads + (i < o.conns % o.threads);
		first += w[i].n_conns;
		if (pthread_create(&w[i].thread, NULL, worker_run, &w[i]) != 0) {
			fprintf(stderr, "gpured-benchmark: cannot start thread\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < o.threads; i++)
		pthread_join(w[i].thread, NULL);
	t1 = now_ns();
	double cpu = cpu_seconds() - cpu0;
	pthread_barrier_destroy(&start_barrier);

	lat = calloc(1, sizeof(*lat));
	if (!lat) {
		fprintf(stderr, "gpured-benchmark: out of memory\n");
		return 1;
	}
	t0 = t1;
	for (unsigned i = 0; i < o.threads; i++) {
		if (w[i].t_start && w[i].t_start < t0)
			t0 = w[i].t_start;
		done += w[i].done;
		errors += w[i].errors;
		mismatches += w[i].mismatches;
		if (w[i].fail) {
			if (failed++ == 0)
				fprintf(stderr, "gpured-benchmark: thread %u: %s\n", i, w[i].failmsg);
		}
		for (unsigned b = 0; b < LAT_BUCKETS; b++)
			lat->count[b] += w[i].lat.count[b];
		lat->n += w[i].lat.n;
		if (w[i].lat.max_ns > lat->max_ns)
			lat->max_ns = w[i].lat.max_ns;
		if (w[i].epfd >= 0)
			close(w[i].epfd);
	}
	for (unsigned i = 0; i < o.conns; i++) {
		if (cs[i].fail) {
			if (failed++ == 0)
				fprintf(stderr, "gpured-benchmark: connection %u: %s\n", i, cs[i].failmsg);
		}
		conn_deinit(&cs[i]);
	}

	double secs = (double)(t1 - t0) / 1e9;
	double rps = secs > 0 ? (double)done / secs : 0;
	double bytes = (double)done * (double)d.nbytes;
	double gbps = secs > 0 ? bytes / secs / 1e9 : 0;
	double p50 = lat_pct_us(lat, 50), p99 = lat_pct_us(lat, 99);
	double p999 = lat_pct_us(lat, 99.9), pmax = (double)lat->max_ns / 1e3;

	if (o.json) {
		printf("{\"op\":\"%s\",\"dtype\":\"%s\",\"elements\":%llu,\"connections\":%u,"
		       "\"threads\":%u,\"pipeline\":%u,\"requests\":%llu,\"errors\":%llu,"
		       "\"mismatches\":%llu,\"failed_connections\":%u,\"seconds\":%.6f,"
		       "\"requests_per_s\":%.1f,\"payload_gb_per_s\":%.4f,\"latency_us\":"
		       "{\"p50\":%.1f,\"p99\":%.1f,\"p99_9\":%.1f,\"max\":%.1f},"
		       "\"client_cpu_s\":%.3f}\n",
		       gr_op_name(o.op), gr_dtype_name(o.dtype), (unsigned long long)d.n,
		       o.conns, o.threads, o.depth, (unsigned long long)done,
		       (unsigned long long)errors, (unsigned long long)mismatches, failed, secs, rps,
		       gbps, p50, p99, p999, pmax, cpu);
	} else {
		printf("====== %s %s, %llu elements (%zu bytes) ======\n", gr_op_name(o.op),
		       gr_dtype_name(o.dtype), (unsigned long long)d.n, d.nbytes);
		printf("  %llu requests completed in %.3f seconds\n", (unsigned long long)done, secs);
		printf("  %u connections on %u thread%s, pipeline %u\n", o.conns, o.threads,
		       o.threads == 1 ? "" : "s", o.depth);
		printf("  errors: %llu (wrong results: %llu), failed connections: %u\n",
		       (unsigned long long)errors, (unsigned long long)mismatches, failed);
		printf("\n  throughput: %.1f requests per second, %.3f GB/s of payload\n", rps, gbps);
		printf("  latency (us): p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n", p50, p99, p999, pmax);
		printf("  this client's CPU time: %.3f s (%.2f us per request)\n", cpu,
		       done ? cpu * 1e6 / (double)done : 0);
	}
	free(lat);
	free(cs);
	free(w);
	free(d.segs);
	if (d.memfd >= 0) {
		munmap(d.data, d.nbytes ? d.nbytes : 1);
		close(d.memfd);
	} else {
		free(d.data);
	}
	return errors || failed ? 1 : 0;

bad:
	fprintf(stderr, "gpured-benchmark: invalid value for option: '%s'\n", optarg);
	return 2;
}
