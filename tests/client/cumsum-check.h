/*
 * What test-client-cumsum's scenarios share (test-client-cumsum.c, and
 * the scripted server's and gpuredctl's in cumsum-wire-ctl.c): the daemon
 * (daemon-harness.h), random elements and the reference the prefix sums
 * are checked against.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/gpured.h"

#define N_ALL_DTYPES 6
extern const gpured_dtype all_dtypes[N_ALL_DTYPES];

/* $TMPDIR when a socket path under it fits in a sockaddr_un, else /tmp. */
const char *tmp_base(void);
bool contains(const char *s, const char *part);

/* the daemon of the scenario, and a client of it */
void start(void);
void stop(void);
gpured_t *open_client(void);

/* n random elements of dt (small: integers from -100 to 100, 0 to 200
 * unsigned, for floats sums a double holds exactly) */
void *random_elements(gpured_dtype dt, size_t n, bool small);
long double element(gpured_dtype dt, const void *data, size_t i);
/* An integer element as the 64 bits it adds to a sum. */
uint64_t element_bits(gpured_dtype dt, const void *data, size_t i);
/* values (8 bytes each) against the prefix sums of data: integers
 * exactly, floats within 1e-12 of the running sum of magnitudes */
void check_values(const char *what, gpured_dtype dt, const void *data, size_t n,
		  const void *values);
/* room for n results */
void *values_buffer(size_t n);
/* A writable region of bytes, filled with fill. */
gpured_region_t *writable(gpured_t *g, size_t bytes, int fill);

/* cumsum-wire-ctl.c's scenarios: malformed replies end the connection;
 * gpuredctl cumsum */
void test_wire(void);
void test_ctl(void);
