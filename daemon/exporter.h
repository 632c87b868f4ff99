/*
 * The metrics exporter: GET /metrics over HTTP (--metrics-listen), the
 * Prometheus text exposition of what stats and info report (proto/metrics.h).
 *
 * Scraping never touches the loop thread, nor waits for it. Every
 * GR_EXPORTER_INTERVAL_MS the loop takes a sample of its counters and
 * devices (a copy of some numbers: no rendering, no sorting) and
 * publishes it under a mutex; the HTTP server's own thread copies the
 * latest sample out under that mutex, renders it and answers. Neither
 * side holds the mutex for more than a copy of the sample, and the loop
 * only ever tries it: when a scrape holds it, the loop tries again a
 * millisecond later rather than wait. So a scrape is at most
 * GR_EXPORTER_INTERVAL_MS old (and a millisecond more each time a scrape
 * was copying out at the moment of publishing).
 *
 * The HTTP side is libmicrohttpd's (exporter.c), with a deadline on each
 * connection so that slow or idle clients cannot hold a scrape up; a
 * daemon built without it has exporter-none.c, whose gr_exporter_new()
 * says so and fails.
 */
#pragma once

#include <stddef.h>

#define GR_EXPORTER_INTERVAL_MS 100u

typedef struct gr_exporter gr_exporter;
typedef struct gr_server gr_server;

/*
 * Serve s's metrics on listen, "HOST:PORT" (a numeric IPv4 or IPv6
 * address, the latter in brackets, or a name that resolves to one; only
 * that address is bound) or "PORT" or ":PORT" (127.0.0.1), from a thread
 * of its own. On the loop thread, after the server is set up. Returns 0
 * and the exporter in *ret, or a negative errno and why in errbuf
 * (-EOPNOTSUPP: built without libmicrohttpd). ret_url, when not NULL,
 * gets where it serves (e.g. "http://127.0.0.1:9470/metrics").
 */
int gr_exporter_new(gr_server *s, const char *listen, gr_exporter **ret, char *ret_url,
		    size_t urllen, char *errbuf, size_t errlen);

/*
 * Stop serving (waits for the HTTP thread, which finishes the scrape it
 * is answering) and close the loop's timer; the exporter is freed once
 * the loop has closed it. Accepts NULL; returns NULL.
 */
gr_exporter *gr_exporter_close(gr_exporter *e);
