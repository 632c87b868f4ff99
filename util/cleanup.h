/*
 * Scope-bound cleanup: a variable declared _cleanup_(f) has f(&var) run
 * when it goes out of scope, so that error paths free nothing by hand.
 * What is handed on is taken out of the variable first (TAKE_PTR), e.g.
 * `*ret = TAKE_PTR(p); return 0;`.
 */
#pragma once

#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
	free(*(void **)p);
}

/* -1 is no descriptor. */
static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

/* p's value, taken: the variable is left NULL. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _p_ = (p);                                                           \
		(p) = NULL;                                                                        \
		_p_;                                                                               \
	})
