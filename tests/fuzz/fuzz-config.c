/*
 * Fuzz target: the daemon's settings (daemon/config.c), the configuration
 * file and the command line. The input up to its first NUL byte is the
 * file; what follows, split at NUL bytes, is the command line after
 * "gpured --config FILE" (at most 16 arguments; none may name another
 * config file). The file is a memfd, named by its /proc/self/fd path.
 *
 * Checked: a parse that succeeds leaves settings that hold together (a
 * socket path, the checks gr_config_parse() promises); one that fails
 * says why; and nothing leaks either way.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/config.h"
#include "math/reduce.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define MAX_ARGS 16

static int memfd = -1;
static char file_arg[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	memfd = memfd_create("gpured-fuzz-config", MFD_CLOEXEC);
	CHECK(memfd >= 0);
	snprintf(file_arg, sizeof(file_arg), "/proc/self/fd/%d", memfd);
	/* --help and --version print to stdout: not worth reading. */
	CHECK(freopen("/dev/null", "w", stdout));
	return 0;
}

/* getopt keeps where it was inside an argument between calls; a new
 * command line starts it over (glibc: optind = 0). */
static void getopt_reset(void)
{
	static char prog[] = "gpured";
	char *argv[] = { prog, NULL };

	optind = 0;
	(void)getopt_long(1, argv, "", NULL, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char prog[] = "gpured", opt_config[] = "--config";
	const uint8_t *nul = memchr(data, '\0', size);
	size_t file_len = nul ? (size_t)(nul - data) : size;
	char *argv[3 + MAX_ARGS + 1] = { prog, opt_config, file_arg };
	char *args = NULL, errbuf[512] = "";
	int argc = 3, r;
	gr_config c;

	CHECK(ftruncate(memfd, 0) == 0);
	CHECK(pwrite(memfd, data, file_len, 0) == (ssize_t)file_len);

	if (nul) {
		size_t n = size - file_len - 1;

		/* NUL-terminated copies, each exactly as long as it is. */
		args = malloc(n + 1);
		CHECK(args);
		memcpy(args, nul + 1, n);
		args[n] = '\0';
		for (size_t i = 0; i <= n && argc < 3 + MAX_ARGS;) {
			/* Another --config (or an abbreviation) would read
			 * any file at all, /dev/zero or a terminal included. */
			if (strncmp(args + i, "--co", 4) == 0) {
				free(args);
				return 0;
			}
			argv[argc++] = args + i;
			i += strlen(args + i) + 1;
		}
	}
	argv[argc] = NULL;

	getopt_reset();
	gr_config_init(&c);
	r = gr_config_parse(&c, argc, argv, errbuf, sizeof(errbuf));
	if (r == 0) {
		CHECK(c.socket_path && c.socket_path[0]);
		CHECK(c.max_connections > 0 && c.max_request_bytes > 0);
		CHECK(c.chunk_bytes % GR_REDUCE_ALIGN_BYTES == 0);
		CHECK(c.socket_mode <= 0777);
		CHECK(c.request_chunks >= 1 && c.request_chunks <= 4);
		CHECK(c.config_path && strcmp(c.config_path, file_arg) == 0);
	} else if (r < 0) {
		CHECK_MSG(errbuf[0] || r == -ENOMEM, "failed (%d) without a message", r);
	} else {
		CHECK(r == 1);
	}
	gr_config_deinit(&c);
	free(args);
	return 0;
}
