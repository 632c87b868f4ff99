#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/pressure.h"

int gr_pressure_parse(const char *text, uint64_t *ret_total_us)
{
	/* "some avg10=0.36 avg60=1.01 avg300=10.91 total=23889726502\n" */
	if (strncmp(text, "some ", 5) != 0)
		return -EINVAL;
	const char *eol = strchr(text, '\n');
	const char *t = strstr(text, " total=");
	if (!t || (eol && t > eol))
		return -EINVAL;
	t += strlen(" total=");
	char *end;
	errno = 0;
	unsigned long long v = strtoull(t, &end, 10);
	if (errno || end == t || (*end && *end != '\n' && *end != ' '))
		return -EINVAL;
	*ret_total_us = v;
	return 0;
}

static int pressure_read(gr_pressure *p, uint64_t *ret_total_us)
{
	char buf[256];
	ssize_t n = pread(p->fd, buf, sizeof(buf) - 1, 0);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	p->samples++;
	return gr_pressure_parse(buf, ret_total_us);
}

int gr_pressure_init(gr_pressure *p, const char *path, unsigned threshold_pct)
{
	uint64_t total;
	int r;

	*p = (gr_pressure){ .fd = -1, .threshold_pct = threshold_pct };
	if (threshold_pct == 0)
		return 0;
	if ((p->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	/* A kernel built with pressure information but booted without it
	 * (psi=0) has the file, and fails its reads. */
	if ((r = pressure_read(p, &total)) < 0) {
		close(p->fd);
		p->fd = -1;
		return r;
	}
	return 0;
}

void gr_pressure_deinit(gr_pressure *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

bool gr_pressure_short(gr_pressure *p, uint64_t now_ns)
{
	const uint64_t ms = 1000000;
	uint64_t total;

	if (p->threshold_pct == 0)
		return true;
	if (p->fd < 0)
		return false;
	if (p->last_ns && now_ns - p->last_ns < GR_PRESSURE_SAMPLE_MS * ms)
		return p->have && p->share * 100.0 >= p->threshold_pct;
	if (pressure_read(p, &total) < 0) {
		/* what could be read once and not now will not come back */
		gr_pressure_deinit(p);
		return false;
	}
	uint64_t dt = now_ns - p->last_ns;
	if (!p->last_ns || dt >= GR_PRESSURE_STALE_MS * ms || total < p->last_total_us) {
		p->have = false;
	} else {
		double inst = (double)(total - p->last_total_us) * 1e3 / (double)dt;
		double w = (double)dt / (double)(GR_PRESSURE_WINDOW_MS * ms);
		if (inst > 1.0)
			inst = 1.0;
		/* an average whose weights fade over the window */
		p->share = p->have && w < 1.0 ? p->share + (inst - p->share) * w : inst;
		p->have = true;
	}
	p->last_ns = now_ns;
	p->last_total_us = total;
	return p->have && p->share * 100.0 >= p->threshold_pct;
}
