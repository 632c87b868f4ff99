/*
 * gpured-kernels: checks every reduction (or scan) variant against the CPU
 * reference, then times it and prints the progression table.
 *
 * Timing: CUDA events around each repetition on one stream, after warm-up
 * runs, median of the repetitions.  Inputs rotate through several copies
 * of the data, and L2 is flushed once before the timed repetitions, so
 * small sizes read from memory rather than from L2.  Each table measures
 * its ceiling kernel (a float4 read, or a float4 copy for scans) in the
 * same run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <math.h>

#include <initializer_list>

#include "gv.h"

#define die(...) do { fprintf(stderr, "gpured-kernels: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)
#define ck(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) \
	die("%s: %s (%s:%d)", #call, cudaGetErrorString(e_), __FILE__, __LINE__); } while (0)

struct opts {
	size_t n;
	enum gv_dtype dt;
	int reps, warm;
	bool json, scan, sweep;
	const char *json_out;
	const char *only;
	int sweep_lo, sweep_hi;
};

/* Rotating inputs, outputs and the L2 flush buffer. */
struct bench {
	struct gv_ws ws;
	char *pool;
	size_t pool_bytes, stride, nbuf, n, bytes;
	enum gv_dtype dt;
	void *out;              /* n_max elements: scans write here */
	void *flush;
	size_t flush_bytes;
	void *host, *host_out, *host_ref;
	long double *host_abs;
	struct gv_ref ref;
	cudaEvent_t *ev;
	int nev;
};

enum job_kind { JOB_REDUCE, JOB_SCAN, JOB_READ, JOB_COPY };

struct job {
	enum job_kind kind;
	const struct gv_variant *v;
};

struct row {
	const char *name, *alias;
	int step;
	char cfg[128];
	double us, gbps, pct;
	bool pass;
	double err;
	const char *note;
};

static void bench_init(struct bench *b, size_t n_max, size_t max_elem, int max_reps)
{
	if (gv_ws_init(&b->ws, n_max) < 0)
		die("workspace for %zu elements: %s", n_max, cudaGetErrorString(b->ws.last_err));
	b->pool_bytes = (size_t)512 << 20;
	size_t need = 2 * ((n_max * max_elem + 255) / 256 * 256);
	if (b->pool_bytes < need)
		b->pool_bytes = need;
	ck(cudaMalloc((void **)&b->pool, b->pool_bytes));
	ck(cudaMalloc(&b->out, n_max * max_elem + 256));
	b->flush_bytes = 2 * b->ws.l2_bytes + ((size_t)1 << 20);
	ck(cudaMalloc(&b->flush, b->flush_bytes));
	b->host = malloc(n_max * max_elem);
	b->host_out = malloc(n_max * max_elem);
	b->host_ref = malloc(n_max * max_elem);
	b->host_abs = (long double *)malloc(n_max * sizeof(long double));
	if (!b->host || !b->host_out || !b->host_ref || !b->host_abs)
		die("out of host memory for %zu elements", n_max);
	b->nev = 2 * max_reps;
	b->ev = (cudaEvent_t *)calloc(b->nev, sizeof(cudaEvent_t));
	for (int i = 0; i < b->nev; i++)
		ck(cudaEventCreate(&b->ev[i]));
}

/* New data of n elements of dt, copied into as many rotating buffers as
 * the timed loop will use (at least two). */
