/*
 * gpuredctl's commands that read numbers: the input, read whole from a
 * file or standard input (with a progress bar) and parsed; the
 * reductions, through a shared-memory region when the input is raw, one
 * result or one a segment; and the prefix sums.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/ctl-command.h"
#include "client/ctl-cumsum.h"
#include "client/ctl-input.h"
#include "client/ctl-progress.h"
#include "client/ctl-reduce.h"
#include "client/ctl-segments.h"
#include "client/gpured.h"
#include "util/cleanup.h"

/* The elements to reduce, from file (NULL or "-": stdin). */
static int read_input(const char *file, gpured_dtype dt, bool raw, bool quiet, void **ret_data,
		      size_t *ret_n)
{
	ctl_progress progress;
	uint64_t size;
	const char *name = file && strcmp(file, "-") != 0 ? file : NULL;
	size_t esz = gpured_dtype_size(dt), len = 0;
	ctl_input_error e;
	_cleanup_(freep) char *text = NULL;
	_cleanup_(closep) int file_fd = -1;
	int fd = 0, r;

	if (name) {
		fd = file_fd = open(name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "%s: cannot open %s: %s\n", ctl_prog, name, strerror(errno));
			return CTL_EXIT_USAGE;
		}
	}
	size = ctl_input_remaining(fd);
	/* none while someone types the numbers on the same terminal */
	ctl_progress_init(&progress, STDERR_FILENO, !quiet && !isatty(fd),
			  name ? name : "standard input", size);
	r = ctl_input_read_all(fd, size, &progress, &text, &len);
	ctl_progress_finish(&progress);
	if (r < 0) {
		fprintf(stderr, "%s: cannot read %s: %s\n", ctl_prog, name ? name : "standard input",
			strerror(-r));
		return CTL_EXIT_USAGE;
	}
	if (!name)
		name = "stdin";

	if (raw) {
		if (len % esz != 0) {
			fprintf(stderr, "%s: %s: %zu bytes is not a whole number of %s elements (%zu bytes each)\n",
				ctl_prog, name, len, gpured_dtype_name(dt), esz);
			return CTL_EXIT_USAGE;
		}
		*ret_data = TAKE_PTR(text);
		*ret_n = len / esz;
		return 0;
	}

	r = ctl_input_parse_text(text, len, dt, ret_data, ret_n, &e);
	if (r == -ENOMEM) {
		fprintf(stderr, "%s: out of memory\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s:%zu:%zu: element %zu: '%s' is %s %s\n", ctl_prog, name, e.line,
			e.column, e.index + 1, e.token,
			r == -ERANGE ? "out of range for" : "not a number of type",
			gpured_dtype_name(dt));
		return CTL_EXIT_USAGE;
	}
	return 0;
}

/*
 * Reduce packed elements through a shared-memory region: the daemon reads
 * them in place rather than over the socket. -ENOSYS (a daemon without
 * regions) or a region the daemon will not map (-EINVAL, -E2BIG: over
 * its limits) leaves the caller to send them instead.
 */
static int reduce_in_region(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data,
			    size_t n, uint64_t ddof, gpured_value *ret, gpured_moments *ret_m)
{
	gpured_region_t *rg;
	int r = ctl_input_region(g, data, n * gpured_dtype_size(dt), &rg);

	if (r < 0)
		return r;
	if (op == GPURED_OP_MOMENTS)
		r = gpured_region_reduce_moments(g, rg, dt, 0, n, ddof, ret_m);
	else
		r = gpured_region_reduce(g, rg, op, dt, 0, n, ret);
	int f = gpured_region_free(g, rg);
	return r < 0 ? r : f < 0 ? f : 0;
}

/* moments' six numbers, one "name value" a line, or one JSON object. */
static void print_moments(const gpured_moments *m, bool json)
{
	char sum[64], mn[64], mx[64], mean[64], var[64];
	gpured_value f = { .kind = GPURED_KIND_F64 };

	ctl_input_format_value(&m->sum, json, sum, sizeof(sum));
	ctl_input_format_value(&m->min, json, mn, sizeof(mn));
	ctl_input_format_value(&m->max, json, mx, sizeof(mx));
	f.v.f = m->mean;
	ctl_input_format_value(&f, json, mean, sizeof(mean));
	f.v.f = m->var;
	ctl_input_format_value(&f, json, var, sizeof(var));
	if (json)
		printf("{\"count\":%llu,\"sum\":%s,\"min\":%s,\"max\":%s,\"mean\":%s,\"var\":%s}\n",
		       (unsigned long long)m->count, sum, mn, mx, mean, var);
	else
		printf("count %llu\nsum %s\nmin %s\nmax %s\nmean %s\nvar %s\n",
		       (unsigned long long)m->count, sum, mn, mx, mean, var);
}

