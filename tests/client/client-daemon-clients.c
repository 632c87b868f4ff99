/*
 * test-client-daemon's scenarios of the daemon among its clients and its
 * signals: spin (a client that spins for its replies), connections (many
 * clients at once), ctl (gpuredctl) and sigterm (a request in flight is
 * answered, then the daemon exits 0 and removes its socket).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/client/daemon-harness.h"
#include "tests/client/test-client-daemon.h"

static void *kill_later(void *arg)
{
	const daemon_proc *d = arg;

	usleep(50000);
	kill(d->pid, SIGKILL);
	return NULL;
}

/*
 * A client that spins for its replies (gpured_set_spin()): replies that
 * come within the spin time, replies that come after it (a large array;
 * a spin of 1 us), replies collected pipelined, and a server that goes
 * away while the client spins: every answer right, and a closed
 * connection an error, not a hang.
 */
void test_spin(void)
{
	rng r = { 4242 };
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	gpured_set_spin(g, 2000);
	for (int i = 0; i < 300; i++) {
		gpured_dtype dt = (gpured_dtype)(i % 6);
		size_t n = 1 + (size_t)(rng_next(&r) % 3000);
		void *data = random_array(&r, dt, n);

		reduce_and_check(g, (gpured_op)(i % 4), dt, data, n);
		free(data);
	}
	/* longer than the spin: the wait goes on in poll() */
	gpured_set_spin(g, 1);
	void *big = random_array(&r, GPURED_F64, 4000000);
	reduce_and_check(g, GPURED_OP_SUM, GPURED_F64, big, 4000000);
	/* pipelined, collected by whichever comes */
	gpured_set_spin(g, UINT32_MAX); /* clamped to GPURED_SPIN_MAX_US */
	enum { P = 40 };
	expect want[P];
	uint32_t ids[P];
	for (int i = 0; i < P; i++) {
		size_t n = i == 7 ? 4000000 : 1 + (size_t)(rng_next(&r) % 5000);
		void *data = i == 7 ? big : random_array(&r, GPURED_I64, n);

		want[i] = reference(i == 7 ? GPURED_OP_SUM : GPURED_OP_MAX, i == 7 ? GPURED_F64 : GPURED_I64,
				    data, n);
		CHECK_EQ(gpured_submit(g, i == 7 ? GPURED_OP_SUM : GPURED_OP_MAX,
				       i == 7 ? GPURED_F64 : GPURED_I64, data, n, &ids[i]),
			 0);
		if (i != 7)
			free(data);
	}
	for (int k = 0; k < P; k++) {
		gpured_value v;
		uint32_t id;
		int rc = gpured_wait(g, &id, &v), i;

		for (i = 0; i < P && ids[i] != id; i++)
			;
		CHECK_MSG(i < P, "unexpected id %u: %s", id, gpured_errmsg(g));
		check_result("spinning, pipelined", &want[i], rc, &v, g);
		ids[i] = 0;
	}
	free(big);
	/* a server that does not answer: the spin, then poll() until the
	 * timeout */
	gpured_set_spin(g, 100000);
	gpured_set_timeout(g, 200);
	CHECK_EQ(kill(the_daemon.pid, SIGSTOP), 0);
	uint64_t t0 = now_ms();
	CHECK_EQ(gpured_ping(g), -ETIMEDOUT);
	CHECK_MSG(now_ms() - t0 >= 290, "timed out after %llu ms", (unsigned long long)(now_ms() - t0));
	CHECK_EQ(kill(the_daemon.pid, SIGCONT), 0);
	gpured_close(g);
	/* the server goes away while the client spins for a reply */
	g = connect_or_die(&the_daemon);
	gpured_set_spin(g, GPURED_SPIN_MAX_US);
	CHECK_EQ(gpured_ping(g), 0);
	CHECK_EQ(kill(the_daemon.pid, SIGSTOP), 0);
	pthread_t killer;
	CHECK_EQ(pthread_create(&killer, NULL, kill_later, &the_daemon), 0);
	t0 = now_ms();
	CHECK_EQ(gpured_ping(g), -ECONNRESET);
	CHECK_MSG(now_ms() - t0 < 900, "the closed connection seen after %llu ms",
		  (unsigned long long)(now_ms() - t0));
	CHECK_EQ(pthread_join(killer, NULL), 0);
	gpured_close(g);
	daemon_stop(&the_daemon);
}

