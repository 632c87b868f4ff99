/*
 * gpured-benchmark's connections and the threads that drive them. Each
 * thread runs an epoll loop over its share of the connections, each
 * connection keeping up to -P requests in flight until its quota is done
 * (or the deadline has passed). The wire is spoken here directly, with the
 * proto layer's writers and bounded reader, over non-blocking sockets;
 * requests freed up by one read of replies go out together in one
 * writev(), each its slot's header and the shared payload.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench/bench-data.h"
#include "bench/bench-latency.h"

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
	bench_latency lat;
	uint64_t t_start; /* when this thread's connections started sending */
	int fail;         /* a thread-level failure, 0 if none */
	char failmsg[128];
} worker;

/* Every thread waits here once its connections are open (initialised by
 * main() for --threads parties), so that the wall time covers all of them
 * busy. */
extern pthread_barrier_t bench_start_barrier;
/* When -t ends the run, in bench_now_ns()'s clock; 0: no limit. */
extern uint64_t bench_deadline_ns;

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);

/* A worker's thread: open its connections, run them to the end, close
 * them; what happened is left in the worker and its connections. */
void *bench_worker_run(void *arg);

/* Free what a connection holds (closing its socket if still open). */
void bench_conn_deinit(conn *c);