/* The offsets of --offsets FILE, for n elements. */
static int read_offsets(const char *file, size_t n, uint64_t **ret, size_t *ret_nseg)
{
	_cleanup_(freep) char *bytes = NULL;
	_cleanup_(closep) int fd = -1;
	char why[160];
	size_t len = 0;
	int r;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", ctl_prog, file, strerror(errno));
		return CTL_EXIT_USAGE;
	}
	r = ctl_input_read_all(fd, ctl_input_remaining(fd), NULL, &bytes, &len);
	if (r == 0)
		r = ctl_segments_parse(bytes, len, n, ret, ret_nseg, why, sizeof(why));
	if (r == -EINVAL)
		fprintf(stderr, "%s: offsets %s: %s\n", ctl_prog, file, why);
	else if (r < 0)
		fprintf(stderr, "%s: cannot read %s: %s\n", ctl_prog, file, strerror(-r));
	return r < 0 ? CTL_EXIT_USAGE : 0;
}

/* One result per segment, one a line. */
static int reduce_segments(gpured_t *g, ctl_args *a, gpured_op op)
{
	_cleanup_(freep) void *records = NULL;
	int r;

	if (a->nseg == 0)
		return 0; /* rows of no elements: none */
	r = ctl_segments_reduce(g, op, a->dt, a->data, a->n, a->offsets, a->nseg, a->ddof, a->raw,
				&records);
	if (r < 0)
		return ctl_server_error(g, gpured_op_name(op), r);
	ctl_segments_print(stdout, op, a->dt, a->offsets, a->nseg, records, a->json);
	return 0;
}

/* The prefix sums, one a line (or one JSON object). */
int ctl_reduce_cmd_cumsum(gpured_t *g, ctl_args *a)
{
	_cleanup_(freep) void *values = NULL;
	int r = ctl_cumsum_compute(g, a->dt, a->data, a->n, a->raw, &values);

	if (r < 0)
		return ctl_server_error(g, "cumsum", r);
	r = ctl_cumsum_print(stdout, a->dt, values, a->n, a->json);
	if (r < 0) {
		fprintf(stderr, "%s: cumsum: cannot write to standard output\n", ctl_prog);
		return CTL_EXIT_SERVER;
	}
	return 0;
}

/* The reduction that the command names: one result, or one a segment. */
int ctl_reduce_cmd(gpured_t *g, ctl_args *a)
{
	const gpured_dtype dt = a->dt;
	const void *data = a->data;
	const size_t n = a->n;
	const bool json = a->json;
	gpured_moments m;
	gpured_value v;
	gpured_op op;
	char buf[64];
	int r = -ENOSYS;

	if (gpured_op_parse(a->cmd, &op) < 0)
		return CTL_EXIT_USAGE; /* not reachable: the table names ops only */
	if (a->rows || a->offsets_file)
		return reduce_segments(g, a, op);
	if (a->raw && n > 0) {
		r = reduce_in_region(g, op, dt, data, n, a->ddof, &v, &m);
		if (r == -ENODATA)
			return ctl_server_error(g, gpured_op_name(op), r);
	}
	if ((r == -ENOSYS || r == -EINVAL || r == -E2BIG) && op == GPURED_OP_MOMENTS)
		r = gpured_reduce_moments(g, dt, data, n, a->ddof, &m);
	else if (r == -ENOSYS || r == -EINVAL || r == -E2BIG)
		r = gpured_reduce(g, op, dt, data, n, &v);
	if (r < 0)
		return ctl_server_error(g, gpured_op_name(op), r);
	if (op == GPURED_OP_MOMENTS) {
		print_moments(&m, json);
		return 0;
	}
	ctl_input_format_value(&v, json, buf, sizeof(buf));
	bool has_index = op == GPURED_OP_ARGMIN || op == GPURED_OP_ARGMAX;
	if (json && has_index)
		printf("{\"value\":%s,\"index\":%llu,\"count\":%llu}\n", buf,
		       (unsigned long long)v.index, (unsigned long long)v.count);
	else if (json)
		printf("{\"value\":%s,\"count\":%llu}\n", buf, (unsigned long long)v.count);
	else if (has_index)
		printf("%s %llu\n", buf, (unsigned long long)v.index);
	else
		printf("%s\n", buf);
	return 0;
}


int ctl_reduce_input(ctl_args *a)
{
	const char *file = NULL;
	int r;

	if (a->argc > 0)
		file = a->argv[0];
	if (a->argc > 1) {
		fprintf(stderr, "%s: %s takes at most one FILE\n", ctl_prog, a->cmd);
		return CTL_EXIT_USAGE;
	}
	r = read_input(file, a->dt, a->raw, a->quiet, &a->data, &a->n);
	if (r == 0 && a->offsets_file)
		r = read_offsets(a->offsets_file, a->n, &a->offsets, &a->nseg);
	else if (r == 0 && a->rows && ctl_segments_rows(a->n, a->rows, &a->offsets, &a->nseg) < 0) {
		fprintf(stderr, "%s: out of memory\n", ctl_prog);
		r = CTL_EXIT_USAGE;
	}
	return r;
}
