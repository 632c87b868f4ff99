/*
 * gpuredctl: talk to the gpured daemon from the command line. A thin main
 * over libgpured: parse arguments, read the input, make one call, print.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/ctl-cumsum.h"
#include "client/ctl-input.h"
#include "client/ctl-progress.h"
#include "client/ctl-segments.h"
#include "client/ctl-top.h"
#include "client/gpured.h"

enum {
	EXIT_SERVER = 1,
	EXIT_USAGE = 2,
	EXIT_CONNECT = 3,
	EXIT_UNHEALTHY = 4,
};

static const char *prog = "gpuredctl";

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [OPTIONS] COMMAND [ARGS]\n"
		"\n"
		"Talk to the gpured reduction daemon.\n"
		"\n"
		"Commands:\n"
		"  ping                     Check that the daemon answers\n"
		"  health                   Check that it answers and that its devices are\n"
		"                           in service (exit 4 when any is not)\n"
		"  info                     Show the daemon's version, backend, devices and limits\n"
		"  stats                    Show the daemon's counters\n"
		"  metrics                  Print the counters, devices and latency histogram as\n"
		"                           Prometheus metrics (text format 0.0.4)\n"
		"  top                      Show requests/s, GB/s in, latency p50/p99, jobs per\n"
		"                           device and mapped regions, refreshed every interval\n"
		"  sum|min|max|sumsq|argmin|argmax|moments [FILE|-]\n"
		"                           Reduce the numbers in FILE (default: standard input);\n"
		"                           argmin and argmax print the value and its index,\n"
		"                           moments the count, sum, min, max, mean and variance\n"
		"  cumsum [FILE|-]          Print the prefix sums of the numbers in FILE, one a\n"
		"                           line (int64, uint64 or float64, as sum types them)\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH        Daemon socket (default: $GPURED_SOCKET, else\n"
		"                           /run/gpured.sock for root, else\n"
		"                           $XDG_RUNTIME_DIR/gpured.sock)\n"
		"  -t, --dtype TYPE         Element type: i32 i64 u32 u64 f32 f64 (default f64)\n"
		"  -r, --raw                Input is packed little-endian binary elements,\n"
		"                           not whitespace-separated text\n"
		"  -j, --json               Print JSON (top: one line per refresh; cumsum: one\n"
		"                           object with every value)\n"
		"  -q, --quiet              Reductions: no progress bar on standard error\n"
		"  -d, --ddof N             moments: the variance divides by count - N (default 0)\n"
		"      --rows N             Reduce each row of N elements (the last may be\n"
		"                           shorter): one result per line\n"
		"      --offsets FILE       Reduce each segment that FILE's offsets delimit\n"
		"                           (k + 1 little-endian u64 element offsets, 0 first,\n"
		"                           the number of elements last): one result per line\n"
		"  -i, --interval SECONDS   top: refresh this often (default 1)\n"
		"  -n, --iterations N       top: stop after N refreshes (default: until Ctrl-C)\n"
		"  -o, --output FILE        metrics: replace FILE at once (a temporary file\n"
		"                           renamed over it), not standard output\n"
		"  -T, --timeout SECONDS    Give up when the daemon makes no progress for this\n"
		"                           long (default: wait)\n"
		"  -h, --help               Show this help\n"
		"  -V, --version            Show the version\n"
		"\n"
		"Text input is numbers separated by white space; every token must be a\n"
		"number of the element type (integers in decimal, in range).\n"
		"Integer results print exactly; float results print with 17 significant\n"
		"digits. While a reduction reads a large input, a progress bar shows on\n"
		"standard error when that is a terminal.\n"
		"\n"
		"Exit status:\n"
		"  0  success\n"
		"  1  the daemon answered with an error, or the connection broke\n"
		"  2  usage error or invalid input\n"
		"  3  cannot connect to the daemon\n"
		"  4  health: the daemon answers, but a device is out of service\n",
		prog);
}

static int connect_or_complain(const char *socket, double timeout_s, gpured_t **ret)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int r;

	r = gpured_socket_path(socket, path, sizeof(path));
	if (r < 0) {
		fprintf(stderr, "%s: socket path too long: %s\n", prog, socket ? socket : "(default)");
		return EXIT_USAGE;
	}
	r = gpured_connect(path, ret);
	if (r < 0) {
		fprintf(stderr, "%s: cannot connect to %s: %s\n", prog, path, strerror(-r));
		return EXIT_CONNECT;
	}
	if (timeout_s > 0)
		gpured_set_timeout(*ret, (int)(timeout_s * 1000 + 0.5));
	return 0;
}

static int server_error(gpured_t *g, const char *what, int r)
{
	const char *code = gpured_errcode(g);

	if (code)
		fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, gpured_errmsg(g), code);
	else
		fprintf(stderr, "%s: %s: %s\n", prog, what, gpured_errmsg(g)[0] ?
			gpured_errmsg(g) : gpured_strerror(r));
	return EXIT_SERVER;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmd_ping(gpured_t *g, bool json)
{
	double t0 = now_us(), rtt;
	int r;

	r = gpured_ping(g);
	if (r < 0)
		return server_error(g, "ping", r);
	rtt = now_us() - t0;
	if (json)
		printf("{\"result\":\"pong\",\"rtt_us\":%.1f}\n", rtt);
	else
		printf("pong (%.0f us)\n", rtt);
	return 0;
}

/*
 * ok: every device in service; degraded: some are, and the daemon serves
 * on those; failed: none is, and reductions fail.
 */
