/*
 * gpuredctl: talk to the gpured daemon from the command line. A thin main
 * over libgpured: parse arguments, read the input, make one call, print.
 * The commands are a table (commands[]): a command is a row, its names,
 * the options it takes and its lines in --help, and its function; the
 * ones that read numbers are ctl-reduce.c's.
 */
#include <ctype.h>
#include <errno.h>
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

#include "client/ctl-command.h"
#include "client/ctl-reduce.h"
#include "client/ctl-top.h"
#include "client/gpured.h"
#include "util/cleanup.h"

static const char usage_tail[] =
	"\n"
	"Options:\n"
	"  -s, --socket PATH        Daemon socket (default: $GPURED_SOCKET, else\n"
	"                           /run/gpured.sock for root, else\n"
	"                           $XDG_RUNTIME_DIR/gpured.sock)\n"
	"  -t, --dtype TYPE         Element type: i8 i16 i32 i64 u8 u16 u32 u64 f8e4m3\n"
	"                           f8e5m2 f16 bf16 f32 f64 (default f64)\n"
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
	"number of the element type: integers in decimal, in range; floats are\n"
	"rounded to the type (to nearest, ties to even), and a finite number past\n"
	"its largest value is out of range.\n"
	"Integer results print exactly; float results print with 17 significant\n"
	"digits. While a reduction reads a large input, a progress bar shows on\n"
	"standard error when that is a terminal.\n"
	"\n"
	"Exit status:\n"
	"  0  success\n"
	"  1  the daemon answered with an error, or the connection broke\n"
	"  2  usage error or invalid input\n"
	"  3  cannot connect to the daemon\n"
	"  4  health: the daemon answers, but a device is out of service\n";

