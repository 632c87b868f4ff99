/*
 * The harness of the client tests against the real daemon
 * (daemon-harness.h).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/narrow-formats.h"
#include "tests/client/daemon-harness.h"

/* The backend under test: the CPU unless $GPURED_TEST_BACKEND says
 * otherwise (the GPU host runs these tests with "cuda"). */
const char *test_backend(void)
{
	const char *b = getenv("GPURED_TEST_BACKEND");
	return b && *b ? b : "cpu";
}

static const char *gpured_path;
static const char *gpuredctl_path;

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
static const char *tmp_base(void)
{
	const char *t = getenv("TMPDIR");

	return t && t[0] == '/' && strlen(t) <= 40 ? t : "/tmp";
}

/* ---- the daemon ------------------------------------------------------ */

daemon_proc the_daemon;

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static char *slurp(const char *path, size_t *ret_len)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(buf);
	if (fd >= 0) {
		for (;;) {
			ssize_t k;

			if (len == cap) {
				cap *= 2;
				buf = realloc(buf, cap + 1);
				CHECK(buf);
			}
			k = read(fd, buf + len, cap - len);
			if (k <= 0)
				break;
			len += (size_t)k;
		}
		close(fd);
	}
	buf[len] = '\0';
	if (ret_len)
		*ret_len = len;
	return buf;
}

void daemon_dump_log(const daemon_proc *d)
{
	char *log = slurp(d->log, NULL);

	fprintf(stderr, "--- daemon stderr ---\n%s--- end ---\n", log);
	free(log);
}

/* Start gpured on a fresh socket with extra arguments; wait until it
 * accepts connections. */
void daemon_start(daemon_proc *d, const char *const *extra)
{
	const char *argv[24];
	int n = 0;
	uint64_t deadline;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "%s/gpured-test-XXXXXX", tmp_base());
	CHECK(mkdtemp(d->dir));
	snprintf(d->sock, sizeof(d->sock), "%s/gpured.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/stderr.log", d->dir);

	argv[n++] = gpured_path;
	argv[n++] = "--socket";
	argv[n++] = d->sock;
	argv[n++] = "--backend";
	argv[n++] = test_backend();
	for (int i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;

	d->pid = fork();
	CHECK(d->pid >= 0);
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd < 0 || dup2(fd, 2) < 0)
			_exit(127);
		/* Not started by systemd, whatever the test runner's
		 * environment says. */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		unsetenv("WATCHDOG_USEC");
		execv(gpured_path, (char *const *)argv);
		_exit(127);
	}

	deadline = now_ms() + 10000;
	for (;;) {
		gpured_t *g = NULL;
		int status;

		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon exited before accepting (status %d)", status);
		}
		if (access(d->sock, F_OK) == 0 && gpured_connect(d->sock, &g) == 0) {
			gpured_close(g);
			break;
		}
		if (now_ms() > deadline) {
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon did not accept on %s within 10 s", d->sock);
		}
		usleep(10000);
	}
	char *log = slurp(d->log, NULL);
	if (!strstr(log, "listening on")) {
		fprintf(stderr, "--- daemon stderr ---\n%s--- end ---\n", log);
		CHECK_MSG(false, "daemon accepts but did not say \"listening on\"");
	}
	free(log);
}

/* SIGTERM and wait up to 10 s; returns the wait status. */
int daemon_stop(daemon_proc *d)
{
	uint64_t deadline = now_ms() + 10000;
	int status = 0;

	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGTERM);
	for (;;) {
		pid_t p = waitpid(d->pid, &status, WNOHANG);

		if (p == d->pid)
			break;
		if (now_ms() > deadline) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
			daemon_dump_log(d);
			CHECK_MSG(false, "daemon did not exit within 10 s of SIGTERM");
		}
		usleep(5000);
	}
	d->pid = 0;
	return status;
}

static void daemon_cleanup(daemon_proc *d)
{
	char p[128];

	if (d->pid > 0) {
		kill(d->pid, SIGKILL);
		waitpid(d->pid, NULL, 0);
		d->pid = 0;
	}
	unlink(d->sock);
	unlink(d->log);
	snprintf(p, sizeof(p), "%s/input", d->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/out", d->dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/err", d->dir);
	unlink(p);
	rmdir(d->dir);
}

/* A failing check exits; take the daemon down with the test. */
static void at_exit_cleanup(void)
{
	daemon_cleanup(&the_daemon);
}