static int cmd_health(gpured_t *g, bool json)
{
	double t0 = now_us(), rtt;
	gpured_stats_t st;
	const char *state;
	int r;

	r = gpured_ping(g);
	if (r < 0)
		return server_error(g, "ping", r);
	rtt = now_us() - t0;
	r = gpured_stats(g, &st);
	if (r < 0)
		return server_error(g, "stats", r);
	if (st.devices > 0 && st.devices_healthy == st.devices)
		state = "ok";
	else if (st.devices_healthy > 0)
		state = "degraded";
	else
		state = "failed";
	/* the backend name goes into JSON: keep it to plain characters */
	for (char *p = st.backend; *p; p++)
		if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20)
			*p = '?';
	if (json)
		printf("{\"status\":\"%s\",\"backend\":\"%s\",\"devices\":%llu,"
		       "\"devices_healthy\":%llu,\"rtt_us\":%.1f}\n",
		       state, st.backend, (unsigned long long)st.devices,
		       (unsigned long long)st.devices_healthy, rtt);
	else
		printf("%s: backend %s, %llu of %llu device%s in service (ping %.0f us)%s\n", state,
		       st.backend[0] ? st.backend : "?", (unsigned long long)st.devices_healthy,
		       (unsigned long long)st.devices, st.devices == 1 ? "" : "s", rtt,
		       strcmp(state, "ok") ? "; 'gpuredctl info' says why" : "");
	return strcmp(state, "ok") ? EXIT_UNHEALTHY : 0;
}

static int cmd_show(gpured_t *g, const char *what, bool json)
{
	gpured_format fmt = json ? GPURED_FORMAT_JSON_PRETTY : GPURED_FORMAT_TEXT;
	char *s = NULL;
	int r;

	if (strcmp(what, "info") == 0)
		r = gpured_info_format(g, fmt, &s);
	else
		r = gpured_stats_format(g, fmt, &s);
	if (r < 0)
		return server_error(g, what, r);
	fputs(s, stdout);
	free(s);
	return 0;
}

/*
 * Write s to path whole or not at all: a temporary file beside it, then
 * renamed over it, so a reader (node_exporter's textfile collector) never
 * sees half of it. The file gets mode 0644: metrics are for others to read.
 */
static int write_atomically(const char *path, const char *s)
{
	size_t n = strlen(path), len = strlen(s);
	char *tmp = malloc(n + 16);
	int fd, r = 0;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, n + 16, "%s.tmpXXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0) {
		r = -errno;
		free(tmp);
		return r;
	}
	for (size_t off = 0; off < len && r == 0;) {
		ssize_t k = write(fd, s + off, len - off);
		if (k < 0 && errno != EINTR)
			r = -errno;
		else if (k > 0)
			off += (size_t)k;
	}
	if (r == 0 && fchmod(fd, 0644) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	free(tmp);
	return r;
}

static int cmd_metrics(gpured_t *g, const char *output)
{
	char *s = NULL;
	int r = gpured_metrics_format(g, &s);

	if (r < 0)
		return server_error(g, "metrics", r);
	if (output) {
		r = write_atomically(output, s);
		if (r < 0)
			fprintf(stderr, "%s: cannot write %s: %s\n", prog, output, strerror(-r));
	} else {
		fputs(s, stdout);
		if (fflush(stdout) != 0)
			r = -errno;
	}
	free(s);
	return r < 0 ? EXIT_SERVER : 0;
}