static int connect_or_complain(const char *socket, double timeout_s, gpured_t **ret)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int r;

	r = gpured_socket_path(socket, path, sizeof(path));
	if (r < 0) {
		fprintf(stderr, "%s: socket path too long: %s\n", ctl_prog, socket ? socket : "(default)");
		return CTL_EXIT_USAGE;
	}
	r = gpured_connect(path, ret);
	if (r < 0) {
		fprintf(stderr, "%s: cannot connect to %s: %s\n", ctl_prog, path, strerror(-r));
		return CTL_EXIT_CONNECT;
	}
	if (timeout_s > 0)
		gpured_set_timeout(*ret, (int)(timeout_s * 1000 + 0.5));
	return 0;
}

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmd_ping(gpured_t *g, ctl_args *a)
{
	const bool json = a->json;
	double t0 = now_us(), rtt;
	int r;

	r = gpured_ping(g);
	if (r < 0)
		return ctl_server_error(g, "ping", r);
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
static int cmd_health(gpured_t *g, ctl_args *a)
{
	const bool json = a->json;
	double t0 = now_us(), rtt;
	gpured_stats_t st;
	const char *state;
	int r;

	r = gpured_ping(g);
	if (r < 0)
		return ctl_server_error(g, "ping", r);
	rtt = now_us() - t0;
	r = gpured_stats(g, &st);
	if (r < 0)
		return ctl_server_error(g, "stats", r);
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
	return strcmp(state, "ok") ? CTL_EXIT_UNHEALTHY : 0;
}

/* info or stats, by fn: JSON, or a readable table. */
static int show(gpured_t *g, ctl_args *a, int (*fn)(gpured_t *, gpured_format, char **))
{
	gpured_format fmt = a->json ? GPURED_FORMAT_JSON_PRETTY : GPURED_FORMAT_TEXT;
	_cleanup_(freep) char *s = NULL;
	int r;

	r = fn(g, fmt, &s);
	if (r < 0)
		return ctl_server_error(g, a->cmd, r);
	fputs(s, stdout);
	return 0;
}

static int cmd_info(gpured_t *g, ctl_args *a)
{
	return show(g, a, gpured_info_format);
}

static int cmd_stats(gpured_t *g, ctl_args *a)
{
	return show(g, a, gpured_stats_format);
}

/*
 * Write s to path whole or not at all: a temporary file beside it, then
 * renamed over it, so a reader (node_exporter's textfile collector) never
 * sees half of it. The file gets mode 0644: metrics are for others to read.
 */
static int write_atomically(const char *path, const char *s)
{
	size_t n = strlen(path), len = strlen(s);
	_cleanup_(freep) char *tmp = malloc(n + 16);
	int fd, r = 0;

	if (!tmp)
		return -ENOMEM;
	snprintf(tmp, n + 16, "%s.tmpXXXXXX", path);
	fd = mkstemp(tmp);
	if (fd < 0)
		return -errno;
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
	return r;
}

static int cmd_metrics(gpured_t *g, ctl_args *a)
{
	const char *output = a->output;
	_cleanup_(freep) char *s = NULL;
	int r = gpured_metrics_format(g, &s);

	if (r < 0)
		return ctl_server_error(g, "metrics", r);
	if (output) {
		r = write_atomically(output, s);
		if (r < 0)
			fprintf(stderr, "%s: cannot write %s: %s\n", ctl_prog, output, strerror(-r));
	} else {
		fputs(s, stdout);
		if (fflush(stdout) != 0)
			r = -errno;
	}
	return r < 0 ? CTL_EXIT_SERVER : 0;
}

/*
 * top until its iterations are done (0), the daemon goes away (1), or a
 * signal stops it: then the program ends by that signal, as a shell
 * expects of a program it interrupted.
 */
static int cmd_top(gpured_t *g, ctl_args *a)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	ctl_top_options *o = &a->top;
	int sig = 0, r;

	if (gpured_socket_path(a->socket, path, sizeof(path)) == 0)
		o->where = path;
	o->json = a->json;
	r = ctl_top_run(g, o, stdout, &sig);
	if (r == CTL_TOP_WRITE_FAILED) {
		fprintf(stderr, "%s: top: cannot write to standard output\n", ctl_prog);
		return CTL_EXIT_SERVER;
	}
	if (r < 0 && r != -ENOMEM && !gpured_errcode(g)) {
		/* not an answer: the connection is gone */
		fprintf(stderr, "%s: top: lost the daemon: %s\n", ctl_prog,
			gpured_errmsg(g)[0] ? gpured_errmsg(g) : gpured_strerror(r));
		return CTL_EXIT_SERVER;
	}
	if (r < 0)
		return ctl_server_error(g, "top", r);
	if (sig) {
		fflush(stdout);
		signal(sig, SIG_DFL);
		raise(sig);
	}
	return 0;
}

/* What a command takes besides -s, -T and -j. */
enum {
	CMD_INPUT = 1 << 0,    /* [FILE|-] of numbers, read before connecting; -t, -r */
	CMD_SEGMENTS = 1 << 1, /* --rows, --offsets */
	CMD_DDOF = 1 << 2,     /* -d */
	CMD_TOP = 1 << 3,      /* -i, -n */
	CMD_OUTPUT = 1 << 4,   /* -o */
	CMD_NO_JSON = 1 << 5,  /* not even -j: it has one format */
};

typedef struct ctl_command {
	const char *names; /* its name, or its names between '|' */
	int (*run)(gpured_t *g, ctl_args *a);
	unsigned flags;
	const char *usage; /* its lines in --help; NULL: told with the row before */
} ctl_command;

