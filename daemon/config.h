/*
 * The daemon's settings: defaults, a configuration file of "key = value"
 * lines (keys are the long option names), and the command line, which wins.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum gr_backend_kind {
	GR_BACKEND_AUTO,
	GR_BACKEND_CPU,
	GR_BACKEND_CUDA,
} gr_backend_kind;

#define GR_CONFIG_DEFAULT_PATH "/etc/gpured/gpured.conf"
/* Requests a CUDA daemon reduces on the CPU by default: a CPU core is done
 * with them before a GPU could answer (docs/design/staging.md, "The CPU
 * route"). */
#define GR_CONFIG_ROUTE_CPU_MAX_BYTES ((size_t)1 << 20)
/* The CPU workers' nice value by default: a request the loop thread
 * answers, and the clients waiting for it, get a CPU before a worker
 * reducing a large array does (docs/BENCHMARKS.md, "Socket"). */
#define GR_CONFIG_WORKER_NICE 10

typedef struct gr_config {
	char *socket_path;          /* NULL until resolved: see gr_config_default_socket() */
	unsigned socket_mode;       /* 0660 */
	gr_backend_kind backend;
	uint64_t max_request_bytes; /* 1 GiB */
	unsigned max_connections;   /* 1024 */
	unsigned max_regions;       /* per connection: shared-memory regions mapped at once */
	uint64_t max_mapped_bytes;  /* per connection: their bytes */
	uint64_t max_mapped_bytes_total; /* the whole daemon's */
	/* per user (the peer's uid), across all of their connections */
	unsigned max_connections_per_uid; /* 0: none beyond the fair share */
	uint64_t max_inflight_bytes_per_uid;
	uint64_t max_mapped_bytes_per_uid;
	/* Only these users and groups (the peer's primary gid) are served,
	 * when either list is given; NULL: everyone the socket's mode lets in. */
	uint32_t *allow_uids, *allow_gids;
	unsigned n_allow_uids, n_allow_gids;
	size_t staging_bytes;       /* 0: the backend's default */
	size_t chunk_bytes;         /* 0: the backend's default */
	unsigned threads;           /* 0: one per CPU */
	int worker_nice;            /* the CPU workers' nice above the daemon's (0..19) */
	unsigned streams;           /* 0: the CUDA backend's default */
	size_t inline_max_bytes;    /* SIZE_MAX: the backend's default */
	size_t small_max_bytes;     /* data this small is packed into shared batch slots */
	uint64_t max_inflight_bytes;/* per connection: staged but unanswered */
	unsigned request_chunks;    /* chunks of one request in flight (2) */
	size_t max_unsent_bytes;    /* per connection: replies not yet written */
	size_t batch_max_bytes;
	unsigned batch_max_requests;
	unsigned batch_delay_us;    /* 0: a batch goes out when the loop has nothing to read */
	unsigned busy_poll_us;      /* the loop polls this long after its last event before it sleeps (50) */
	bool direct_replies;        /* backend threads write small requests' replies (true) */
	bool cpu_fallback;          /* CUDA: reduce on the CPU once no GPU is in service (true) */
	size_t route_cpu_max_bytes; /* CUDA: requests this small are reduced on the CPU (0: none) */
	unsigned host_data;         /* CUDA: where larger host data goes, a gr_sched_host (both) */
	bool allow_cuda_ipc;        /* map kind cuda_ipc, whose handle anyone may know (false) */
	unsigned shutdown_timeout_ms;
	unsigned write_timeout_ms;  /* close a peer that takes none of a pending reply this long (0: never) */
	/* close a connection whose request gets no byte this long (10000),
	 * that completes no request this long after it connects (0: never),
	 * whose descriptors wait this long for their request (10000) */
	unsigned request_timeout_ms;
	unsigned first_request_timeout_ms;
	unsigned fd_timeout_ms;
	/* descriptors all users together may hold (0: the open-files limit
	 * less a margin for the daemon's own) */
	uint64_t max_fds;
	unsigned max_device_regions;  /* device-memory regions, all users together (4096) */
	uint64_t max_device_bytes;    /* their bytes (0: no limit) */
	bool allow_cuda_ipc_writable; /* cuda_ipc regions may be mapped "writable" (false) */
	/* A stream read while others are, on a host short of CPU, gets the
	 * engine time of this many bytes of data of the average cost a
	 * millisecond (64K; 0: never paced; pace.c) ... */
	uint64_t pace_bytes_per_ms;
	/* ... short: some task waited for a CPU this percent of the last
	 * 100 ms (10; 0: always) */
	unsigned pace_cpu_pressure;
	char *metrics_listen;       /* [HOST:]PORT of GET /metrics; NULL: not served */
	char *fault;                /* backend fault injection (tests) */
	char *config_path;          /* NULL: GR_CONFIG_DEFAULT_PATH if it exists */
	int verbosity;              /* -v: 1 = debug */
} gr_config;

void gr_config_init(gr_config *c);
void gr_config_deinit(gr_config *c);

/*
 * Parse the configuration file (--config, else the default if present)
 * and the command line. Returns 0 to run, 1 when --help or --version was
 * printed, or a negative errno with a message in errbuf.
 */
int gr_config_parse(gr_config *c, int argc, char **argv, char *errbuf, size_t errlen);

/* The socket the daemon uses when none is given. */
const char *gr_config_default_socket(char *buf, size_t len);

void gr_config_usage(FILE *f);
