/*
 * What gpuredctl's commands share: the command line's parts they are
 * given, and the message of a call that failed.
 */
#include <stdio.h>
#include <stdlib.h>

#include "client/ctl-command.h"
#include "client/gpured.h"

const char ctl_prog[] = "gpuredctl";

void ctl_args_deinit(ctl_args *a)
{
	free(a->data);
	free(a->offsets);
}

int ctl_server_error(gpured_t *g, const char *what, int r)
{
	const char *code = gpured_errcode(g);

	if (code)
		fprintf(stderr, "%s: %s: %s (%s)\n", ctl_prog, what, gpured_errmsg(g), code);
	else
		fprintf(stderr, "%s: %s: %s\n", ctl_prog, what, gpured_errmsg(g)[0] ?
			gpured_errmsg(g) : gpured_strerror(r));
	return CTL_EXIT_SERVER;
}