static const ctl_command commands[] = {
	{ "ping", cmd_ping, 0,
	  "  ping                     Check that the daemon answers\n" },
	{ "health", cmd_health, 0,
	  "  health                   Check that it answers and that its devices are\n"
	  "                           in service (exit 4 when any is not)\n" },
	{ "info", cmd_info, 0,
	  "  info                     Show the daemon's version, backend, devices and limits\n" },
	{ "stats", cmd_stats, 0,
	  "  stats                    Show the daemon's counters\n" },
	{ "metrics", cmd_metrics, CMD_OUTPUT | CMD_NO_JSON,
	  "  metrics                  Print the counters, devices and latency histogram as\n"
	  "                           Prometheus metrics (text format 0.0.4)\n" },
	{ "top", cmd_top, CMD_TOP,
	  "  top                      Show requests/s, GB/s in, latency p50/p99, jobs per\n"
	  "                           device and mapped regions, refreshed every interval\n" },
	{ "sum|min|max|sumsq|argmin|argmax", ctl_reduce_cmd, CMD_INPUT | CMD_SEGMENTS,
	  "  sum|min|max|sumsq|argmin|argmax|moments [FILE|-]\n"
	  "                           Reduce the numbers in FILE (default: standard input);\n"
	  "                           argmin and argmax print the value and its index,\n"
	  "                           moments the count, sum, min, max, mean and variance\n" },
	{ "moments", ctl_reduce_cmd, CMD_INPUT | CMD_SEGMENTS | CMD_DDOF, NULL },
	{ "cumsum", ctl_reduce_cmd_cumsum, CMD_INPUT,
	  "  cumsum [FILE|-]          Print the prefix sums of the numbers in FILE, one a\n"
	  "                           line (int64, uint64 or float64, as sum types them)\n" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [OPTIONS] COMMAND [ARGS]\n"
		"\n"
		"Talk to the gpured reduction daemon.\n"
		"\n"
		"Commands:\n",
		ctl_prog);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (commands[i].usage)
			fputs(commands[i].usage, f);
	fputs(usage_tail, f);
}

/* The row of command name, or NULL. */
static const ctl_command *find_command(const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		for (const char *p = commands[i].names;;) {
			const char *end = strchrnul(p, '|');

			if ((size_t)(end - p) == n && memcmp(p, name, n) == 0)
				return &commands[i];
			if (!*end)
				break;
			p = end + 1;
		}
	}
	return NULL;
}

static bool takes(const ctl_command *c, unsigned flag)
{
	return c && (c->flags & flag);
}

/* -1 to go on, or the exit status (-h, -V, a bad option). */
static int parse_options(int argc, char **argv, ctl_args *a)
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
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "s:t:rjo:T:qd:i:n:hV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			a->socket = optarg;
			break;
		case 't':
			if (gpured_dtype_parse(optarg, &a->dt) < 0) {
				fprintf(stderr, "%s: unknown dtype '%s' (", ctl_prog, optarg);
				for (int i = 0; gpured_dtype_name((gpured_dtype)i); i++)
					fprintf(stderr, "%s%s", i ? " " : "", gpured_dtype_name((gpured_dtype)i));
				fputs(")\n", stderr);
				return CTL_EXIT_USAGE;
			}
			a->have_dtype = true;
			break;
		case 'r':
			a->raw = true;
			break;
		case 'j':
			a->json = true;
			break;
		case 'o':
			a->output = optarg;
			break;
		case 'T':
			errno = 0;
			a->timeout_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(a->timeout_s >= 0) ||
			    a->timeout_s > 2e6) {
				fprintf(stderr, "%s: invalid timeout '%s'\n", ctl_prog, optarg);
				return CTL_EXIT_USAGE;
			}
			break;
		case 'q':
			a->quiet = true;
			break;
		case 'd':
			errno = 0;
			a->ddof = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || !isdigit((unsigned char)optarg[0])) {
				fprintf(stderr, "%s: invalid ddof '%s' (a non-negative integer)\n", ctl_prog,
					optarg);
				return CTL_EXIT_USAGE;
			}
			a->have_ddof = true;
			break;
		case OPT_ROWS:
			errno = 0;
			a->rows = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || !isdigit((unsigned char)optarg[0]) ||
			    a->rows == 0) {
				fprintf(stderr, "%s: invalid row length '%s' (a positive integer)\n",
					ctl_prog, optarg);
				return CTL_EXIT_USAGE;
			}
			break;
		case OPT_OFFSETS:
			a->offsets_file = optarg;
			break;
		case 'i':
			errno = 0;
			a->top.interval_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(a->top.interval_s >= 0.01) ||
			    a->top.interval_s > 86400) {
				fprintf(stderr, "%s: invalid interval '%s' (0.01 to 86400 seconds)\n", ctl_prog,
					optarg);
				return CTL_EXIT_USAGE;
			}
			a->have_top_opt = true;
			break;
		case 'n':
			errno = 0;
			a->top.iterations = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || a->top.iterations == 0) {
				fprintf(stderr, "%s: invalid number of iterations '%s'\n", ctl_prog, optarg);
				return CTL_EXIT_USAGE;
			}
			a->have_top_opt = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("gpuredctl %s\n", GPURED_PROJECT_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try '%s --help'.\n", ctl_prog);
			return CTL_EXIT_USAGE;
		}
	}
	return -1;
}

