/*
 * The daemon's only contact with the service manager. With systemd support
 * compiled in (launch-systemd.c) these talk to systemd; without it
 * (launch-none.c) they report "not under systemd". Nothing outside the
 * daemon's start-up and shutdown code calls them.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A listening socket passed by socket activation: 1 and *ret_fd when one
 * AF_UNIX stream socket was passed; 0 when none was; a negative errno (and
 * a reason in errbuf) when what was passed cannot be used.
 */
int launch_listen_fd(int *ret_fd, char *errbuf, size_t errlen);

/* Send a notification ("READY=1\nSTATUS=..."); a no-op when not under systemd. */
void launch_notify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The watchdog interval asked for by the service manager, if any. */
bool launch_watchdog_usec(uint64_t *ret_usec);