static void bench_data(struct bench *b, enum gv_dtype dt, size_t n, int uses, bool scan)
{
	size_t es = gv_dtype_size(dt);

	b->dt = dt;
	b->n = n;
	b->bytes = n * es;
	b->stride = (b->bytes + 255) / 256 * 256;
	b->nbuf = b->pool_bytes / b->stride;
	if (b->nbuf > (size_t)uses)
		b->nbuf = uses;
	if (b->nbuf < 2)
		b->nbuf = 2;
	gv_fill(dt, b->host, n, 0x5eed0000ull + n * 3 + dt, /* exact= */ false);
	if (scan)
		gv_ref_scan(dt, b->host, n, b->host_ref, b->host_abs);
	else
		gv_ref_sum(dt, b->host, n, &b->ref);
	ck(cudaMemcpy(b->pool, b->host, b->bytes, cudaMemcpyHostToDevice));
	for (size_t i = 1; i < b->nbuf; i++)
		ck(cudaMemcpy(b->pool + i * b->stride, b->pool, b->bytes, cudaMemcpyDeviceToDevice));
	ck(cudaDeviceSynchronize());
}

static const void *bench_buf(struct bench *b, size_t k)
{
	return b->pool + (k % b->nbuf) * b->stride;
}

/* Work outside the timed region: an in-place variant gets a fresh copy. */
static const void *job_prep(struct bench *b, const struct job *j, const void *in)
{
	if (j->kind == JOB_REDUCE && (j->v->flags & GV_CLOBBERS_INPUT)) {
		ck(cudaMemcpyAsync(b->ws.copy, in, b->bytes, cudaMemcpyDeviceToDevice, b->ws.stream));
		return b->ws.copy;
	}
	return in;
}

static int job_run(struct bench *b, const struct job *j, const void *in)
{
	switch (j->kind) {
	case JOB_REDUCE:
	case JOB_SCAN:
		return j->v->run(&b->ws, b->dt, in, b->n, b->out);
	case JOB_READ:
		return gv_read_ceiling(&b->ws, in, b->bytes / 16 * 16, b->out);
	case JOB_COPY:
		return gv_copy_ceiling(&b->ws, in, b->out, b->bytes / 16 * 16);
	}
	return -EINVAL;
}

static void job_describe(struct bench *b, const struct job *j, char *cfg, size_t len)
{
	b->ws.describe = true;
	b->ws.cfg[0] = 0;
	job_run(b, j, bench_buf(b, 0));
	b->ws.describe = false;
	snprintf(cfg, len, "%s", b->ws.cfg);
}

static int cmp_double(const void *a, const void *c)
{
	double x = *(const double *)a, y = *(const double *)c;

	return x < y ? -1 : x > y;
}

/* Median time in microseconds of @reps runs after @warm runs. */
static double job_time(struct bench *b, const struct job *j, int warm, int reps)
{
	size_t k = 1;
	double *t = (double *)malloc(reps * sizeof(double)), med;

	if (reps > b->nev / 2)
		die("too many repetitions");
	for (int w = 0; w < warm; w++, k++)
		if (job_run(b, j, job_prep(b, j, bench_buf(b, k))) < 0)
			die("%s: %s", j->v ? j->v->name : "ceiling", cudaGetErrorString(b->ws.last_err));
	ck(cudaMemsetAsync(b->flush, (int)k & 0xff, b->flush_bytes, b->ws.stream));
	for (int r = 0; r < reps; r++, k++) {
		const void *in = job_prep(b, j, bench_buf(b, k));

		/* The scratch copy just written would sit in L2. */
		if (in == b->ws.copy)
			ck(cudaMemsetAsync(b->flush, (int)r & 0xff, b->flush_bytes, b->ws.stream));
		ck(cudaEventRecord(b->ev[2 * r], b->ws.stream));
		if (job_run(b, j, in) < 0)
			die("%s: %s", j->v ? j->v->name : "ceiling", cudaGetErrorString(b->ws.last_err));
		ck(cudaEventRecord(b->ev[2 * r + 1], b->ws.stream));
	}
	ck(cudaStreamSynchronize(b->ws.stream));
	for (int r = 0; r < reps; r++) {
		float ms;

		ck(cudaEventElapsedTime(&ms, b->ev[2 * r], b->ev[2 * r + 1]));
		t[r] = ms * 1e3;
	}
	qsort(t, reps, sizeof(double), cmp_double);
	med = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
	free(t);
	return med;
}

