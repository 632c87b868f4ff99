/*
 * Fuzz target: the daemon's whole connection input path, bytes and
 * descriptors together (daemon/conn.c, util/fdpass.c, daemon/region.c,
 * proto/request.c, the CPU backend). Each input starts a CPU daemon core
 * in this process, as gr_service_main() builds it (settings through
 * gr_config_parse(), gr_server_new(), a listening socket handed over with
 * gr_server_open_fd() as under socket activation), on a loop of its own,
 * connects one client to it and plays the input as that client.
 *
 * The input:
 *
 *   settings:u8  record*
 *   record   := op:u8 len:u16le [rep:u8 if op & REPEAT] fd:fdspec{op & 15} payload[len]
 *   fdspec   := kind:u8 size:u16le
 *
 * settings picks the daemon's options (settings_argv() below). Each
 * record sends its payload, (1 + 16 * rep) times over with REPEAT, with
 * its descriptors in one SCM_RIGHTS message on the first sendmsg(); a
 * truncated record sends what there is. op's other bits:
 *   SYNC   (0x10) before the next record, run the daemon until it has read
 *                 everything and answered all it will;
 *   REPEAT (0x20) a rep byte follows len;
 *   SHUT   (0x40) after this record, shut down the client's writing side:
 *                 the rest of the input is ignored, no ping is sent;
 *   LAST   (0x80) the payload's last byte goes in a sendmsg() of its own,
 *                 after the daemon read the rest, and the descriptors with it.
 * A descriptor's kind byte: the low 5 bits choose what it is, modulo
 * FD_KINDS (the FD_ list in fuzz-conn-fds.h: memfds sealed and not, read-only,
 * write-only and O_PATH reopenings of one, pipes, /dev/null, a socket,
 * the connection itself, a regular file, a directory, an eventfd, a
 * closed descriptor, which sendmsg() refuses: the bytes then go without
 * any), the top 3 a shift: a memfd's size is size << shift bytes, at most
 * MEMFD_BYTES_MAX, and 0 once the input's memfds add up to
 * MEMFD_TOTAL_MAX. Its first bytes are a pattern (floats, NaNs and all).
 * What the input sends beyond INPUT_BYTES_MAX is left out.
 *
 * After the records the daemon is run until it is quiet (nothing unread,
 * in flight or unsent). Checked then:
 * - every reply is one whole msgpack-RPC response within the client's
 *   limits (gr_msg_parse_response()), its error code one of PROTOCOL.md's
 *   but internal (the CPU backend does not fail), and an invalid_request
 *   reply is followed by the daemon closing;
 * - the daemon closes the connection only after invalid_request, after
 *   the client's end of input, or when the client sent more descriptors
 *   than the protocol lets it (> 8 at once, > 16 waiting);
 * - a connection left open, whose parser is between messages, answers a
 *   final ping with "pong";
 * - nothing stays stuck: the daemon goes quiet within DEADLINE_MS.
 * When the client then closes, the daemon must let go of everything: no
 * connection, region, request, mapped byte, staging slot or user entry
 * left, the loop closes with no handle open (uv_loop_close() == 0), the
 * process has as many descriptors open as before the input and no memfd
 * mapped, and ASan's leak check finds nothing.
 *
 * GPURED_FUZZ_VERBOSE=1 prints the daemon's log and each reply.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/config.h"
#include "util/log.h"
#include "daemon/server.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"
#include "proto/offsets.h"
#include "tests/check.h"
#include "tests/fuzz/fuzz-conn-fds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define OP_NFD 0x0f
#define OP_SYNC 0x10
#define OP_REPEAT 0x20
#define OP_SHUT 0x40
#define OP_LAST 0x80

/* Bytes one input sends at most, repeats included. */
#define INPUT_BYTES_MAX ((size_t)16 << 20)
/* How long the daemon may take to go quiet, each time it is asked to. */
#define DEADLINE_MS 5000
#define PING_MSGID 0xffffffffu

typedef struct harness {
	uv_loop_t loop;
	gr_config cfg;
	gr_server *srv;
	int cfd;            /* the client's end of the connection */
	bool eof;           /* the daemon closed it */
	bool write_shut;    /* the client shut down its side */
	bool broken;        /* a send failed: the daemon is gone */
	gr_buf rx;          /* replies read, not yet parsed */
	bool fatal;         /* an invalid_request reply came */
	bool pong;          /* the final ping was answered */
	bool ping_sent;
	bool too_many_fds;  /* more than the protocol allows were sent */
	unsigned fds_sent;
	size_t sent;
	fuzz_fds fds;       /* the descriptors it made (fuzz-conn-fds.h) */
} harness;

