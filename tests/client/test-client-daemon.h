/*
 * What test-client-daemon's two files share: the reference each result
 * is checked against, and the scenarios of client-daemon-clients.c.
 */
#pragma once

#include <stddef.h>

#include "client/gpured.h"

typedef struct expect {
	int err; /* 0 or the error the daemon must answer */
	gpured_value v;
	double tol; /* allowed |got - want| for float results */
} expect;

/* The answer the daemon must give for op over n elements of dt at data. */
expect reference(gpured_op op, gpured_dtype dt, const void *data, size_t n);

/* A reply (r from the call, *v its value) against e; what names it. */
void check_result(const char *what, const expect *e, int r, const gpured_value *v, gpured_t *g);

/* Reduce on g and check the reply against reference(). */
void reduce_and_check(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n);

/* The scenarios of client-daemon-clients.c. */
void test_spin(void);
void test_connections(void);
void test_ctl(void);
void test_sigterm(void);