/* Runs once on buffer 0 (output poisoned first) and compares. */
static bool job_check(struct bench *b, const struct job *j, double *err, const char **note)
{
	size_t es = gv_dtype_size(b->dt);

	*err = 0;
	*note = "";
	if (j->kind == JOB_REDUCE) {
		ck(cudaMemsetAsync(b->out, 0xff, 8, b->ws.stream));
		if (job_run(b, j, job_prep(b, j, bench_buf(b, 0))) < 0)
			die("%s: %s", j->v->name, cudaGetErrorString(b->ws.last_err));
		ck(cudaMemcpyAsync(b->host_out, b->out, gv_result_size(j->v, b->dt),
				   cudaMemcpyDeviceToHost, b->ws.stream));
		ck(cudaStreamSynchronize(b->ws.stream));
		return gv_check_result(j->v, b->dt, b->host_out, b->n, &b->ref, err);
	}
	size_t first, bad;

	ck(cudaMemsetAsync(b->out, 0xff, b->bytes, b->ws.stream));
	if (job_run(b, j, bench_buf(b, 0)) < 0)
		die("%s: %s", j->v->name, cudaGetErrorString(b->ws.last_err));
	ck(cudaMemcpyAsync(b->host_out, b->out, b->bytes, cudaMemcpyDeviceToHost, b->ws.stream));
	ck(cudaStreamSynchronize(b->ws.stream));
	bad = gv_check_scan(b->dt, b->host_out, b->host_ref, b->host_abs, b->n, &first);
	*err = (double)bad;
	if (bad && (j->v->flags & GV_RACY))
		*note = "race";
	return bad == 0;
}

static void print_device(FILE *f, bool json)
{
	cudaDeviceProp p;
	int dev, drv = 0, rt = 0;

	ck(cudaGetDevice(&dev));
	ck(cudaGetDeviceProperties(&p, dev));
	cudaDriverGetVersion(&drv);
	cudaRuntimeGetVersion(&rt);
	if (json)
		fprintf(f, "\"device\": {\"name\": \"%s\", \"cc\": \"%d.%d\", \"sms\": %d, "
			"\"l2_bytes\": %d, \"mem_bytes\": %zu, \"driver_api\": %d, \"runtime\": %d}",
			p.name, p.major, p.minor, p.multiProcessorCount, p.l2CacheSize,
			p.totalGlobalMem, drv, rt);
	else
		fprintf(f, "# device: %s (sm_%d%d, %d SMs, L2 %d MiB, %zu MiB), CUDA driver API %d, runtime %d\n",
			p.name, p.major, p.minor, p.multiProcessorCount, p.l2CacheSize >> 20,
			p.totalGlobalMem >> 20, drv, rt);
}

static bool selected(const struct opts *o, const char *name)
{
	if (!o->only)
		return true;
	size_t l = strlen(name);
	for (const char *p = o->only; (p = strstr(p, name)) != NULL; p += l)
		if ((p == o->only || p[-1] == ',') && (p[l] == 0 || p[l] == ','))
			return true;
	return false;
}

static void write_json(FILE *f, const struct opts *o, const char *what, const char *ceiling,
		       const struct row *ceil_row, const struct row *rows, size_t nrows,
		       const char *base)
{
	double tb = 0;

	for (size_t i = 0; i < nrows; i++)
		if (strcmp(rows[i].name, base) == 0)
			tb = rows[i].us;
	fprintf(f, "{\"table\": \"%s\", \"dtype\": \"%s\", \"n\": %zu, \"reps\": %d, \"warmup\": %d, ",
		what, gv_dtype_name(o->dt), o->n, o->reps, o->warm);
	print_device(f, true);
	fprintf(f, ",\n \"ceiling\": {\"kernel\": \"%s\", \"config\": \"%s\", \"us\": %.3f, \"gbps\": %.1f},\n \"rows\": [\n",
		ceiling, ceil_row->cfg, ceil_row->us, ceil_row->gbps);
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		fprintf(f, "  {\"kernel\": \"%s\", \"alias\": \"%s\", \"step\": %d, \"config\": \"%s\", "
			"\"us\": %.3f, \"gbps\": %.1f, \"pct_ceiling\": %.1f, \"step_speedup\": %.3f, "
			"\"cumulative_speedup\": %.3f, \"check\": \"%s\", \"error\": %.3g}%s\n",
			r->name, r->alias, r->step, r->cfg, r->us, r->gbps, r->pct,
			i ? rows[i - 1].us / r->us : 1.0, tb > 0 ? tb / r->us : 0.0,
			r->pass ? "PASS" : "FAIL", r->err, i + 1 < nrows ? "," : "");
	}
	fprintf(f, " ]}\n");
}

