/*
 * Exact partials as values (partial.c): gpured_partial beside
 * math/fsum.h's partial, which the wire carries.
 */
#pragma once

#include <stdbool.h>

#include "client/gpured.h"
#include "math/fsum.h"

/* Whether op and dt have exact partials: sum and sumsq of f32 and f64. */
bool client_partial_kind(gpured_op op, gpured_dtype dt);
/* x as the partial of op and dt. */
void client_partial_from_exact(const gr_fsum *x, gpured_op op, gpured_dtype dt,
			       gpured_partial *ret);
