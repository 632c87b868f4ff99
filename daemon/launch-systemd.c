/*
 * launch.h on top of libsystemd: socket activation, sd_notify and the
 * watchdog interval. Everything systemd-specific in the daemon is here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "daemon/launch.h"

/* Close every passed descriptor so a refused hand-over leaks nothing. */
static void launch_close_passed(int n)
{
	for (int i = 0; i < n; i++)
		close(SD_LISTEN_FDS_START + i);
}

static int launch_set_flags(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	int fdfl = fcntl(fd, F_GETFD);
	if (fdfl < 0 || fcntl(fd, F_SETFD, fdfl | FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

int launch_listen_fd(int *ret_fd, char *errbuf, size_t errlen)
{
	/*
	 * unset_environment=1: the LISTEN_* variables describe this process
	 * only; a child (none today) must not believe it was passed them.
	 */
	int n = sd_listen_fds(1);
	if (n < 0) {
		snprintf(errbuf, errlen, "cannot read the passed sockets (LISTEN_FDS): %s",
			 strerror(-n));
		return n;
	}
	if (n == 0)
		return 0;
	if (n > 1) {
		snprintf(errbuf, errlen,
			 "%d sockets were passed, expected exactly one "
			 "(one ListenStream= in the socket unit)",
			 n);
		launch_close_passed(n);
		return -EINVAL;
	}

	int fd = SD_LISTEN_FDS_START;
	int r = sd_is_socket(fd, AF_UNSPEC, 0, -1);
	if (r == 0) {
		snprintf(errbuf, errlen, "passed descriptor %d is not a socket", fd);
		launch_close_passed(n);
		return -ENOTSOCK;
	}
	if (r > 0)
		r = sd_is_socket_unix(fd, SOCK_STREAM, -1, NULL, 0);
	if (r == 0) {
		snprintf(errbuf, errlen,
			 "passed socket %d is not an AF_UNIX stream socket "
			 "(use ListenStream= with a path)",
			 fd);
		launch_close_passed(n);
		return -EPROTOTYPE;
	}
	if (r > 0)
		r = sd_is_socket_unix(fd, SOCK_STREAM, /* listening= */ 1, NULL, 0);
	if (r == 0) {
		snprintf(errbuf, errlen,
			 "passed socket %d is not listening (the socket unit needs Accept=no)", fd);
		launch_close_passed(n);
		return -EINVAL;
	}
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot inspect passed socket %d: %s", fd, strerror(-r));
		launch_close_passed(n);
		return r;
	}

	r = launch_set_flags(fd);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot make passed socket %d non-blocking: %s", fd,
			 strerror(-r));
		launch_close_passed(n);
		return r;
	}
	*ret_fd = fd;
	return 1;
}

void launch_notify(const char *fmt, ...)
{
	/* STATUS= is one line; 1 KiB leaves room for it and a few assignments. */
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	int len = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	/*
	 * unset_environment=0: notifications are sent for the whole life of
	 * the daemon (STATUS=, WATCHDOG=1, STOPPING=1). A failure to reach
	 * the manager is not the daemon's to act on.
	 */
	(void)sd_notify(0, msg);
}

bool launch_watchdog_usec(uint64_t *ret_usec)
{
	uint64_t usec = 0;

	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return false;
	*ret_usec = usec;
	return true;
}
