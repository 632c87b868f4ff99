/*
 * gpured-sockbw: the bandwidth of a Unix stream socket between two
 * processes on this machine, the ceiling for how fast any client can hand
 * a large array to the daemon. A child process writes the bytes in large
 * writes, the parent reads them in large reads and times it.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/gpured.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool parse_size(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'M')
		v <<= 20, end++;
	else if (*end == 'G')
		v <<= 30, end++;
	if (errno || *end || v == 0)
		return false;
	*ret = v;
	return true;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: gpured-sockbw [OPTIONS]\n"
		"\n"
		"Measure the bandwidth of a Unix stream socket between two processes.\n"
		"\n"
		"  -b, --bytes N        Bytes to send (default 4G; k, M, G suffixes)\n"
		"  -C, --chunk N        Bytes per write and per read (default 1M)\n"
		"      --ring N         Read into successive parts of an N-byte buffer, as a\n"
		"                       daemon staging payloads does (default: one chunk,\n"
		"                       reused, so it stays in the CPU's caches)\n"
		"      --sndbuf N       SO_SNDBUF of the writing end (default: what libgpured\n"
		"                       asks for, 4M; 'system': leave the system's default)\n"
		"      --rcvbuf N       SO_RCVBUF of the reading end (default: the system's)\n"
		"      --json           Print JSON\n"
		"  -h, --help           Show this help\n");
}

/* The child: write total bytes in chunk-sized writes. */
static int writer(int fd, uint64_t total, size_t chunk)
{
	uint8_t *buf = malloc(chunk);

	if (!buf)
		return 1;
	/* Touch the pages so the first writes do not measure page faults. */
	memset(buf, 0x5a, chunk);
	while (total > 0) {
		size_t n = total < chunk ? (size_t)total : chunk;
		ssize_t k = send(fd, buf, n, MSG_NOSIGNAL);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		total -= (uint64_t)k;
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	enum { OPT_JSON = 256, OPT_SNDBUF, OPT_RCVBUF, OPT_RING };
	static const struct option opts[] = {
		{ "bytes", required_argument, NULL, 'b' },
		{ "chunk", required_argument, NULL, 'C' },
		{ "sndbuf", required_argument, NULL, OPT_SNDBUF },
		{ "rcvbuf", required_argument, NULL, OPT_RCVBUF },
		{ "ring", required_argument, NULL, OPT_RING },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t total = 4ull << 30, chunk = 1 << 20, sndbuf = GPURED_SNDBUF_BYTES, rcvbuf = 0;
	uint64_t ring = 0, at = 0;
	uint64_t got = 0, t0 = 0, t1;
	bool json = false;
	int sv[2], c, status;
	uint8_t *buf;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "b:C:h", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (!parse_size(optarg, &total))
				goto bad;
			break;
		case 'C':
			if (!parse_size(optarg, &chunk) || chunk > (1u << 30))
				goto bad;
			break;
		case OPT_SNDBUF:
			if (strcmp(optarg, "system") == 0)
				sndbuf = 0;
			else if (!parse_size(optarg, &sndbuf) || sndbuf > INT32_MAX)
				goto bad;
			break;
		case OPT_RCVBUF:
			if (!parse_size(optarg, &rcvbuf) || rcvbuf > INT32_MAX)
				goto bad;
			break;
		case OPT_RING:
			if (!parse_size(optarg, &ring) || ring > (64ull << 30))
				goto bad;
			break;
		case OPT_JSON:
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "Try 'gpured-sockbw --help'.\n");
			return 2;
		}
	}

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		fprintf(stderr, "gpured-sockbw: socketpair: %s\n", strerror(errno));
		return 1;
	}
	/* sv[1] writes (the client's side), sv[0] reads (the daemon's). */
	if (sndbuf) {
		int v = (int)sndbuf;

		setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	}
	/* what the kernel granted (it reports twice the bytes it was asked
	 * for, its bookkeeping included) */
	int granted = 0;
	socklen_t glen = sizeof(granted);
	getsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &granted, &glen);
	if (rcvbuf) {
		int v = (int)rcvbuf;

		setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	}
	if (ring < chunk)
		ring = chunk;
	buf = malloc(ring);
	if (!buf) {
		fprintf(stderr, "gpured-sockbw: out of memory\n");
		return 1;
	}
	memset(buf, 0, ring); /* every page of it mapped before the clock starts */

	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "gpured-sockbw: fork: %s\n", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(writer(sv[1], total, (size_t)chunk));
	}
	close(sv[1]);

	while (got < total) {
		/* a read never crosses the ring's end */
		size_t want = ring - at < chunk ? (size_t)(ring - at) : (size_t)chunk;
		ssize_t k = recv(sv[0], buf + at, want, 0);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "gpured-sockbw: recv: %s\n", strerror(errno));
			break;
		}
		if (k == 0)
			break;
		/* The clock starts at the first byte: fork and the child's
		 * set-up are not the socket's time. */
		if (got == 0)
			t0 = now_ns();
		got += (uint64_t)k;
		at = ring > chunk ? (at + (uint64_t)k) % ring : 0;
	}
	t1 = now_ns();
	close(sv[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
	    got != total) {
		fprintf(stderr, "gpured-sockbw: transfer failed after %llu of %llu bytes\n",
			(unsigned long long)got, (unsigned long long)total);
		return 1;
	}

	double secs = (double)(t1 - t0) / 1e9;
	double gbps = secs > 0 ? (double)got / secs / 1e9 : 0;

	if (json)
		printf("{\"bytes\":%llu,\"chunk\":%llu,\"ring\":%llu,\"sndbuf\":%llu,"
		       "\"sndbuf_granted\":%d,\"rcvbuf\":%llu,\"seconds\":%.6f,\"gb_per_s\":%.3f}\n",
		       (unsigned long long)got, (unsigned long long)chunk, (unsigned long long)ring,
		       (unsigned long long)sndbuf, granted, (unsigned long long)rcvbuf, secs, gbps);
	else
		printf("%llu bytes in %llu-byte chunks into a %llu-byte buffer, send buffer %d: "
		       "%.3f s, %.3f GB/s\n",
		       (unsigned long long)got, (unsigned long long)chunk, (unsigned long long)ring,
		       granted, secs, gbps);
	free(buf);
	return 0;

bad:
	fprintf(stderr, "gpured-sockbw: invalid value for option: '%s'\n", optarg);
	return 2;
}