static void print_table(FILE *f, const struct opts *o, const char *what, const char *ceiling,
			const struct row *ceil_row, const struct row *rows, size_t nrows,
			const char *base)
{
	double tb = 0;

	for (size_t i = 0; i < nrows; i++)
		if (strcmp(rows[i].name, base) == 0)
			tb = rows[i].us;
	print_device(f, false);
	fprintf(f, "# %s, dtype %s, n = %zu (%zu bytes), median of %d after %d warm-up\n",
		what, gv_dtype_name(o->dt), o->n, o->n * gv_dtype_size(o->dt), o->reps, o->warm);
	fprintf(f, "# ceiling: %s [%s] %.2f us = %.1f GB/s\n", ceiling, ceil_row->cfg,
		ceil_row->us, ceil_row->gbps);
	fprintf(f, "%-4s %-20s %-42s %10s %8s %6s %7s %7s %s\n", "step", "kernel", "launch",
		"time(us)", "GB/s", "%ceil", "step", "cumul", "check");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];

		fprintf(f, "%-4d %-20s %-42s %10.2f %8.1f %5.1f%% %6.2fx %6.2fx %s%s%s\n",
			r->step, r->name, r->cfg, r->us, r->gbps, r->pct,
			i ? rows[i - 1].us / r->us : 1.0, tb > 0 ? tb / r->us : 0.0,
			r->pass ? "PASS" : "FAIL", r->note[0] ? " " : "", r->note);
	}
	fflush(f);
}

static int run_table(const struct opts *o, bool scan)
{
	struct bench b;
	size_t count;
	const struct gv_variant *v = scan ? gv_scan_variants(&count) : gv_reduce_variants(&count);
	struct row *rows = (struct row *)calloc(count, sizeof(struct row)), ceil_row;
	size_t nrows = 0;
	int fails = 0;
	const size_t es = gv_dtype_size(o->dt);
	const double traffic = (scan ? 2.0 : 1.0) * (double)(o->n * es);
	struct job cj = { scan ? JOB_COPY : JOB_READ, NULL };

	memset(&b, 0, sizeof(b));
	bench_init(&b, o->n, es, o->reps);
	bench_data(&b, o->dt, o->n, 1 + o->warm + o->reps, scan);

	memset(&ceil_row, 0, sizeof(ceil_row));
	job_describe(&b, &cj, ceil_row.cfg, sizeof(ceil_row.cfg));
	ceil_row.us = job_time(&b, &cj, o->warm, o->reps);
	ceil_row.gbps = (scan ? 2.0 : 1.0) * (double)(b.bytes / 16 * 16) / ceil_row.us * 1e-3;

	for (size_t i = 0; i < count; i++) {
		struct job j = { scan ? JOB_SCAN : JOB_REDUCE, &v[i] };
		struct row *r = &rows[nrows];

		if (!selected(o, v[i].name))
			continue;
		r->name = v[i].name;
		r->alias = v[i].alias;
		r->step = v[i].step;
		job_describe(&b, &j, r->cfg, sizeof(r->cfg));
		r->pass = job_check(&b, &j, &r->err, &r->note);
		r->us = job_time(&b, &j, o->warm, o->reps);
		r->gbps = traffic / r->us * 1e-3;
		r->pct = 100.0 * r->gbps / ceil_row.gbps;
		if (!r->pass && !(v[i].flags & GV_RACY))
			fails++;
		nrows++;
	}
	const char *what = scan ? "inclusive scan (GB/s counts n read + n written)"
				: "sum (GB/s counts the n elements read once)";
	const char *ceiling = scan ? "float4 copy (read + write)" : "float4 read";
	const char *base = scan ? "hs_double" : "reduce0";
	if (o->json)
		write_json(stdout, o, scan ? "scan" : "reduce", ceiling, &ceil_row, rows, nrows, base);
	else
		print_table(stdout, o, what, ceiling, &ceil_row, rows, nrows, base);
	if (o->json_out) {
		FILE *f = fopen(o->json_out, "w");

		if (!f)
			die("%s: %s", o->json_out, strerror(errno));
		write_json(f, o, scan ? "scan" : "reduce", ceiling, &ceil_row, rows, nrows, base);
		fclose(f);
	}
	free(rows);
	return fails ? 1 : 0;
}