/* Which options the command takes, in the order they are told: -1 to go
 * on, or CTL_EXIT_USAGE. */
static int check_options(const ctl_command *c, const ctl_args *a)
{
	if (a->have_top_opt && !takes(c, CMD_TOP)) {
		fprintf(stderr, "%s: --interval and --iterations apply to top only\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (a->have_ddof && !takes(c, CMD_DDOF)) {
		fprintf(stderr, "%s: --ddof applies to moments only\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if ((a->rows || a->offsets_file) && takes(c, CMD_INPUT) && !takes(c, CMD_SEGMENTS)) {
		fprintf(stderr, "%s: --rows and --offsets do not apply to %s\n", ctl_prog, a->cmd);
		return CTL_EXIT_USAGE;
	}
	if ((a->rows || a->offsets_file) && !takes(c, CMD_SEGMENTS)) {
		fprintf(stderr, "%s: --rows and --offsets apply to reductions only\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (a->rows && a->offsets_file) {
		fprintf(stderr, "%s: --rows and --offsets exclude each other\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (takes(c, CMD_INPUT))
		return -1;
	if (!c) {
		fprintf(stderr, "%s: unknown command '%s'\nTry '%s --help'.\n", ctl_prog, a->cmd, ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (a->argc > 0) {
		fprintf(stderr, "%s: %s takes no arguments\n", ctl_prog, a->cmd);
		return CTL_EXIT_USAGE;
	}
	if (a->have_dtype || a->raw) {
		fprintf(stderr, "%s: --dtype and --raw apply to reductions only\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (a->output && !takes(c, CMD_OUTPUT)) {
		fprintf(stderr, "%s: --output applies to metrics only\n", ctl_prog);
		return CTL_EXIT_USAGE;
	}
	if (a->json && takes(c, CMD_NO_JSON)) {
		fprintf(stderr, "%s: %s has one format; --json does not apply\n", ctl_prog, a->cmd);
		return CTL_EXIT_USAGE;
	}
	return -1;
}

static void gpured_closep(gpured_t **g)
{
	gpured_close(*g);
}

int main(int argc, char **argv)
{
	_cleanup_(ctl_args_deinit) ctl_args a = { .dt = GPURED_F64, .top = { .interval_s = 1 } };
	_cleanup_(gpured_closep) gpured_t *g = NULL;
	const ctl_command *c;
	int r;

	r = parse_options(argc, argv, &a);
	if (r >= 0)
		return r;
	if (optind >= argc) {
		fprintf(stderr, "%s: no command given\nTry '%s --help'.\n", ctl_prog, ctl_prog);
		return CTL_EXIT_USAGE;
	}
	a.cmd = argv[optind++];
	a.argv = argv + optind;
	a.argc = argc - optind;
	c = find_command(a.cmd);
	r = check_options(c, &a);
	if (r >= 0)
		return r;
	if (takes(c, CMD_INPUT)) {
		r = ctl_reduce_input(&a);
		if (r)
			return r;
	}
	r = connect_or_complain(a.socket, a.timeout_s, &g);
	if (r)
		return r;
	return c->run(g, &a);
}
