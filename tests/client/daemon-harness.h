/*
 * The harness of the client tests against the real daemon: gpured started
 * on a temporary socket with the backend under test, connections to it,
 * gpuredctl run against it, seeded random arrays, and the main() that runs
 * one scenario, named on the command line:
 *
 *   test-client-... SCENARIO GPURED GPUREDCTL
 *
 * A failing check exits; the daemon goes down with the test.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "client/gpured.h"

/* The backend under test: the CPU unless $GPURED_TEST_BACKEND says
 * otherwise (the GPU host runs these tests with "cuda"). */
const char *test_backend(void);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t now_ms(void);

/* ---- the daemon ------------------------------------------------------ */

typedef struct daemon_proc {
	pid_t pid;
	char dir[64]; /* a fresh directory for the socket, the log and gpuredctl's files */
	char sock[96];
	char log[96]; /* the daemon's stderr */
} daemon_proc;

/* The daemon of the scenario; killed and cleaned up at exit. */
extern daemon_proc the_daemon;

/* Start gpured on a fresh socket with extra arguments (NULL-terminated,
 * or NULL); return once it accepts connections. */
void daemon_start(daemon_proc *d, const char *const *extra);

/* SIGTERM and wait up to 10 s; returns the wait status. */
int daemon_stop(daemon_proc *d);

/* The daemon's stderr, to ours. */
void daemon_dump_log(const daemon_proc *d);

/* A connection to d, or the test fails. */
gpured_t *connect_or_die(const daemon_proc *d);

/* ---- data -------------------------------------------------------------- */

typedef struct rng {
	uint64_t s;
} rng;

/* xorshift64*: the same data on every run. */
uint64_t rng_next(rng *r);

/* n random elements of dt (malloc'ed, freed by the caller); 64-bit
 * integers small enough that sums of millions neither overflow nor round;
 * the narrow dtypes any bits, of finite values for the floats. */
void *random_array(rng *r, gpured_dtype dt, size_t n);

/* ---- gpuredctl ---------------------------------------------------------- */

/* Run gpuredctl with args (NULL-terminated), stdin from in[0..in_len),
 * $GPURED_SOCKET env_socket (or unset); returns the exit status, and
 * stdout and stderr in *ret_out and *ret_err (freed by the caller). */
int run_ctl(const char *const *args, const void *in, size_t in_len, const char *env_socket,
	    char **ret_out, char **ret_err);

/* run_ctl() with constant arguments and text input, into the caller's
 * char *out and *err (freed first). */
#define CTL(in, envsock, ...)                                                          \
	({                                                                             \
		static const char *const a_[] = { __VA_ARGS__, NULL };                 \
		free(out);                                                             \
		free(err);                                                             \
		run_ctl(a_, in, strlen(in), envsock, &out, &err);                      \
	})

/* ---- main ------------------------------------------------------------- */

typedef struct daemon_scenario {
	const char *name;
	void (*fn)(void);
} daemon_scenario;

/* main() of a daemon test: runs the scenario named by argv[1] of the n
 * given, with gpured at argv[2] and gpuredctl at argv[3]; returns the
 * exit status (0 once the scenario returns; its checks exit 1). */
int daemon_harness_main(int argc, char **argv, const daemon_scenario *scenarios, size_t n);
