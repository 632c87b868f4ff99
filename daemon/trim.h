/*
 * Memory given back after a burst. Each connection holds buffers of its
 * own (64 KiB to read into, its replies), which the allocator keeps in its
 * heap once they are freed: after hundreds of connections come and go, a
 * user's burst would leave the daemon that much larger for good. Once the
 * connections open have fallen well below their peak, the free memory is
 * handed back to the kernel (malloc_trim), at most every few seconds.
 */
#pragma once

#include <stdint.h>

typedef struct gr_server gr_server;

/* From the periodic sweep (daemon/timeouts.c), with the time now. */
void gr_trim_sweep(gr_server *s, uint64_t now_ns);