gpured_t *connect_or_die(const daemon_proc *d)
{
	gpured_t *g = NULL;
	int r = gpured_connect(d->sock, &g);

	CHECK_MSG(r == 0, "connect %s: %s", d->sock, gpured_strerror(r));
	return g;
}

/* ---- data -------------------------------------------------------------- */

uint64_t rng_next(rng *r)
{
	/* xorshift64* */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 2685821657736338717ull;
}

void *random_array(rng *r, gpured_dtype dt, size_t n)
{
	size_t esz = gpured_dtype_size(dt);
	uint8_t *p = malloc(n ? n * esz : 1);

	CHECK(p);
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(r);

		switch (dt) {
		case GPURED_I32: { int32_t v = (int32_t)(uint32_t)x; memcpy(p + i * esz, &v, esz); break; }
		/* 64-bit values kept below 2^40 so that sums of millions
		 * cannot overflow and the reference stays exact. */
		case GPURED_I64: { int64_t v = (int64_t)(x >> 23) - ((int64_t)1 << 40); memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U32: { uint32_t v = (uint32_t)x; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_U64: { uint64_t v = x >> 24; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F32: { float v = (float)((double)(int64_t)(x >> 11) / (double)(1ull << 52) - 1.0) * 1000.0f; memcpy(p + i * esz, &v, esz); break; }
		case GPURED_F64: { double v = ((double)(x >> 11) / (double)(1ull << 52) - 1.0) * 1e3; memcpy(p + i * esz, &v, esz); break; }
		/* The narrow dtypes: any bits (of a finite value, for floats),
		 * little-endian. */
		case GPURED_F16:
		case GPURED_BF16:
		case GPURED_F8E4M3:
		case GPURED_F8E5M2:
		case GPURED_I8:
		case GPURED_U8:
		case GPURED_I16:
		case GPURED_U16: {
			const test_format *f = test_format_named(gpured_dtype_name(dt));

			while (f && test_decode(f, (uint32_t)x & ((1u << (8 * esz)) - 1)).cls != TEST_FINITE)
				x = rng_next(r);
			memcpy(p + i * esz, &x, esz);
			break;
		}
		}
	}
	return p;
}

/* ---- gpuredctl ---------------------------------------------------------- */

/* Run gpuredctl with args, stdin from in[0..in_len); returns the exit
 * status and the output (freed by the caller). */
int run_ctl(const char *const *args, const void *in, size_t in_len, const char *env_socket,
	    char **ret_out, char **ret_err)
{
	char inpath[128], outpath[128], errpath[128];
	const char *argv[16];
	int n = 0, status, fd;
	pid_t pid;

	snprintf(inpath, sizeof(inpath), "%s/input", the_daemon.dir);
	snprintf(outpath, sizeof(outpath), "%s/out", the_daemon.dir);
	snprintf(errpath, sizeof(errpath), "%s/err", the_daemon.dir);
	fd = open(inpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, in, in_len) == (ssize_t)in_len);
	close(fd);

	argv[n++] = gpuredctl_path;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;

	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		int i0 = open(inpath, O_RDONLY), o = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (i0 < 0 || o < 0 || e < 0 || dup2(i0, 0) < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		if (env_socket)
			setenv("GPURED_SOCKET", env_socket, 1);
		else
			unsetenv("GPURED_SOCKET");
		execv(gpuredctl_path, (char *const *)argv);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK_MSG(WIFEXITED(status), "gpuredctl died (status %d)", status);
	*ret_out = slurp(outpath, NULL);
	*ret_err = slurp(errpath, NULL);
	return WEXITSTATUS(status);
}

/* ---- main ------------------------------------------------------------- */

int daemon_harness_main(int argc, char **argv, const daemon_scenario *scenarios, size_t n)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s SCENARIO GPURED GPUREDCTL\n", argv[0]);
		return 2;
	}
	gpured_path = argv[2];
	gpuredctl_path = argv[3];
	/* Default SIGPIPE: the library must never raise it, and the
	 * programs started here inherit the disposition. */
	signal(SIGPIPE, SIG_DFL);
	atexit(at_exit_cleanup);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			scenarios[i].fn();
			return 0;
		}
	}
	fprintf(stderr, "unknown scenario %s\n", argv[1]);
	return 2;
}