/*
 * top until its iterations are done (0), the daemon goes away (1), or a
 * signal stops it: then the program ends by that signal, as a shell
 * expects of a program it interrupted.
 */
static int cmd_top(gpured_t *g, const char *socket, ctl_top_options *o, bool json)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int sig = 0, r;

	if (gpured_socket_path(socket, path, sizeof(path)) == 0)
		o->where = path;
	o->json = json;
	r = ctl_top_run(g, o, stdout, &sig);
	if (r == CTL_TOP_WRITE_FAILED) {
		fprintf(stderr, "%s: top: cannot write to standard output\n", prog);
		return EXIT_SERVER;
	}
	if (r < 0 && r != -ENOMEM && !gpured_errcode(g)) {
		/* not an answer: the connection is gone */
		fprintf(stderr, "%s: top: lost the daemon: %s\n", prog,
			gpured_errmsg(g)[0] ? gpured_errmsg(g) : gpured_strerror(r));
		return EXIT_SERVER;
	}
	if (r < 0)
		return server_error(g, "top", r);
	if (sig) {
		fflush(stdout);
		signal(sig, SIG_DFL);
		raise(sig);
	}
	return 0;
}

/* The elements to reduce, from file (NULL or "-": stdin). */
static int read_input(const char *file, gpured_dtype dt, bool raw, bool quiet, void **ret_data,
		      size_t *ret_n)
{
	ctl_progress progress;
	uint64_t size;
	const char *name = file && strcmp(file, "-") != 0 ? file : NULL;
	size_t esz = gpured_dtype_size(dt), len = 0;
	ctl_input_error e;
	char *text = NULL;
	int fd = 0, r;

	if (name) {
		fd = open(name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "%s: cannot open %s: %s\n", prog, name, strerror(errno));
			return EXIT_USAGE;
		}
	}
	size = ctl_input_remaining(fd);
	/* none while someone types the numbers on the same terminal */
	ctl_progress_init(&progress, STDERR_FILENO, !quiet && !isatty(fd),
			  name ? name : "standard input", size);
	r = ctl_input_read_all(fd, size, &progress, &text, &len);
	ctl_progress_finish(&progress);
	if (name)
		close(fd);
	if (r < 0) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, name ? name : "standard input",
			strerror(-r));
		return EXIT_USAGE;
	}
	if (!name)
		name = "stdin";

	if (raw) {
		if (len % esz != 0) {
			fprintf(stderr, "%s: %s: %zu bytes is not a whole number of %s elements (%zu bytes each)\n",
				prog, name, len, gpured_dtype_name(dt), esz);
			free(text);
			return EXIT_USAGE;
		}
		*ret_data = text;
		*ret_n = len / esz;
		return 0;
	}

	r = ctl_input_parse_text(text, len, dt, ret_data, ret_n, &e);
	free(text);
	if (r == -ENOMEM) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_USAGE;
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s:%zu:%zu: element %zu: '%s' is %s %s\n", prog, name, e.line,
			e.column, e.index + 1, e.token,
			r == -ERANGE ? "out of range for" : "not a number of type",
			gpured_dtype_name(dt));
		return EXIT_USAGE;
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
	size_t bytes = n * gpured_dtype_size(dt);
	gpured_region_t *rg;
	int r = gpured_region_new(g, bytes, &rg);

	if (r < 0)
		return r;
	memcpy(gpured_region_data(rg), data, bytes);
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
	char why[160], *bytes = NULL;
	size_t len = 0;
	int fd, r;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", prog, file, strerror(errno));
		return EXIT_USAGE;
	}
	r = ctl_input_read_all(fd, ctl_input_remaining(fd), NULL, &bytes, &len);
	close(fd);
	if (r == 0)
		r = ctl_segments_parse(bytes, len, n, ret, ret_nseg, why, sizeof(why));
	free(bytes);
	if (r == -EINVAL)
		fprintf(stderr, "%s: offsets %s: %s\n", prog, file, why);
	else if (r < 0)
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, file, strerror(-r));
	return r < 0 ? EXIT_USAGE : 0;
}

/* One result per segment, one a line. */
static int cmd_reduce_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data,
			       size_t n, const uint64_t *offsets, size_t nseg, uint64_t ddof,
			       bool raw, bool json)
{
	void *records;
	int r;

	if (nseg == 0)
		return 0; /* rows of no elements: none */
	r = ctl_segments_reduce(g, op, dt, data, n, offsets, nseg, ddof, raw, &records);
	if (r < 0)
		return server_error(g, gpured_op_name(op), r);
	ctl_segments_print(stdout, op, dt, offsets, nseg, records, json);
	free(records);
	return 0;
}