static bool verbose;
/* libFuzzer's handlers, as they are when the first input runs */
static struct sigaction fuzzer_sigint, fuzzer_sigterm;
static bool have_handlers;

/* ---- the daemon ---- */

static void settings_argv(uint8_t s, char **argv, int *argc)
{
	int n = 0;

	argv[n++] = "gpured-fuzz";
	argv[n++] = "--config=/dev/null";
	argv[n++] = "--backend=cpu";
	argv[n++] = "--chunk-bytes=256K";
	argv[n++] = "--max-request-bytes=4M";
	argv[n++] = s & 0x01 ? "--direct-replies=no" : "--direct-replies=yes";
	argv[n++] = s & 0x02 ? "--threads=2" : "--threads=1";
	if (s & 0x04)
		argv[n++] = "--inline-max-bytes=0"; /* every job to a worker */
	if (s & 0x08)
		argv[n++] = "--small-max-bytes=1K";
	if (s & 0x10) {
		argv[n++] = "--max-unsent-bytes=4K";
		argv[n++] = "--max-inflight-bytes=256K";
		argv[n++] = "--request-chunks=1";
	}
	if (s & 0x20) {
		argv[n++] = "--batch-delay-us=200";
		argv[n++] = "--busy-poll-us=0";
	}
	if (s & 0x40) {
		argv[n++] = "--max-regions=2";
		argv[n++] = "--max-mapped-bytes=1M";
	}
	/* staging: the chunks and the canary's 4 KiB */
	if (s & 0x80) {
		argv[n++] = "--staging-bytes=516K"; /* 2 slots */
	} else {
		argv[n++] = "--staging-bytes=1028K"; /* 4 slots */
	}
	argv[n] = NULL;
	*argc = n;
}

static gr_conn *the_conn(harness *h)
{
	gr_server *s = h->srv;
	return gr_link_linked(&s->conns) ? gr_container_of(s->conns.next, gr_conn, link) : NULL;
}

/*
 * Does p[0..n) begin a cumsum's streamed reply, [1, msgid, nil, {"count":
 * n, "values": <bin>...? Such a reply goes out before the request is read
 * to its end, and an error found after it began closes the connection
 * with the reply cut short (PROTOCOL.md, "cumsum").
 */
static bool streamed_reply_begun(const uint8_t *p, size_t n)
{
	static const char *const keys[] = { "count", "values" };
	gr_mp_token t;
	size_t at = 0;
	/* the tokens expected in turn: array of 4, 1, msgid, nil, map of 2,
	 * "count", its uint, "values", a bin */
	for (unsigned step = 0; step < 9; step++) {
		int k = gr_mp_next(p + at, n - at, &t);
		if (k <= 0)
			return false;
		at += (size_t)k;
		bool ok;
		switch (step) {
		case 0: ok = t.type == GR_MP_ARRAY && t.len == 4; break;
		case 1: ok = t.type == GR_MP_UINT && t.u.u == 1; break;
		case 2: ok = t.type == GR_MP_UINT; break;
		case 3: ok = t.type == GR_MP_NIL; break;
		case 4: ok = t.type == GR_MP_MAP && t.len == 2; break;
		case 5:
		case 7: {
			const char *key = keys[(step - 5) / 2];
			ok = t.type == GR_MP_STR && t.len == strlen(key) && n - at >= t.len &&
			     !memcmp(p + at, key, t.len);
			at += ok ? t.len : 0;
			break;
		}
		case 6: ok = t.type == GR_MP_UINT; break;
		default: ok = t.type == GR_MP_BIN; break;
		}
		if (!ok)
			return false;
	}
	return true;
}

/*
 * The largest bin a reply may carry here, and so the client's limit for
 * one (libgpured raises its own the same way for replies it expects to be
 * large, client/conn.c): segments' records, up to 40 bytes (moments)
 * for each of up to limits.max_segments segments, which a request of this
 * harness's 16 MiB of input can ask for; a cumsum's values, 8 bytes for
 * each element of a request of up to --max-request-bytes (4 MiB), are
 * fewer. Any other reply stays within the client's usual limits.
 */
