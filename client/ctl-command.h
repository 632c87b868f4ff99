/*
 * What gpuredctl's commands share (ctl-command.c): the command line as
 * each is given it, the statuses they end with, and how they tell of a
 * call that failed.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/ctl-top.h"
#include "client/gpured.h"

/* Exit statuses (gpuredctl(1), EXIT STATUS). */
enum {
	CTL_EXIT_SERVER = 1,    /* the daemon answered with an error, or the connection broke */
	CTL_EXIT_USAGE = 2,     /* usage error or invalid input */
	CTL_EXIT_CONNECT = 3,   /* cannot connect to the daemon */
	CTL_EXIT_UNHEALTHY = 4, /* health: a device is out of service */
};

/* The program's name, before each message. */
extern const char ctl_prog[];

/* The command line: the options, and the command's name and arguments. */
typedef struct ctl_args {
	const char *socket, *output, *offsets_file;
	gpured_dtype dt;
	bool json, raw, quiet, have_dtype, have_ddof, have_top_opt;
	uint64_t ddof, rows;
	ctl_top_options top;
	double timeout_s;
	const char *cmd;
	char **argv; /* its arguments, argc of them */
	int argc;
	/* Read before connecting, for the commands that take input. */
	void *data;
	size_t n;
	uint64_t *offsets;
	size_t nseg;
} ctl_args;

/* Free what the command read (its data and offsets). */
void ctl_args_deinit(ctl_args *a);

/* Report call what's failure r on standard error, with the server's
 * message and code; returns CTL_EXIT_SERVER. */
int ctl_server_error(gpured_t *g, const char *what, int r);
