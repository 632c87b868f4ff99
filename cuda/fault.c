/*
 * Errors and fault injection: the messages that name a failed CUDA call
 * and its device, the faults tests inject, and taking a device out of
 * service.
 *
 * Fault injection (tests): cfg->fault, or else the environment variable
 * GPURED_CUDA_FAULT, holds rules separated by commas:
 *     WHAT[:device=N][:after=K]
 * WHAT is one of init, h2d, launch, d2h, sync (the completion check of a
 * launch, once per launch). d2h is the copy back of several float sums
 * (the batched exact kernel's); every other result the kernels write
 * into mapped host memory themselves. On device N (every device when omitted), the
 * calls of that kind after the first K (0 when omitted) fail as if CUDA
 * had returned an error, e.g. "launch:device=0:after=3" lets three
 * launches on device 0 through and fails the fourth and later ones.
 */
#include <errno.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda-internal.h"
#include "util/log.h"

static const char *const fault_names[FAULT_N] = { "init", "h2d", "launch", "d2h", "sync" };

int cuda_fault_parse(cuda_backend *be, const char *spec, char *errbuf, size_t errlen)
{
	char buf[256];
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(errbuf, errlen, "fault spec too long");
		return -EINVAL;
	}
	strcpy(buf, spec);
	char *save = NULL;
	for (char *rule = strtok_r(buf, ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
		if (be->nfaults == sizeof(be->faults) / sizeof(be->faults[0])) {
			snprintf(errbuf, errlen, "too many fault rules");
			return -EINVAL;
		}
		cuda_fault_rule *f = &be->faults[be->nfaults];
		f->kind = -1;
		f->device = -1;
		f->after = 0;
		char *save2 = NULL;
		char *what = strtok_r(rule, ":", &save2);
		for (int k = 0; what && k < FAULT_N; k++)
			if (!strcmp(what, fault_names[k]))
				f->kind = k;
		if (f->kind < 0) {
			snprintf(errbuf, errlen, "unknown fault kind '%s'", what ? what : "");
			return -EINVAL;
		}
		for (char *kv = strtok_r(NULL, ":", &save2); kv; kv = strtok_r(NULL, ":", &save2)) {
			char *end = NULL;
			if (!strncmp(kv, "device=", 7)) {
				f->device = (int)strtol(kv + 7, &end, 10);
			} else if (!strncmp(kv, "after=", 6)) {
				f->after = strtoul(kv + 6, &end, 10);
			} else {
				snprintf(errbuf, errlen, "unknown fault option '%s'", kv);
				return -EINVAL;
			}
			if (!end || *end) {
				snprintf(errbuf, errlen, "bad number in fault option '%s'", kv);
				return -EINVAL;
			}
		}
		be->nfaults++;
	}
	return 0;
}

/* Count a call of this kind on dev; true when a rule says it must fail. */
bool cuda_fault_hit(cuda_dev *d, int kind)
{
	cuda_backend *be = d->be;
	unsigned long n = __atomic_add_fetch(&d->calls[kind], 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < be->nfaults; i++) {
		const cuda_fault_rule *f = &be->faults[i];
		if (f->kind == kind && (f->device < 0 || f->device == d->ordinal) && n > f->after)
			return true;
	}
	return false;
}

/* Messages are cut to fit their buffers, on purpose. */
void cuda_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

void cuda_errfmt(char *buf, size_t len, cuda_dev *d, const char *call, cudaError_t e,
			bool injected)
{
	cuda_fmt(buf, len, "%s on device %d (%s): %s%s", call, d->ordinal, d->name,
		 cudaGetErrorString(e), injected ? " (injected fault)" : "");
}

/* Take a device out of service (first reason wins) and wake its threads. */
/* Start moving jobs to the mover, unless under way; fb_lock held. */
void cuda_fallback_start(cuda_backend *be)
{
	if (be->moving || !be->mover)
		return;
	__atomic_store_n(&be->moving, true, __ATOMIC_RELEASE);
	__atomic_store_n(&be->pub.ndevices, be->ndev + 1, __ATOMIC_RELEASE);
	log_warning("no CUDA device left in service: reducing on the CPU from now on");
}

void cuda_dev_fail(cuda_dev *d, const char *why)
{
	bool first = false;
	pthread_mutex_lock(&d->lock);
	if (d->healthy) {
		__atomic_store_n(&d->healthy, false, __ATOMIC_RELAXED);
		snprintf(d->health, sizeof(d->health), "%s", why);
		first = true;
	}
	pthread_cond_signal(&d->scond);
	pthread_mutex_unlock(&d->lock);
	if (!first)
		return;
	log_error("CUDA device %d taken out of service: %s", d->ordinal, why);
	/* The last one: the CPU takes over now, not at the next job, so that
	 * stats, info and the watchdog's canaries say so at once. */
	cuda_backend *be = d->be;
	for (unsigned i = 0; i < be->ndev; i++)
		if (__atomic_load_n(&be->devs[i].healthy, __ATOMIC_RELAXED))
			return;
	if (be->mover) {
		pthread_mutex_lock(&be->fb_lock);
		cuda_fallback_start(be);
		pthread_mutex_unlock(&be->fb_lock);
	}
}