#define REPLY_BIN_MAX (40u * (uint32_t)GR_OFFSETS_DEFAULT_MAX_SEGMENTS)

/* Parse what came; false once nothing more is whole. */
static bool take_reply(harness *h)
{
	gr_obj_tree t;
	gr_obj_limits lim = gr_msg_response_limits;
	lim.max_str = REPLY_BIN_MAX;
	long n = gr_obj_parse(h->rx.data, h->rx.len, &lim, &t);

	CHECK_MSG(n >= 0, "a reply that is no msgpack object within the client's limits (%ld)", n);
	if (n == 0) {
		CHECK_MSG(h->rx.len < REPLY_BIN_MAX + 4096, "a reply of over %u bytes",
			  REPLY_BIN_MAX + 4096);
		return false;
	}
	uint32_t msgid;
	gr_err code;
	const char *msg;
	uint32_t msglen;
	const gr_obj *res;
	CHECK_MSG(gr_msg_parse_response(t.root, &msgid, &code, &msg, &msglen, &res) == 0,
		  "a reply that is not [1, msgid, error, result]");
	if (verbose)
		fprintf(stderr, "reply %u: %s%s%.*s\n", msgid, gr_err_name(code), msg ? ": " : "",
			msg ? (int)msglen : 0, msg ? msg : "");
	if (code == GR_OK) {
		CHECK(res);
		if (msgid == PING_MSGID && h->ping_sent && res->type == GR_MP_STR && res->len == 4 &&
		    !memcmp(res->v.str, "pong", 4))
			h->pong = true;
	} else {
		/* the code as sent: one that PROTOCOL.md names */
		const gr_obj *e = gr_obj_get(&t.root->v.items[2], "code");
		gr_err parsed;
		CHECK(e && e->type == GR_MP_STR);
		CHECK_MSG(gr_err_parse(e->v.str, e->len, &parsed) && parsed == code,
			  "an error code PROTOCOL.md does not name: '%.*s'", (int)e->len, e->v.str);
		CHECK_MSG(msg && msglen > 0, "an error without a message");
		CHECK_MSG(code != GR_ERR_BUSY, "busy on the only connection");
		/* the CPU backend does not fail: internal would be the daemon
		 * blaming itself for what the client sent */
		CHECK_MSG(code != GR_ERR_INTERNAL, "internal: %.*s", (int)msglen, msg);
		if (code == GR_ERR_INVALID_REQUEST)
			h->fatal = true;
	}
	gr_obj_tree_deinit(&t);
	gr_buf_consume(&h->rx, (size_t)n);
	return true;
}

