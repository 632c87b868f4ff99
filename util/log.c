#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "util/log.h"

int gr_log_max_level = LOG_INFO;
static bool log_to_journal;

/* $JOURNAL_STREAM is "dev:ino" of the stream systemd gave us; it only
 * counts while stderr is still that stream. */
void gr_log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long dev, ino;

	log_to_journal = js && sscanf(js, "%lu:%lu", &dev, &ino) == 2 && fstat(2, &st) == 0 &&
			 st.st_dev == dev && st.st_ino == ino;
}

void gr_log(int level, const char *fmt, ...)
{
	static const char *const names[] = {
		"emergency", "alert", "critical", "error", "warning", "notice", "info", "debug",
	};
	char line[1024];
	va_list ap;

	if (level > gr_log_max_level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_to_journal)
		fprintf(stderr, "<%d>%s\n", level, line);
	else if (level <= LOG_WARNING)
		fprintf(stderr, "gpured: %s: %s\n", names[level & 7], line);
	else
		fprintf(stderr, "gpured: %s\n", line);
}
