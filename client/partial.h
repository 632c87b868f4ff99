/*
 * Exact partials as values (partial.c): gpured_partial beside
 * math/fsum.h's partial, which the wire carries.
 */
#pragma once

#include <stdbool.h>

#include "client/gpured.h"
#include "math/fsum.h"

/* Whether op and dt have exact partials: sum and sumsq of a float dtype
 * (f64, f32, and the narrow floats, whose sums are their f32 widenings'). */
bool client_partial_kind(gpured_op op, gpured_dtype dt);
/* x as the partial of op and dt. */
void client_partial_from_exact(const gr_fsum *x, gpured_op op, gpured_dtype dt,
			       gpured_partial *ret);