/* Read what the daemon sent; true if anything came. */
static bool client_read(harness *h)
{
	bool got = false;

	while (!h->eof) {
		CHECK(gr_buf_reserve(&h->rx, 65536) == 0);
		ssize_t n = recv(h->cfd, h->rx.data + h->rx.len, 65536, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		got = true;
		if (n <= 0) {
			CHECK_MSG(n == 0 || errno == ECONNRESET, "recv: %s", strerror(errno));
			h->eof = true;
			break;
		}
		h->rx.len += (size_t)n;
		while (take_reply(h))
			;
	}
	return got;
}

static void step(harness *h, int wait_ms)
{
	uv_run(&h->loop, UV_RUN_NOWAIT);
	if (client_read(h) || wait_ms == 0)
		return;
	struct pollfd p[2] = {
		{ .fd = uv_backend_fd(&h->loop), .events = POLLIN },
		{ .fd = h->cfd, .events = POLLIN },
	};
	int t = uv_backend_timeout(&h->loop);
	if (t < 0 || t > wait_ms)
		t = wait_ms;
	poll(p, h->eof ? 1 : 2, t);
}

/* Nothing left for the daemon to do on its own: everything read and
 * parsed, answered and written. */
static bool quiet(harness *h)
{
	gr_server *s = h->srv;
	gr_conn *c = the_conn(h);
	int unread = 0;

	/* descriptors being closed may hold the client's end open */
	if (gr_closer_pending(s->closer) > 0)
		return false;
	if (!c)
		return s->nconns == 0 && s->stats.inflight == 0;
	/* a request whose data is still to come waits for it */
	if (s->stats.inflight > (c->cur != NULL) ||
	    (c->cur && c->cur->nsubmitted != c->cur->ncombined))
		return false;
	if (c->wbuf.len || c->writing_bytes || (c->direct && gr_direct_held(c->direct)) ||
	    c->rpos != c->rlen || c->stall != GR_STALL_NONE || !c->reading)
		return false;
	CHECK(ioctl(c->rfd, FIONREAD, &unread) == 0);
	if (unread > 0)
		return false;
	/* and nothing left for the client */
	struct pollfd p = { .fd = h->cfd, .events = POLLIN };
	return h->eof || poll(&p, 1, 0) == 0;
}

static void describe(harness *h)
{
	gr_server *s = h->srv;
	gr_conn *c = the_conn(h);
	int unread = -1;

	fprintf(stderr, "server: inflight %llu, nconns %u, staging %u of %u free\n",
		(unsigned long long)s->stats.inflight, s->nconns, s->staging.nfree,
		s->staging.nslots);
	if (c) {
		ioctl(c->rfd, FIONREAD, &unread);
		fprintf(stderr,
			"connection: stall %d, reading %d, eof %d, closing %d, cur %p, requests %u, "
			"staged %llu, wbuf %zu, writing %zu, rbuf %zu unparsed, %d unread, "
			"%u fds queued, parser idle %d\n",
			(int)c->stall, c->reading, c->eof, c->closing, (void *)c->cur, c->nrequests,
			(unsigned long long)c->staged_bytes, c->wbuf.len, c->writing_bytes,
			c->rlen - c->rpos, unread, c->fds.n, gr_req_parser_idle(c->parser));
	}
}

static void settle(harness *h, const char *when)
{
	uint64_t t0 = uv_hrtime();
	unsigned calm = 0;

	while (calm < 2) {
		step(h, 2);
		calm = quiet(h) ? calm + 1 : 0;
		if (uv_hrtime() - t0 > (uint64_t)DEADLINE_MS * 1000000) {
			describe(h);
			CHECK_MSG(0, "the daemon is not quiet %d ms %s", DEADLINE_MS, when);
		}
	}
}

/* ---- the client's side ---- */

/* Send buf, with fds (n of them) on the first sendmsg(); waits while the
 * socket is full. */
static void client_send(harness *h, const uint8_t *buf, size_t len, const int *fds, unsigned n)
{
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(OP_NFD * sizeof(int))];
	} cm;
	uint64_t t0 = uv_hrtime();

	if (h->sent + len > INPUT_BYTES_MAX)
		len = INPUT_BYTES_MAX - h->sent;
	/* (descriptors without a byte would not go at all) */
	while (!h->broken && len > 0) {
		struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
		if (n > 0) {
			memset(&cm, 0, sizeof(cm));
			mh.msg_control = cm.space;
			mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(n * sizeof(int));
			memcpy(CMSG_DATA(c), fds, n * sizeof(int));
		}
		ssize_t r = sendmsg(h->cfd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EBADF && n > 0) {
			n = 0; /* a closed descriptor among them: the bytes go alone */
			continue;
		}
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			step(h, 2);
			if (uv_hrtime() - t0 > (uint64_t)DEADLINE_MS * 1000000) {
				describe(h);
				CHECK_MSG(0, "the daemon stopped reading for %d ms", DEADLINE_MS);
			}
			continue;
		}
		if (r < 0) {
			CHECK_MSG(errno == EPIPE || errno == ECONNRESET, "sendmsg: %s",
				  strerror(errno));
			h->broken = true;
			break;
		}
		if (n > 0) {
			h->fds_sent += n;
			if (n > GR_FDPASS_PER_READ || h->fds_sent > GR_FDQ_MAX)
				h->too_many_fds = true;
		}
		n = 0;
		buf += r;
		len -= (size_t)r;
		h->sent += (size_t)r;
	}
}

