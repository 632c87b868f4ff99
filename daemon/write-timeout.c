/*
 * Clients that stopped taking their replies. A connection that has had
 * reply bytes waiting in a write for --write-timeout-ms, and whose peer
 * took none of them in that time, is closed.
 *
 * Without it, a client that stops reading holds its connection, and what
 * it mapped, for as long as it likes; and one that goes away after
 * sending its own socket in SCM_RIGHTS while the daemon was not reading
 * it is never seen to go: that socket, in flight in the daemon's unread
 * input, keeps the client's end open, so neither EOF nor an error ever
 * comes, and the daemon, which stopped reading until its replies are
 * taken, never reads the message that holds it.
 *
 * One timer sweeps every connection each quarter of the timeout; a
 * connection is closed at the fourth sweep in a row that finds bytes
 * waiting and neither a write finished nor the write queue shorter, so
 * between 1 and 1.25 timeouts after its peer last took anything.
 */
#include <uv.h>

#include "util/log.h"
#include "daemon/server.h"

#define SWEEPS 4

static void write_sweep_cb(uv_timer_t *t)
{
	gr_server *s = t->data;
	gr_link *l = s->conns.next;

	while (l != &s->conns) {
		gr_conn *c = gr_container_of(l, gr_conn, link);
		size_t queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe);

		l = l->next;
		if (c->closing || c->writing_bytes == 0 || c->writes_done != c->writes_seen ||
		    queued != c->queue_seen) {
			c->writes_seen = c->writes_done;
			c->queue_seen = queued;
			c->write_stuck = 0;
			continue;
		}
		if (++c->write_stuck < SWEEPS)
			continue;
		log_notice("closing the connection of pid %d (uid %u): it took none of %zu reply "
			   "bytes in %u ms",
			   (int)c->pid, (unsigned)c->uid, c->writing_bytes, s->cfg->write_timeout_ms);
		s->stats.write_timeouts++;
		gr_conn_close(c);
	}
}

void gr_write_timeout_start(gr_server *s)
{
	unsigned ms = s->cfg->write_timeout_ms;

	uv_timer_init(s->loop, &s->write_sweep);
	s->write_sweep.data = s;
	if (ms) {
		unsigned every = (ms + SWEEPS - 1) / SWEEPS;
		uv_timer_start(&s->write_sweep, write_sweep_cb, every, every);
	}
	/* the connections keep the loop alive, not their watch */
	uv_unref((uv_handle_t *)&s->write_sweep);
}