enum { CONN_THREADS = 50, CONN_REQUESTS = 20 };

static void *conn_thread(void *arg)
{
	rng r = { (uint64_t)(uintptr_t)arg * 7919 + 1 };
	gpured_t *g = connect_or_die(&the_daemon);
	uint32_t ids[4];
	expect want[4];

	/* Four in flight per connection, verified. */
	for (int k = 0; k < CONN_REQUESTS; k += 4) {
		for (int j = 0; j < 4; j++) {
			gpured_op op = (gpured_op)(rng_next(&r) % 4);
			gpured_dtype dt = (gpured_dtype)(rng_next(&r) % 6);
			size_t n = 1 + (size_t)(rng_next(&r) % 20000);
			void *data = random_array(&r, dt, n);

			want[j] = reference(op, dt, data, n);
			CHECK_EQ(gpured_submit(g, op, dt, data, n, &ids[j]), 0);
			free(data);
		}
		for (int j = 0; j < 4; j++) {
			gpured_value v;
			int rc = gpured_wait_id(g, ids[j], &v);

			check_result("many connections", &want[j], rc, &v, g);
		}
	}
	CHECK_EQ(gpured_ping(g), 0);
	gpured_close(g);
	return NULL;
}

void test_connections(void)
{
	pthread_t t[CONN_THREADS];
	gpured_stats_t st;
	gpured_t *g;

	daemon_start(&the_daemon, NULL);
	for (uintptr_t i = 0; i < CONN_THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, conn_thread, (void *)i) == 0);
	for (int i = 0; i < CONN_THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);

	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_stats(g, &st), 0);
	CHECK_MSG(st.connections_total >= CONN_THREADS + 1, "connections_total %llu",
		  (unsigned long long)st.connections_total);
	CHECK_MSG(st.requests >= CONN_THREADS * CONN_REQUESTS, "requests %llu",
		  (unsigned long long)st.requests);
	gpured_close(g);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}


