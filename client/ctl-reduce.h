/*
 * gpuredctl's commands that read numbers (ctl-reduce.c): the reductions,
 * one result or one a segment, and cumsum.
 */
#pragma once

#include "client/ctl-command.h"
#include "client/gpured.h"

/*
 * The numbers of the command's [FILE|-] into a->data, and its segments
 * (--rows, --offsets) into a->offsets. Read before connecting: a bad
 * input should not need a daemon to be reported. 0, or the exit status.
 */
int ctl_reduce_input(ctl_args *a);
/* The reduction a->cmd names, printed: 0 or the exit status. */
int ctl_reduce_cmd(gpured_t *g, ctl_args *a);
/* The prefix sums, printed: 0 or the exit status. */
int ctl_reduce_cmd_cumsum(gpured_t *g, ctl_args *a);