/* GB/s against n for the daemon's kernel, the production-style kernel,
 * CUB, a few landmarks and the read ceiling. */
static int run_sweep(const struct opts *o)
{
	static const char *names[] = { "reduce0", "reduce2", "reduce5", "reduce6",
				       "shfl_atomic", "production", "gpured", "cub" };
	const int nn = sizeof(names) / sizeof(names[0]);
	const size_t es = gv_dtype_size(o->dt), n_max = (size_t)1 << o->sweep_hi;
	size_t count;
	const struct gv_variant *v = gv_reduce_variants(&count);
	struct bench b;
	int fails = 0;
	FILE *jf = o->json ? stdout : NULL, *jo = NULL;

	memset(&b, 0, sizeof(b));
	bench_init(&b, n_max, es, 200);
	if (o->json_out && !(jo = fopen(o->json_out, "w")))
		die("%s: %s", o->json_out, strerror(errno));
	for (FILE *f : { jf, jo }) {
		if (!f)
			continue;
		fprintf(f, "{\"table\": \"sweep\", \"dtype\": \"%s\", ", gv_dtype_name(o->dt));
		print_device(f, true);
		fprintf(f, ",\n \"points\": [\n");
	}
	if (!o->json) {
		print_device(stdout, false);
		printf("# sum, dtype %s: GB/s (n elements read once) against n; median of repetitions\nlog2n\tn", gv_dtype_name(o->dt));
		printf("\tread_ceiling");
		for (int k = 0; k < nn; k++)
			printf("\t%s", names[k]);
		printf("\n");
	}
	for (int l = o->sweep_lo; l <= o->sweep_hi; l++) {
		size_t n = (size_t)1 << l;
		/* Enough repetitions for a stable median, fewer at large n. */
		int reps = l <= 20 ? 101 : l <= 24 ? 41 : 15, warm = 3;
		double us[16], gb[16], cu, cg;
		bool pass[16];

		bench_data(&b, o->dt, n, 1 + warm + reps, false);
		struct job cj = { JOB_READ, NULL };
		cu = job_time(&b, &cj, warm, reps);
		cg = (double)(b.bytes / 16 * 16) / cu * 1e-3;
		for (int k = 0; k < nn; k++) {
			struct job j = { JOB_REDUCE, gv_find(v, count, names[k]) };
			double err;
			const char *note;

			pass[k] = job_check(&b, &j, &err, &note);
			fails += !pass[k];
			us[k] = job_time(&b, &j, warm, reps);
			gb[k] = (double)b.bytes / us[k] * 1e-3;
		}
		if (!o->json) {
			printf("%d\t%zu\t%.1f", l, n, cg);
			for (int k = 0; k < nn; k++)
				printf("\t%.1f%s", gb[k], pass[k] ? "" : "(FAIL)");
			printf("\n");
			fflush(stdout);
		}
		for (FILE *f : { jf, jo }) {
			if (!f)
				continue;
			fprintf(f, "  {\"log2n\": %d, \"n\": %zu, \"read_ceiling\": {\"us\": %.3f, \"gbps\": %.1f}", l, n, cu, cg);
			for (int k = 0; k < nn; k++)
				fprintf(f, ", \"%s\": {\"us\": %.3f, \"gbps\": %.1f, \"check\": \"%s\"}",
					names[k], us[k], gb[k], pass[k] ? "PASS" : "FAIL");
			fprintf(f, "}%s\n", l < o->sweep_hi ? "," : "");
		}
	}
	for (FILE *f : { jf, jo })
		if (f)
			fprintf(f, " ]}\n");
	if (jo)
		fclose(jo);
	return fails ? 1 : 0;
}

