/*
 * gpuredctl's progress bar: while a reduction reads a large input, one
 * line on a terminal with the bytes read, the total when it is known, and
 * the rate. It shows only on a terminal, only once reading has taken
 * CTL_PROGRESS_DELAY_NS (small inputs never see it), is redrawn at most
 * every CTL_PROGRESS_REDRAW_NS, and is erased when reading ends, so
 * nothing of it is left between the command and what it prints next.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_PROGRESS_DELAY_NS 500000000ull
#define CTL_PROGRESS_REDRAW_NS 100000000ull

typedef struct ctl_progress {
	int fd;            /* the terminal; -1: off */
	const char *what;  /* what is read, as the line names it */
	uint64_t total;    /* bytes to read; 0: unknown */
	uint64_t start_ns;
	uint64_t drawn_ns; /* last redraw; 0: not drawn yet */
	bool shown;        /* something is on the line */
} ctl_progress;

/*
 * Set p up for reading what (a name for the line, kept by pointer) of
 * total bytes (0 if unknown), drawing on fd: off (fd -1) unless enabled
 * and fd is a terminal.
 */
void ctl_progress_init(ctl_progress *p, int fd, bool enabled, const char *what, uint64_t total);

/* done bytes have been read: redraw if it is time to. */
void ctl_progress_update(ctl_progress *p, uint64_t done);

/* Reading is over: erase the line if it was drawn. */
void ctl_progress_finish(ctl_progress *p);

/*
 * The line for done of total bytes (0: unknown) after elapsed_s seconds,
 * fitted to width columns: written to buf[0..size) NUL-terminated.
 * Returns its length, as snprintf does.
 */
int ctl_progress_format(char *buf, size_t size, const char *what, uint64_t done, uint64_t total,
			double elapsed_s, unsigned width);

/*
 * n bytes in decimal units ("512 B", "1.50 MB", "12.3 GB"), in buf.
 * Returns buf.
 */
char *ctl_progress_bytes(char *buf, size_t size, double n);
