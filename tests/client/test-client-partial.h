/*
 * What test-client-partial's two files share: its temporary folder's
 * parent, the comparison of results, and the daemon part
 * (client-partial-daemon.c).
 */
#pragma once

#include <stdbool.h>

/* $TMPDIR where it is short enough for a socket path, else /tmp. */
const char *tmp_base(void);

/* The same double, or both NaN. */
bool same(double a, double b);

/* The daemon part: adversarial arrays through the daemon at gpured. */
void test_daemon(const char *gpured);