/* One record; the bytes it took, 0 at the end of the input. */
static size_t play_record(harness *h, const uint8_t *p, size_t size)
{
	const uint8_t *end = p + size, *q = p;
	int fds[OP_NFD];
	bool self[OP_NFD];
	unsigned nfd, rep = 0;

	if (end - q < 3)
		return 0;
	uint8_t op = *q++;
	size_t len = q[0] | q[1] << 8;
	q += 2;
	if (op & OP_REPEAT) {
		if (q == end)
			return 0;
		rep = *q++;
	}
	nfd = op & OP_NFD;
	if ((size_t)(end - q) < 3 * (size_t)nfd)
		nfd = (unsigned)(end - q) / 3;
	for (unsigned i = 0; i < nfd; i++, q += 3)
		fds[i] = fuzz_make_fd(&h->fds, q, &self[i]);
	if ((size_t)(end - q) < len)
		len = (size_t)(end - q);

	for (unsigned k = 0; k <= (op & OP_REPEAT ? 16 * rep : 0); k++) {
		const int *f = k == 0 ? fds : NULL;
		unsigned n = k == 0 ? nfd : 0;
		if (k == 0 && (op & OP_LAST) && len > 1) {
			client_send(h, q, len - 1, NULL, 0);
			settle(h, "before a record's last byte");
			client_send(h, q + len - 1, 1, f, n);
		} else {
			client_send(h, q, len, f, n);
		}
		if (h->broken || h->sent >= INPUT_BYTES_MAX)
			break;
	}
	for (unsigned i = 0; i < nfd; i++)
		if (!self[i] && fds[i] >= 0)
			close(fds[i]);
	q += len;
	if (op & OP_SYNC)
		settle(h, "after a record");
	if ((op & OP_SHUT) && !h->broken) {
		CHECK(shutdown(h->cfd, SHUT_WR) == 0 || errno == ENOTCONN);
		h->write_shut = true;
	}
	return (size_t)(q - p);
}

/* ---- checks ---- */

static unsigned count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	CHECK(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static unsigned count_memfd_maps(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned n = 0;

	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "memfd:gpured-fuzz-conn"))
			n++;
	fclose(f);
	return n;
}