/* The prefix sums, one a line (or one JSON object). */
static int cmd_cumsum(gpured_t *g, gpured_dtype dt, const void *data, size_t n, bool raw,
		      bool json)
{
	void *values;
	int r = ctl_cumsum_compute(g, dt, data, n, raw, &values);

	if (r < 0)
		return server_error(g, "cumsum", r);
	r = ctl_cumsum_print(stdout, dt, values, n, json);
	free(values);
	if (r < 0) {
		fprintf(stderr, "%s: cumsum: cannot write to standard output\n", prog);
		return EXIT_SERVER;
	}
	return 0;
}

static int cmd_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		      uint64_t ddof, bool raw, bool json)
{
	gpured_moments m;
	gpured_value v;
	char buf[64];
	int r = -ENOSYS;

	if (raw && n > 0) {
		r = reduce_in_region(g, op, dt, data, n, ddof, &v, &m);
		if (r == -ENODATA)
			return server_error(g, gpured_op_name(op), r);
	}
	if ((r == -ENOSYS || r == -EINVAL || r == -E2BIG) && op == GPURED_OP_MOMENTS)
		r = gpured_reduce_moments(g, dt, data, n, ddof, &m);
	else if (r == -ENOSYS || r == -EINVAL || r == -E2BIG)
		r = gpured_reduce(g, op, dt, data, n, &v);
	if (r < 0)
		return server_error(g, gpured_op_name(op), r);
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

int main(int argc, char **argv)
{
	enum { OPT_ROWS = 256, OPT_OFFSETS };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "dtype", required_argument, NULL, 't' },
		{ "raw", no_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "ddof", required_argument, NULL, 'd' },
		{ "rows", required_argument, NULL, OPT_ROWS },
		{ "offsets", required_argument, NULL, OPT_OFFSETS },
		{ "interval", required_argument, NULL, 'i' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	const char *socket = NULL, *cmd, *file = NULL, *output = NULL, *offsets_file = NULL;
	gpured_dtype dt = GPURED_F64;
	bool json = false, raw = false, have_dtype = false, quiet = false, have_top_opt = false;
	bool have_ddof = false, cumsum;
	uint64_t ddof = 0, rows = 0, *offsets = NULL;
	size_t nseg = 0;
	ctl_top_options top = { .interval_s = 1 };
	double timeout_s = 0;
	void *data = NULL;
	size_t n = 0;
	gpured_op op;
	gpured_t *g = NULL;
	int c, r;

	while ((c = getopt_long(argc, argv, "s:t:rjo:T:qd:i:n:hV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket = optarg;
			break;
		case 't':
			if (gpured_dtype_parse(optarg, &dt) < 0) {
				fprintf(stderr, "%s: unknown dtype '%s' (i32 i64 u32 u64 f32 f64)\n", prog, optarg);
				return EXIT_USAGE;
			}
			have_dtype = true;
			break;
		case 'r':
			raw = true;
			break;
		case 'j':
			json = true;
			break;
		case 'o':
			output = optarg;
			break;
		case 'T': {
			char *end;

			errno = 0;
			timeout_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(timeout_s >= 0) || timeout_s > 2e6) {
				fprintf(stderr, "%s: invalid timeout '%s'\n", prog, optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case 'q':
			quiet = true;
			break;
		case 'd': {
			char *end;

			errno = 0;
			ddof = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || !isdigit((unsigned char)optarg[0])) {
				fprintf(stderr, "%s: invalid ddof '%s' (a non-negative integer)\n", prog,
					optarg);
				return EXIT_USAGE;
			}
			have_ddof = true;
			break;
		}
		case OPT_ROWS: {
			char *end;

			errno = 0;
			rows = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || !isdigit((unsigned char)optarg[0]) ||
			    rows == 0) {
				fprintf(stderr, "%s: invalid row length '%s' (a positive integer)\n",
					prog, optarg);
				return EXIT_USAGE;
			}
			break;
		}
		case OPT_OFFSETS:
			offsets_file = optarg;
			break;
		case 'i': {
			char *end;

			errno = 0;
			top.interval_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(top.interval_s >= 0.01) ||
			    top.interval_s > 86400) {
				fprintf(stderr, "%s: invalid interval '%s' (0.01 to 86400 seconds)\n", prog,
					optarg);
				return EXIT_USAGE;
			}
			have_top_opt = true;
			break;
		}
		case 'n': {
			char *end;

			errno = 0;
			top.iterations = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || top.iterations == 0) {
				fprintf(stderr, "%s: invalid number of iterations '%s'\n", prog, optarg);
				return EXIT_USAGE;
			}
			have_top_opt = true;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("gpuredctl %s\n", GPURED_PROJECT_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try '%s --help'.\n", prog);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "%s: no command given\nTry '%s --help'.\n", prog, prog);
		return EXIT_USAGE;
	}
	cmd = argv[optind++];
	cumsum = strcmp(cmd, "cumsum") == 0;
	if (have_top_opt && strcmp(cmd, "top") != 0) {
		fprintf(stderr, "%s: --interval and --iterations apply to top only\n", prog);
		return EXIT_USAGE;
	}

	if (have_ddof && strcmp(cmd, "moments") != 0) {
		fprintf(stderr, "%s: --ddof applies to moments only\n", prog);
		return EXIT_USAGE;
	}
	if ((rows || offsets_file) && cumsum) {
		fprintf(stderr, "%s: --rows and --offsets do not apply to cumsum\n", prog);
		return EXIT_USAGE;
	}
	if ((rows || offsets_file) && gpured_op_parse(cmd, &op) < 0) {
		fprintf(stderr, "%s: --rows and --offsets apply to reductions only\n", prog);
		return EXIT_USAGE;
	}
	if (rows && offsets_file) {
		fprintf(stderr, "%s: --rows and --offsets exclude each other\n", prog);
		return EXIT_USAGE;
	}
	if (cumsum || gpured_op_parse(cmd, &op) == 0) {
		if (optind < argc)
			file = argv[optind++];
		if (optind < argc) {
			fprintf(stderr, "%s: %s takes at most one FILE\n", prog, cmd);
			return EXIT_USAGE;
		}
		/* Read before connecting: a bad input should not need a
		 * daemon to be reported. */
		r = read_input(file, dt, raw, quiet, &data, &n);
		if (r == 0 && offsets_file)
			r = read_offsets(offsets_file, n, &offsets, &nseg);
		else if (r == 0 && rows && ctl_segments_rows(n, rows, &offsets, &nseg) < 0) {
			fprintf(stderr, "%s: out of memory\n", prog);
			r = EXIT_USAGE;
		}
		if (r) {
			free(data);
			return r;
		}
		r = connect_or_complain(socket, timeout_s, &g);
		if (r == 0 && cumsum)
			r = cmd_cumsum(g, dt, data, n, raw, json);
		else if (r == 0 && (rows || offsets_file))
			r = cmd_reduce_segments(g, op, dt, data, n, offsets, nseg, ddof, raw, json);
		else if (r == 0)
			r = cmd_reduce(g, op, dt, data, n, ddof, raw, json);
		free(offsets);
		free(data);
		gpured_close(g);
		return r;
	}

	if (strcmp(cmd, "ping") != 0 && strcmp(cmd, "health") != 0 && strcmp(cmd, "info") != 0 &&
	    strcmp(cmd, "stats") != 0 && strcmp(cmd, "metrics") != 0 && strcmp(cmd, "top") != 0) {
		fprintf(stderr, "%s: unknown command '%s'\nTry '%s --help'.\n", prog, cmd, prog);
		return EXIT_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "%s: %s takes no arguments\n", prog, cmd);
		return EXIT_USAGE;
	}
	if (have_dtype || raw) {
		fprintf(stderr, "%s: --dtype and --raw apply to reductions only\n", prog);
		return EXIT_USAGE;
	}
	if (output && strcmp(cmd, "metrics") != 0) {
		fprintf(stderr, "%s: --output applies to metrics only\n", prog);
		return EXIT_USAGE;
	}
	if (json && strcmp(cmd, "metrics") == 0) {
		fprintf(stderr, "%s: metrics has one format; --json does not apply\n", prog);
		return EXIT_USAGE;
	}
	r = connect_or_complain(socket, timeout_s, &g);
	if (r)
		return r;
	if (strcmp(cmd, "ping") == 0)
		r = cmd_ping(g, json);
	else if (strcmp(cmd, "health") == 0)
		r = cmd_health(g, json);
	else if (strcmp(cmd, "metrics") == 0)
		r = cmd_metrics(g, output);
	else if (strcmp(cmd, "top") == 0)
		r = cmd_top(g, socket, &top, json);
	else
		r = cmd_show(g, cmd, json);
	gpured_close(g);
	return r;
}
