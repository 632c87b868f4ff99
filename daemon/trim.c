#include <malloc.h>

#include "daemon/server.h"
#include "daemon/trim.h"

/* Trim once this many fewer connections are open than at the peak... */
#define TRIM_CONNS 64u
/* ... and at most this often. */
#define TRIM_EVERY_NS (10ull * 1000000000ull)

void gr_trim_sweep(gr_server *s, uint64_t now_ns)
{
	if (s->nconns > s->trim_peak)
		s->trim_peak = s->nconns;
	if (s->trim_peak < s->nconns + TRIM_CONNS || now_ns - s->trim_ns < TRIM_EVERY_NS)
		return;
	malloc_trim(0);
	s->trim_ns = now_ns;
	s->trim_peak = s->nconns;
}
