/*
 * Reduces to one value (reduce.c), by data or by region: the kind of
 * request that reads a reduce's result, which partial-request.c and
 * moments.c build on, and the requests' sending.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/conn.h"

/* A reduce's result read into e->value, and moments' whole into
 * e->moments (the value is their sum). */
extern const client_kind client_kind_reduce;

/* client_kind_reduce's read(), for kinds that read more besides. */
int client_reduce_read(pending *e, const gr_obj *result, const uint8_t *msg, size_t len, char *why,
		       size_t size);

/* v as the API's value, of count elements. */
gpured_value client_value_of(const gr_value *v, uint64_t count);

/*
 * Send a reduce of data[0..n) of dt, its reply read by kind; partial
 * asks for "partial": true, ddof is moments' (moments only). 0 and
 * *ret_id, or a negative errno.
 */
int client_reduce_submit_data(gpured_t *g, const client_kind *kind, gpured_op op, gpured_dtype dt,
			      const void *data, size_t n, bool partial, uint64_t ddof,
			      uint32_t *ret_id);
/* The same of n elements at offset in a region. */
int client_reduce_submit_region(gpured_t *g, const client_kind *kind, uint64_t region,
				gpured_op op, gpured_dtype dt, size_t offset, size_t n, bool partial,
				uint64_t ddof, uint32_t *ret_id);
