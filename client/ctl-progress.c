#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "client/ctl-progress.h"

/* The longest name the line shows whole. */
#define NAME_MAX_COLUMNS 40

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *ctl_progress_bytes(char *buf, size_t size, double n)
{
	static const char *const units[] = { "kB", "MB", "GB", "TB", "PB" };
	unsigned u = 0;

	if (n < 1000) {
		snprintf(buf, size, "%.0f B", n);
		return buf;
	}
	n /= 1000;
	while (n >= 999.5 && u + 1 < sizeof(units) / sizeof(units[0])) {
		n /= 1000;
		u++;
	}
	snprintf(buf, size, n < 9.995 ? "%.2f %s" : n < 99.95 ? "%.1f %s" : "%.0f %s", n, units[u]);
	return buf;
}

/*
 * what as the line shows it: a long name by its end, which tells files
 * apart best, and bytes that could move the cursor as '?'.
 */
static void name_text(char *buf, size_t size, const char *what)
{
	size_t n = strlen(what), k = 0;

	if (n > NAME_MAX_COLUMNS) {
		k = (size_t)snprintf(buf, size, "...");
		what += n - (NAME_MAX_COLUMNS - 3);
	}
	for (; *what && k + 1 < size; what++)
		buf[k++] = (unsigned char)*what < 0x20 || *what == 0x7f ? '?' : *what;
	buf[k] = '\0';
}

int ctl_progress_format(char *buf, size_t size, const char *what, uint64_t done, uint64_t total,
			double elapsed_s, unsigned width)
{
	char name[NAME_MAX_COLUMNS + 1], d[16], t[16], rate[16], left[32] = "", head[160], tail[64];
	double bps = elapsed_s > 0 ? (double)done / elapsed_s : 0;
	int hn, tn;

	name_text(name, sizeof(name), what);
	ctl_progress_bytes(d, sizeof(d), (double)done);
	ctl_progress_bytes(rate, sizeof(rate), bps);
	if (total > 0 && done <= total) {
		unsigned pct = (unsigned)((double)done * 100 / (double)total);

		ctl_progress_bytes(t, sizeof(t), (double)total);
		if (bps > 0 && done < total) {
			double s = (double)(total - done) / bps;

			if (s < 360000)
				snprintf(left, sizeof(left), "  %u:%02u left", (unsigned)s / 60, (unsigned)s % 60);
		}
		hn = snprintf(head, sizeof(head), "reading %s  %s of %s %3u%% ", name, d, t, pct);
		tn = snprintf(tail, sizeof(tail), " %s/s%s", rate, left);
	} else {
		hn = snprintf(head, sizeof(head), "reading %s  %s", name, d);
		tn = snprintf(tail, sizeof(tail), "  %s/s", rate);
	}
	if (hn < 0 || tn < 0 || (size_t)hn >= sizeof(head) || (size_t)tn >= sizeof(tail))
		return -EINVAL;
	if (size == 0)
		return 0;
	/* Never the last column: a terminal that wraps there would leave the
	 * line behind on the next. */
	unsigned room = width > 1 ? width - 1 : 0;
	unsigned hw = (unsigned)hn, tw = (unsigned)tn;

	if (total > 0 && done <= total && hw + tw + 12 <= room) {
		/* [====>    ] in what is left between head and tail */
		unsigned inner = room - hw - tw - 2;
		unsigned fill = (unsigned)((double)done / (double)total * inner);
		char bar[512];
		unsigned k = 0;

		if (inner > sizeof(bar) - 3)
			inner = sizeof(bar) - 3;
		if (fill > inner)
			fill = inner;
		bar[k++] = '[';
		for (unsigned i = 0; i < inner; i++)
			bar[k++] = i < fill ? '=' : i == fill ? '>' : ' ';
		bar[k++] = ']';
		bar[k] = '\0';
		return snprintf(buf, size, "%s%s%s", head, bar, tail);
	}
	/* No room for a bar: the numbers, cut to the width. */
	int n = snprintf(buf, size, "%.*s%s", (int)(hw > 0 && head[hw - 1] == ' ' ? hw - 1 : hw), head,
			 tail);
	if (n > 0 && (unsigned)n > room && room < size) {
		buf[room] = '\0';
		n = (int)room;
	}
	return n;
}

void ctl_progress_init(ctl_progress *p, int fd, bool enabled, const char *what, uint64_t total)
{
	*p = (ctl_progress){
		.fd = enabled && fd >= 0 && isatty(fd) ? fd : -1,
		.what = what,
		.total = total,
		.start_ns = now_ns(),
	};
}

static unsigned term_width(int fd)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 80;
}

/* All of s to fd; a terminal that will not take it only loses the bar. */
static void put(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t k = write(fd, s, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		s += k;
		len -= (size_t)k;
	}
}

void ctl_progress_update(ctl_progress *p, uint64_t done)
{
	char line[600];
	uint64_t now;
	int n;

	if (p->fd < 0)
		return;
	now = now_ns();
	if (now - p->start_ns < CTL_PROGRESS_DELAY_NS ||
	    (p->drawn_ns && now - p->drawn_ns < CTL_PROGRESS_REDRAW_NS))
		return;
	/* \r: back to the start of the line; ESC [K: erase what was there. */
	memcpy(line, "\r\033[K", 4);
	n = ctl_progress_format(line + 4, sizeof(line) - 4, p->what, done, p->total,
				(double)(now - p->start_ns) / 1e9, term_width(p->fd));
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 5)
		n = (int)(sizeof(line) - 5);
	put(p->fd, line, 4 + (size_t)n);
	p->drawn_ns = now;
	p->shown = true;
}

void ctl_progress_finish(ctl_progress *p)
{
	if (p->fd >= 0 && p->shown)
		put(p->fd, "\r\033[K", 4);
	p->shown = false;
	p->fd = -1;
}
