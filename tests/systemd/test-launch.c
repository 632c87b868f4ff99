/*
 * launch.h against a hand-made service manager: the LISTEN_* and
 * NOTIFY_SOCKET / WATCHDOG_* variables are set the way systemd sets them,
 * and the descriptors are put at fd 3 the way systemd passes them. Built
 * twice: against launch-systemd.c, and (with GR_LAUNCH_NONE) against
 * launch-none.c, which must ignore all of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/launch.h"
#include "tests/check.h"

#define PASSED_FD 3

static char tmpdir[] = "/tmp/gr-launch-XXXXXX";

static bool fd_is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* Put fd at PASSED_FD and announce n descriptors for pid, as a manager would. */
static void pass_fds(int fd, int n, pid_t pid)
{
	if (fd != PASSED_FD) {
		CHECK(dup2(fd, PASSED_FD) == PASSED_FD);
		close(fd);
	}
	char buf[32];
	snprintf(buf, sizeof(buf), "%d", n);
	CHECK(setenv("LISTEN_FDS", buf, 1) == 0);
	snprintf(buf, sizeof(buf), "%ld", (long)pid);
	CHECK(setenv("LISTEN_PID", buf, 1) == 0);
}

static int unix_socket(int type, const char *name, bool listening)
{
	int fd = socket(AF_UNIX, type, 0);
	CHECK(fd >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", tmpdir, name);
	unlink(sa.sun_path);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	if (listening)
		CHECK(listen(fd, 4) == 0);
	return fd;
}

static int listen_fd(int *ret_fd, char *err, size_t errlen)
{
	err[0] = '\0';
	*ret_fd = -1;
	return launch_listen_fd(ret_fd, err, errlen);
}

static void test_listen(void)
{
	char err[256];
	int fd;

	/* Nothing passed. */
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
	CHECK(listen_fd(&fd, err, sizeof(err)) == 0);

	/* One listening AF_UNIX stream socket: the daemon's normal case. */
	pass_fds(unix_socket(SOCK_STREAM, "ok.sock", true), 1, getpid());
#ifdef GR_LAUNCH_NONE
	CHECK(listen_fd(&fd, err, sizeof(err)) == 0);
	CHECK(fd_is_open(PASSED_FD));
	close(PASSED_FD);
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_PID");
#else
	CHECK(listen_fd(&fd, err, sizeof(err)) == 1);
	CHECK(fd == PASSED_FD);
	CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
	CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	/* The variables are consumed so no child inherits them. */
	CHECK(getenv("LISTEN_FDS") == NULL);
	CHECK(getenv("LISTEN_PID") == NULL);
	/* And the socket really accepts. */
	int c = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/ok.sock", tmpdir);
	CHECK(connect(c, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	int a = accept(fd, NULL, NULL);
	CHECK(a >= 0);
	close(a);
	close(c);
	close(fd);

	/* Meant for another process: not ours, so nothing was passed. */
	pass_fds(unix_socket(SOCK_STREAM, "other.sock", true), 1, getpid() + 1);
	CHECK(listen_fd(&fd, err, sizeof(err)) == 0);
	close(PASSED_FD);

	/* Two sockets: refused, and both closed. */
	pass_fds(unix_socket(SOCK_STREAM, "two-a.sock", true), 2, getpid());
	int s2 = unix_socket(SOCK_STREAM, "two-b.sock", true);
	if (s2 != PASSED_FD + 1) {
		CHECK(dup2(s2, PASSED_FD + 1) == PASSED_FD + 1);
		close(s2);
	}
	CHECK(listen_fd(&fd, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "2 sockets"));
	CHECK(!fd_is_open(PASSED_FD));
	CHECK(!fd_is_open(PASSED_FD + 1));

	/* A stream socket that does not listen (Accept=yes would pass one). */
	pass_fds(unix_socket(SOCK_STREAM, "nolisten.sock", false), 1, getpid());
	CHECK(listen_fd(&fd, err, sizeof(err)) == -EINVAL);
	CHECK(strstr(err, "not listening"));
	CHECK(!fd_is_open(PASSED_FD));

	/* A datagram socket (ListenDatagram=). */
	pass_fds(unix_socket(SOCK_DGRAM, "dgram.sock", false), 1, getpid());
	CHECK(listen_fd(&fd, err, sizeof(err)) == -EPROTOTYPE);
	CHECK(strstr(err, "AF_UNIX stream"));
	CHECK(!fd_is_open(PASSED_FD));

	/* A TCP socket (ListenStream=127.0.0.1:...), where the host allows one. */
	int tcp = socket(AF_INET, SOCK_STREAM, 0);
	if (tcp >= 0) {
		struct sockaddr_in in = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		CHECK(bind(tcp, (struct sockaddr *)&in, sizeof(in)) == 0);
		CHECK(listen(tcp, 4) == 0);
		pass_fds(tcp, 1, getpid());
		CHECK(listen_fd(&fd, err, sizeof(err)) == -EPROTOTYPE);
		CHECK(!fd_is_open(PASSED_FD));
	}

	/* Not a socket at all. */
	int p[2];
	CHECK(pipe(p) == 0);
	close(p[1]);
	pass_fds(p[0], 1, getpid());
	CHECK(listen_fd(&fd, err, sizeof(err)) == -ENOTSOCK);
	CHECK(strstr(err, "not a socket"));
	CHECK(!fd_is_open(PASSED_FD));
#endif
}

static void test_notify(void)
{
	char path[sizeof(tmpdir) + 16];
	snprintf(path, sizeof(path), "%s/notify", tmpdir);
	int fd = unix_socket(SOCK_DGRAM, "notify", false);
	CHECK(setenv("NOTIFY_SOCKET", path, 1) == 0);

	char buf[2048];
	launch_notify("READY=1\nSTATUS=%s, %d connections", "serving", 3);
	ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
#ifdef GR_LAUNCH_NONE
	CHECK(n < 0 && errno == EAGAIN);
#else
	CHECK(n > 0);
	buf[n] = '\0';
	CHECK(strcmp(buf, "READY=1\nSTATUS=serving, 3 connections") == 0);
	/* The variable stays: the daemon notifies for its whole life. */
	CHECK(getenv("NOTIFY_SOCKET") != NULL);
	launch_notify("WATCHDOG=1");
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	CHECK(n == 10 && memcmp(buf, "WATCHDOG=1", 10) == 0);

	/* A long STATUS= is cut, not overflowed. */
	char big[4000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	launch_notify("STATUS=%s", big);
	n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	CHECK(n > 7 && (size_t)n < sizeof(big));
	CHECK(memcmp(buf, "STATUS=x", 8) == 0);
#endif
	close(fd);
	unlink(path);

	/* No manager listening, or none at all: quietly nothing. */
	launch_notify("STOPPING=1");
	unsetenv("NOTIFY_SOCKET");
	launch_notify("STOPPING=1");
}

static void test_watchdog(void)
{
	uint64_t usec = 0;

	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	CHECK(!launch_watchdog_usec(&usec));

	CHECK(setenv("WATCHDOG_USEC", "200000", 1) == 0);
#ifdef GR_LAUNCH_NONE
	CHECK(!launch_watchdog_usec(&usec));
#else
	/* No WATCHDOG_PID: meant for whoever reads it. */
	CHECK(launch_watchdog_usec(&usec));
	CHECK(usec == 200000);

	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", (long)getpid());
	CHECK(setenv("WATCHDOG_PID", buf, 1) == 0);
	usec = 0;
	CHECK(launch_watchdog_usec(&usec));
	CHECK(usec == 200000);

	/* Another process's watchdog is not ours. */
	snprintf(buf, sizeof(buf), "%ld", (long)getpid() + 1);
	CHECK(setenv("WATCHDOG_PID", buf, 1) == 0);
	CHECK(!launch_watchdog_usec(&usec));

	unsetenv("WATCHDOG_PID");
	CHECK(setenv("WATCHDOG_USEC", "soon", 1) == 0);
	CHECK(!launch_watchdog_usec(&usec));
	CHECK(setenv("WATCHDOG_USEC", "0", 1) == 0);
	CHECK(!launch_watchdog_usec(&usec));
#endif
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
}

int main(void)
{
	CHECK(mkdtemp(tmpdir) != NULL);
	test_listen();
	test_notify();
	test_watchdog();

	char cmd[sizeof(tmpdir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	CHECK(system(cmd) == 0);
	return 0;
}