static size_t parse_n(const char *s)
{
	char *end;

	if (s[0] == '2' && s[1] == '^')
		return (size_t)1 << strtoul(s + 2, &end, 10);
	unsigned long long v = strtoull(s, &end, 0);
	if (*end || v == 0)
		die("bad n '%s'", s);
	return (size_t)v;
}

static void usage(void)
{
	printf("usage: gpured-kernels [--n N|2^K] [--dtype int|float|double] [--reps R] [--warmup W]\n"
	       "                      [--only a,b,...] [--scan | --sweep [--sweep-range LO:HI]]\n"
	       "                      [--json] [--json-out FILE]\n"
	       "Checks every reduction variant (--scan: every inclusive-scan variant) against\n"
	       "a CPU reference, times it and prints the progression table (default n = 2^24,\n"
	       "float).  --sweep prints GB/s against n = 2^LO..2^HI (default 10:28) for a few\n"
	       "landmark kernels, CUB and the read ceiling.  --json prints JSON instead;\n"
	       "--json-out also writes it to FILE.  Exit 1 when a check fails.\n");
}

int main(int argc, char **argv)
{
	struct opts o = { (size_t)1 << 24, GV_FLOAT, 51, 5, false, false, false, NULL, NULL, 10, 28 };
	int ndev = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

#define NEEDVAL() do { if (!val) die("%s needs a value", a); i++; } while (0)
		if (!strcmp(a, "--n")) { NEEDVAL(); o.n = parse_n(val); }
		else if (!strcmp(a, "--dtype")) { NEEDVAL(); if (gv_dtype_parse(val, &o.dt) < 0) die("bad dtype '%s'", val); }
		else if (!strcmp(a, "--reps")) { NEEDVAL(); o.reps = atoi(val); if (o.reps < 1 || o.reps > 1000) die("bad reps"); }
		else if (!strcmp(a, "--warmup")) { NEEDVAL(); o.warm = atoi(val); if (o.warm < 0) die("bad warmup"); }
		else if (!strcmp(a, "--only")) { NEEDVAL(); o.only = val; }
		else if (!strcmp(a, "--json")) o.json = true;
		else if (!strcmp(a, "--json-out")) { NEEDVAL(); o.json_out = val; }
		else if (!strcmp(a, "--scan")) o.scan = true;
		else if (!strcmp(a, "--sweep")) o.sweep = true;
		else if (!strcmp(a, "--sweep-range")) {
			NEEDVAL();
			if (sscanf(val, "%d:%d", &o.sweep_lo, &o.sweep_hi) != 2 || o.sweep_lo < 1 ||
			    o.sweep_hi > 31 || o.sweep_lo > o.sweep_hi)
				die("bad range '%s'", val);
		}
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 0; }
		else die("unknown option '%s' (try --help)", a);
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0)
		die("no CUDA device");
	if (o.sweep)
		return run_sweep(&o);
	return run_table(&o, o.scan);
}
