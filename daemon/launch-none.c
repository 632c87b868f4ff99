/*
 * launch.h for builds without libsystemd: never socket-activated, nothing
 * to notify, no watchdog. The daemon then binds its own socket.
 */
#include "daemon/launch.h"

int launch_listen_fd(int *ret_fd, char *errbuf, size_t errlen)
{
	(void)ret_fd;
	(void)errbuf;
	(void)errlen;
	return 0;
}

void launch_notify(const char *fmt, ...)
{
	(void)fmt;
}

bool launch_watchdog_usec(uint64_t *ret_usec)
{
	(void)ret_usec;
	return false;
}
