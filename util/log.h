/*
 * Logging to stderr with levels. Under systemd (stderr connected to the
 * journal) each line carries a "<N>" priority prefix that journald reads;
 * elsewhere lines read "gpured: warning: ...".
 */
#pragma once

#include <syslog.h>

/* Messages above this level (LOG_ERR..LOG_DEBUG) are dropped. */
extern int gr_log_max_level;

void gr_log_init(void);
void gr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) gr_log(LOG_ERR, __VA_ARGS__)
#define log_warning(...) gr_log(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) gr_log(LOG_NOTICE, __VA_ARGS__)
#define log_info(...) gr_log(LOG_INFO, __VA_ARGS__)
#define log_debug(...) gr_log(LOG_DEBUG, __VA_ARGS__)