void test_ctl(void)
{
	char *out = NULL, *err = NULL, path[160], bad[160];
	const char *sock;
	int rc;

	daemon_start(&the_daemon, NULL);
	sock = the_daemon.sock;

	/* --socket, given as a whole argv: the macro needs constants, so
	 * the path goes through $GPURED_SOCKET except where the option
	 * itself is tested. */
	{
		const char *a[] = { "--socket", sock, "ping", NULL };
		free(out);
		free(err);
		out = err = NULL;
		rc = run_ctl(a, "", 0, NULL, &out, &err);
		CHECK_MSG(rc == 0 && strncmp(out, "pong", 4) == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	rc = CTL("", sock, "ping", "--json");
	CHECK_MSG(rc == 0 && strstr(out, "\"pong\""), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "health");
	CHECK_MSG(rc == 0 && strncmp(out, "ok: backend ", 12) == 0 && strstr(out, test_backend()) &&
		  strstr(out, " in service (ping "), "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("", sock, "health", "--json");
	CHECK_MSG(rc == 0 && strncmp(out, "{\"status\":\"ok\",", 15) == 0 && strstr(out, "\"rtt_us\":"),
		  "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "health", "extra");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "info");
	CHECK_MSG(rc == 0 && strstr(out, "version") && strstr(out, test_backend()), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "info", "--json");
	CHECK_MSG(rc == 0 && out[0] == '{' && strstr(out, "\"version\"") && strstr(out, "\"limits\""),
		  "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "stats");
	CHECK_MSG(rc == 0 && strstr(out, "requests") && strstr(out, "uptime_s"), "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "--json", "stats");
	CHECK_MSG(rc == 0 && out[0] == '{' && strstr(out, "\"requests\"") && strstr(out, "\"latency_us\""),
		  "rc %d out '%s'", rc, out);

	rc = CTL("1 2 3\n-4   10\n", sock, "sum", "--dtype", "i64");
	CHECK_MSG(rc == 0 && strcmp(out, "12\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	rc = CTL("5 9 2", sock, "--json", "max", "-t", "u32");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":9,\"count\":3}\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("0.1 0.2", sock, "sum");
	CHECK_MSG(rc == 0 && strtod(out, NULL) == 0.1 + 0.2, "rc %d out '%s'", rc, out);
	rc = CTL("-3 4", sock, "sumsq", "-t", "i32", "-");
	CHECK_MSG(rc == 0 && strcmp(out, "25\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("5 9 2 9 2", sock, "argmax", "-t", "u32");
	CHECK_MSG(rc == 0 && strcmp(out, "9 1\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("5 9 2 9 2", sock, "--json", "argmin", "-t", "i64");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"value\":2,\"index\":2,\"count\":5}\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1.5 -0 0 -0", sock, "argmin");
	CHECK_MSG(rc == 0 && strcmp(out, "-0 1\n") == 0, "rc %d out '%s'", rc, out);
	rc = CTL("", sock, "argmin", "-t", "f32");
	CHECK_MSG(rc != 0 && strstr(err, "empty"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 3 6", sock, "moments", "--dtype", "i32", "--ddof", "1");
	CHECK_MSG(rc == 0 && strcmp(out, "count 4\nsum 12\nmin 1\nmax 6\nmean 3\n"
				 "var 4.666666666666667\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1e15 1e15 -inf", sock, "--json", "moments");
	CHECK_MSG(rc == 0 && strcmp(out, "{\"count\":3,\"sum\":null,\"min\":null,\"max\":1000000000000000,"
				 "\"mean\":null,\"var\":null}\n") == 0,
		  "rc %d out '%s'", rc, out);
	rc = CTL("1 2", sock, "moments", "-d", "2");
	CHECK_MSG(rc != 0 && strstr(err, "ddof"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2", sock, "moments", "--ddof", "-1");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("1 2", sock, "sum", "--ddof", "0");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "moments");
	CHECK_MSG(rc != 0 && strstr(err, "empty"), "rc %d err '%s'", rc, err);

	/* From a file. */
	snprintf(path, sizeof(path), "%s/numbers.txt", the_daemon.dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "0.5 0.25\n0.125\n", 15) == 15);
	close(fd);
	{
		const char *a[] = { "sum", "-t", "f32", path, NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "0.875\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	unlink(path);

	/* Packed binary. */
	float raw[3] = { 1.5f, 2.5f, -0.25f };
	free(out);
	free(err);
	{
		const char *a[] = { "sum", "--raw", "--dtype", "f32", NULL };
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "3.75\n") == 0, "rc %d out '%s' err '%s'", rc, out, err);
	}
	free(out);
	free(err);
	{
		/* through a shared-memory region */
		const char *a[] = { "moments", "--raw", "--dtype", "f32", "--ddof", "2", NULL };
		rc = run_ctl(a, raw, sizeof(raw), sock, &out, &err);
		CHECK_MSG(rc == 0 && strcmp(out, "count 3\nsum 3.75\nmin -0.25\nmax 2.5\n"
					 "mean 1.25\nvar 3.875\n") == 0,
			  "rc %d out '%s' err '%s'", rc, out, err);
	}
	rc = CTL("abcde", sock, "sum", "--raw", "--dtype", "f32");
	CHECK_MSG(rc == 2, "rc %d", rc);

	/* Many numbers, checked against a reference. */
	{
		rng r = { 99 };
		size_t n = 20000, len = 0;
		char *text = malloc(n * 32);
		long double want = 0;

		CHECK(text);
		for (size_t i = 0; i < n; i++) {
			double x = ((double)(rng_next(&r) >> 11) / (double)(1ull << 53) - 0.5) * 100;

			len += (size_t)sprintf(text + len, "%.17g%c", x, i % 10 == 9 ? '\n' : ' ');
			want += (long double)x * x;
		}
		const char *a[] = { "sumsq", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, text, len, sock, &out, &err);
		CHECK_MSG(rc == 0 && fabsl(strtod(out, NULL) - want) <= 1e-10 * want,
			  "rc %d out '%s' want %.17Lg", rc, out, want);
		free(text);
	}

	/* Errors: the server's (exit 1), the input's (exit 2). */
	rc = CTL("", sock, "min");
	CHECK_MSG(rc == 1 && strstr(err, "empty"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 x 4", sock, "sum", "-t", "i32");
	CHECK_MSG(rc == 2 && strstr(err, "'x'") && strstr(err, "3"), "rc %d err '%s'", rc, err);
	rc = CTL("1 2 3000000000", sock, "max", "-t", "i32");
	CHECK_MSG(rc == 2 && strstr(err, "3000000000"), "rc %d err '%s'", rc, err);
	rc = CTL("1.5", sock, "sum", "-t", "u64");
	CHECK_MSG(rc == 2 && strstr(err, "1.5"), "rc %d err '%s'", rc, err);
	rc = CTL("", sock, "sum", "-t", "f12");
	CHECK_MSG(rc == 2 && strstr(err, "unknown dtype 'f12'"), "rc %d err '%s'", rc, err);
	rc = CTL("", sock, "frobnicate");
	CHECK_MSG(rc == 2, "rc %d", rc);
	rc = CTL("", sock, "--help");
	CHECK_MSG(rc == 0 && strstr(out, "Exit status"), "rc %d", rc);
	rc = CTL("", sock, "--version");
	CHECK_MSG(rc == 0 && strstr(out, "gpuredctl"), "rc %d", rc);

	/* Nobody at the socket: exit 3, and the message names the path. */
	snprintf(bad, sizeof(bad), "%s/nobody.sock", the_daemon.dir);
	{
		const char *a[] = { "--socket", bad, "ping", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, sock, &out, &err);
		CHECK_MSG(rc == 3 && strstr(err, bad) && strstr(err, "No such file"), "rc %d err '%s'", rc, err);
	}
	{
		/* Through $GPURED_SOCKET as well. */
		const char *a[] = { "stats", NULL };
		free(out);
		free(err);
		rc = run_ctl(a, "", 0, bad, &out, &err);
		CHECK_MSG(rc == 3 && strstr(err, bad), "rc %d err '%s'", rc, err);
	}
	free(out);
	free(err);
	CHECK_EQ(daemon_stop(&the_daemon), 0);
}

void test_sigterm(void)
{
	rng r = { 4242 };
	size_t n = 8u << 20; /* 64 MiB of f64 */
	void *data = random_array(&r, GPURED_F64, n);
	expect want = reference(GPURED_OP_SUMSQ, GPURED_F64, data, n);
	struct stat stt;
	gpured_value v;
	uint32_t id;
	gpured_t *g;
	int status, rc;

	daemon_start(&the_daemon, NULL);
	g = connect_or_die(&the_daemon);
	CHECK_EQ(gpured_submit(g, GPURED_OP_SUMSQ, GPURED_F64, data, n, &id), 0);
	/* The request is written (the daemon has all but a socket buffer of
	 * it); stop the daemon while it is being reduced. */
	usleep(2000);
	CHECK(kill(the_daemon.pid, SIGTERM) == 0);
	rc = gpured_wait_id(g, id, &v);
	check_result("in flight at SIGTERM", &want, rc, &v, g);
	gpured_close(g);
	free(data);

	uint64_t deadline = now_ms() + 10000;
	while (waitpid(the_daemon.pid, &status, WNOHANG) != the_daemon.pid) {
		if (now_ms() > deadline) {
			daemon_dump_log(&the_daemon);
			CHECK_MSG(false, "daemon did not exit within 10 s of SIGTERM");
		}
		usleep(5000);
	}
	the_daemon.pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		daemon_dump_log(&the_daemon);
	CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon status %d", status);
	CHECK_MSG(stat(the_daemon.sock, &stt) < 0 && errno == ENOENT, "socket file left behind");
}