static void run(const uint8_t *data, size_t size)
{
	harness h = { .cfd = -1 };
	char *argv[24], err[512] = "";
	int argc;
	size_t off = 1;

	settings_argv(size ? data[0] : 0, argv, &argc);
	gr_config_init(&h.cfg);
	CHECK_MSG(gr_config_parse(&h.cfg, argc, argv, err, sizeof(err)) == 0, "%s", err);
	CHECK(uv_loop_init(&h.loop) == 0);
	CHECK_MSG(gr_server_new(&h.loop, &h.cfg, &h.srv, err, sizeof(err)) == 0, "%s", err);
	/* SIGINT and SIGTERM stay libFuzzer's (they end a run, with its
	 * statistics), not a shutdown of this input's daemon */
	uv_signal_stop(&h.srv->sigint);
	uv_signal_stop(&h.srv->sigterm);
	if (have_handlers) {
		CHECK(sigaction(SIGINT, &fuzzer_sigint, NULL) == 0);
		CHECK(sigaction(SIGTERM, &fuzzer_sigterm, NULL) == 0);
	}
	gr_buf_init(&h.rx);

	/* a listening socket under an abstract name of the kernel's choice */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t salen = sizeof(sa_family_t);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(lfd >= 0);
	CHECK(bind(lfd, (struct sockaddr *)&sa, salen) == 0);
	salen = sizeof(sa);
	CHECK(getsockname(lfd, (struct sockaddr *)&sa, &salen) == 0);
	CHECK(listen(lfd, 4) == 0);
	CHECK_MSG(gr_server_open_fd(h.srv, lfd, err, sizeof(err)) == 0, "%s", err);
	h.cfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(h.cfd >= 0);
	CHECK(connect(h.cfd, (struct sockaddr *)&sa, salen) == 0);
	h.fds.self = h.cfd;
	while (!the_conn(&h) || !the_conn(&h)->reading)
		step(&h, 2);

	while (off < size && !h.write_shut && !h.broken) {
		size_t n = play_record(&h, data + off, size - off);
		if (n == 0)
			break;
		off += n;
	}
	settle(&h, "after the input");

	/* A connection between messages answers a ping. */
	gr_conn *c = the_conn(&h);
	bool expect_pong = c && !h.write_shut && !h.broken && !h.eof &&
			   gr_req_parser_idle(c->parser);
	if (c && !h.write_shut && !h.broken && !h.eof) {
		static const uint8_t ping[] = { 0x94, 0x00, 0xce, 0xff, 0xff, 0xff, 0xff,
						0xa4, 'p', 'i', 'n', 'g', 0x90 };
		h.ping_sent = true;
		client_send(&h, ping, sizeof(ping), NULL, 0);
		settle(&h, "after the ping");
	}
	if (h.write_shut) {
		/* the daemon answers what it read, then closes */
		uint64_t t0 = uv_hrtime();
		while (!h.eof) {
			step(&h, 2);
			if (uv_hrtime() - t0 > (uint64_t)DEADLINE_MS * 1000000) {
				describe(&h);
				CHECK_MSG(0, "no end of stream %d ms after the client's", DEADLINE_MS);
			}
		}
	}
	if (h.fatal) {
		CHECK_MSG(h.eof || h.broken, "invalid_request, and the connection stays open");
		CHECK_MSG(!the_conn(&h), "invalid_request, and the connection stays open");
	}
	/* a streamed reply cut short: its request failed after it began */
	const bool cut_stream = h.eof && streamed_reply_begun(h.rx.data, h.rx.len);
	if ((h.eof || !the_conn(&h)) && !h.fatal && !h.write_shut && !cut_stream)
		CHECK_MSG(h.too_many_fds, "the daemon closed the connection without invalid_request");
	if (expect_pong)
		CHECK_MSG(h.pong, "a connection between messages did not answer a ping");
	if (h.eof && !h.too_many_fds && !cut_stream)
		CHECK_MSG(h.rx.len == 0, "%zu bytes of a reply cut short by the close", h.rx.len);

	bool closed = h.eof;

	/* The client goes: the daemon lets go of everything. */
	close(h.cfd);
	h.cfd = -1;
	h.eof = true;
	settle(&h, "after the client closed");
	gr_server *s = h.srv;
	if (s->nconns)
		describe(&h);
	CHECK_EQ(s->nconns, 0);
	CHECK_EQ(s->stats.connections, 0);
	CHECK_EQ(s->stats.inflight, 0);
	CHECK_EQ(s->stats.regions, 0);
	CHECK_EQ(s->mapped_bytes, 0);
	/* descriptors handed to the closer are closed by its threads, and
	 * the user's entry goes at the next sweep after that */
	for (int i = 0; i < 5000 && gr_closer_pending(s->closer) > 0; i++)
		usleep(1000);
	CHECK_EQ(gr_closer_pending(s->closer), 0);
	gr_peers_sweep(&s->peers);
	CHECK_EQ(s->peers.n, 0);
	for (unsigned r = 0; r < GR_RES_N; r++) {
		CHECK_EQ(s->peers.pool[r].used, 0);
		CHECK_EQ(s->peers.pool[r].holders, 0);
	}
	CHECK_EQ(s->staging.nfree + (s->staging.batch != NULL), s->staging.nslots);
	CHECK(!s->staging.batch || s->staging.batch->refs == 1);

	/* as gr_service_main() ends: the loop returns once shutdown stops
	 * it, then the server is freed */
	gr_server_shutdown(s);
	uv_run(&h.loop, UV_RUN_DEFAULT);
	gr_server_free(s);
	uv_run(&h.loop, UV_RUN_DEFAULT);
	CHECK_MSG(uv_loop_close(&h.loop) == 0, "a handle left open");
	gr_config_deinit(&h.cfg);
	gr_buf_deinit(&h.rx);
	if (h.fds.used_memfd)
		CHECK_EQ(count_memfd_maps(), 0);
	if (verbose)
		fprintf(stderr, "%zu bytes sent, %u descriptors; %s%s%s\n", h.sent, h.fds_sent,
			h.pong ? "pong" : "no pong", h.fatal ? ", invalid_request" : "",
			closed ? ", closed by the daemon" : "");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned before = count_fds();

	if (!have_handlers) {
		CHECK(sigaction(SIGINT, NULL, &fuzzer_sigint) == 0);
		CHECK(sigaction(SIGTERM, NULL, &fuzzer_sigterm) == 0);
		have_handlers = true;
	}

	run(data, size);
	CHECK_EQ(count_fds(), before);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* the daemon does this at start (daemon/service.c) */
	signal(SIGPIPE, SIG_IGN);
	verbose = getenv("GPURED_FUZZ_VERBOSE") != NULL;
	gr_log_max_level = verbose ? LOG_DEBUG : LOG_CRIT;
	/* libuv's process-wide descriptors open once, at the first loop: not
	 * an input's */
	run(NULL, 0);
	return 0;
}
