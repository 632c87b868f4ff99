/*
 * Every reduction and scan variant against the CPU reference, on odd sizes,
 * for int, float and double, on two kinds of data:
 *   exact  small integers (full-range int32 for int), which every
 *          summation order adds exactly: any dropped, doubled or stray
 *          element shows;
 *   real   uniform reals in [-1, 1) (float and double), checked with the
 *          rounding tolerance of gv_check_sum().
 * Each input is also read from a pointer one element past a 16-byte
 * boundary, so the vector loads' head and tail paths run.
 *
 * Exit 0 pass, 1 fail, 77 when there is no GPU.
 *
 *   --small     sizes 1, 33, 1000, 4097 only (for the sanitizers)
 *   --racecheck --small, and leaves out the two variants that race by
 *               design: the pre-Volta volatile last warp and single-buffered
 *               Hillis-Steele
 *   --probe     only exit 0 or 77 (GPU or not)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gv.h"

static int failures;

#define CHECK(cond, ...) do { if (!(cond)) { failures++; \
	fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)
#define CUDA_OK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
	fprintf(stderr, "FATAL %s: %s\n", #call, cudaGetErrorString(e_)); exit(1); } } while (0)

struct ctx {
	struct gv_ws ws;
	void *d_in;             /* n_max + 1 elements */
	void *d_out;
	void *h_in, *h_out, *h_ref;
	long double *h_abs;
	bool racecheck;
	int runs;
};

/*
 * Copies the host input to d_in + off_bytes on the variants' stream and
 * waits.  A plain cudaMemcpy would not do: from pageable memory it may
 * return before the data lands, and the workspace's non-blocking stream
 * does not wait for the legacy default stream, so the first kernel could
 * read the previous test's data.
 */
static void gv_test_upload(struct ctx *c, size_t off_bytes, size_t bytes)
{
	CUDA_OK(cudaMemcpyAsync((char *)c->d_in + off_bytes, c->h_in, bytes,
				cudaMemcpyHostToDevice, c->ws.stream));
	CUDA_OK(cudaStreamSynchronize(c->ws.stream));
}

static bool skip(const struct ctx *c, const struct gv_variant *v)
{
	return c->racecheck && (v->flags & (GV_WARP_SYNC_UNSAFE | GV_RACY));
}

/* Runs a reduction on d_in + off and returns the result bits in @got. */
static int run_reduce(struct ctx *c, const struct gv_variant *v, enum gv_dtype dt,
		      size_t n, size_t off, void *got)
{
	size_t es = gv_dtype_size(dt);
	const char *in = (const char *)c->d_in + off * es;
	int r;

	if (v->flags & GV_CLOBBERS_INPUT) {
		CUDA_OK(cudaMemcpyAsync(c->ws.copy, in, n * es, cudaMemcpyDeviceToDevice, c->ws.stream));
		in = (const char *)c->ws.copy;
	}
	/* Poison: a variant that writes nothing cannot pass. */
	CUDA_OK(cudaMemsetAsync(c->d_out, 0xa5, 8, c->ws.stream));
	r = v->run(&c->ws, dt, in, n, c->d_out);
	if (r < 0)
		return r;
	CUDA_OK(cudaMemcpyAsync(got, c->d_out, gv_result_size(v, dt), cudaMemcpyDeviceToHost,
				c->ws.stream));
	CUDA_OK(cudaStreamSynchronize(c->ws.stream));
	c->runs++;
	return 0;
}

static void test_reduce(struct ctx *c, enum gv_dtype dt, size_t n, bool exact)
{
	size_t count, es = gv_dtype_size(dt);
	const struct gv_variant *v = gv_reduce_variants(&count);
	struct gv_ref ref;

	gv_fill(dt, c->h_in, n, 0x1234 + n * 7 + dt * 3 + exact, exact);
	gv_ref_sum(dt, c->h_in, n, &ref);
	for (size_t off = 0; off < (c->racecheck ? 1u : 2u); off++) {
		gv_test_upload(c, off * es, n * es);
		for (size_t i = 0; i < count; i++) {
			unsigned char got[8], again[8];
			double err;

			if (skip(c, &v[i]))
				continue;
			int r = run_reduce(c, &v[i], dt, n, off, got);
			CHECK(r == 0, "%s %s n=%zu: run failed: %s", v[i].name, gv_dtype_name(dt), n,
			      cudaGetErrorString(c->ws.last_err));
			if (r < 0)
				continue;
			bool ok = gv_check_result(&v[i], dt, got, n, &ref, &err);
			if (dt == GV_INT && exact) {
				/* err is 0/1 for ints; say what came back. */
				CHECK(ok, "%s int n=%zu off=%zu: got %u want %u", v[i].name, n, off,
				      *(unsigned *)got, ref.isum);
			} else {
				CHECK(ok, "%s %s n=%zu off=%zu %s: error %g (sum %Lg, |x| sum %Lg)",
				      v[i].name, gv_dtype_name(dt), n, off, exact ? "exact" : "real",
				      err, ref.fsum, ref.abssum);
			}
			/* Small integers sum exactly in any order. */
			if (exact && dt != GV_INT)
				CHECK(err == 0, "%s %s n=%zu off=%zu: inexact (%g) on integer data",
				      v[i].name, gv_dtype_name(dt), n, off, err);
			/* Same input, same bits, unless atomics decide the order. */
			if (!(v[i].flags & GV_NONDETERMINISTIC) && !c->racecheck) {
				run_reduce(c, &v[i], dt, n, off, again);
				CHECK(memcmp(got, again, gv_result_size(&v[i], dt)) == 0, "%s %s n=%zu: not deterministic",
				      v[i].name, gv_dtype_name(dt), n);
			}
		}
	}
}

static void test_scan(struct ctx *c, enum gv_dtype dt, size_t n, bool exact)
{
	size_t count, es = gv_dtype_size(dt);
	const struct gv_variant *v = gv_scan_variants(&count);

	gv_fill(dt, c->h_in, n, 0x9876 + n * 5 + dt * 3 + exact, exact);
	gv_ref_scan(dt, c->h_in, n, c->h_ref, c->h_abs);
	for (size_t off = 0; off < (c->racecheck ? 1u : 2u); off++) {
		const char *in = (const char *)c->d_in + off * es;

		gv_test_upload(c, off * es, n * es);
		for (size_t i = 0; i < count; i++) {
			size_t bad, first;

			if (skip(c, &v[i]))
				continue;
			CUDA_OK(cudaMemsetAsync(c->d_out, 0xa5, n * es, c->ws.stream));
			int r = v[i].run(&c->ws, dt, in, n, c->d_out);
			CHECK(r == 0, "%s %s n=%zu: run failed: %s", v[i].name, gv_dtype_name(dt), n,
			      cudaGetErrorString(c->ws.last_err));
			if (r < 0)
				continue;
			CUDA_OK(cudaMemcpyAsync(c->h_out, c->d_out, n * es, cudaMemcpyDeviceToHost, c->ws.stream));
			CUDA_OK(cudaStreamSynchronize(c->ws.stream));
			c->runs++;
			bad = gv_check_scan(dt, c->h_out, c->h_ref, c->h_abs, n, &first);
			if (v[i].flags & GV_RACY) {
				/* The race is the point of this variant: report what
				 * it did, do not count it. */
				if (bad)
					printf("note: %s %s n=%zu: %zu of %zu elements wrong (data race, as documented)\n",
					       v[i].name, gv_dtype_name(dt), n, bad, n);
				continue;
			}
			CHECK(bad == 0, "%s %s n=%zu off=%zu %s: %zu elements wrong, first at %zu",
			      v[i].name, gv_dtype_name(dt), n, off, exact ? "exact" : "real", bad, first);
		}
	}
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 31, 33, 1000, 4097, 1000003 };
	static const size_t small[] = { 1, 33, 1000, 4097 };
	const size_t *sz = sizes;
	size_t nsz = sizeof(sizes) / sizeof(sizes[0]), n_max = 0;
	struct ctx c;
	int ndev = 0;

	memset(&c, 0, sizeof(c));
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--small")) {
			sz = small;
			nsz = sizeof(small) / sizeof(small[0]);
		} else if (!strcmp(argv[i], "--racecheck")) {
			sz = small;
			nsz = sizeof(small) / sizeof(small[0]);
			c.racecheck = true;
		} else if (strcmp(argv[i], "--probe")) {
			fprintf(stderr, "usage: %s [--small|--racecheck|--probe]\n", argv[0]);
			return 1;
		}
	}
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--probe"))
			return 0;
	for (size_t i = 0; i < nsz; i++)
		if (sz[i] > n_max)
			n_max = sz[i];
	if (gv_ws_init(&c.ws, n_max + 1) < 0) {
		fprintf(stderr, "FATAL workspace: %s\n", cudaGetErrorString(c.ws.last_err));
		return 1;
	}
	CUDA_OK(cudaMalloc(&c.d_in, (n_max + 1) * 8));
	CUDA_OK(cudaMalloc(&c.d_out, (n_max + 1) * 8));
	c.h_in = malloc((n_max + 1) * 8);
	c.h_out = malloc((n_max + 1) * 8);
	c.h_ref = malloc((n_max + 1) * 8);
	c.h_abs = (long double *)malloc((n_max + 1) * sizeof(long double));
	if (!c.h_in || !c.h_out || !c.h_ref || !c.h_abs)
		return 1;

	for (int d = 0; d < GV_DTYPE_COUNT; d++) {
		enum gv_dtype dt = (enum gv_dtype)d;

		for (size_t i = 0; i < nsz; i++) {
			test_reduce(&c, dt, sz[i], true);
			test_scan(&c, dt, sz[i], true);
			if (dt != GV_INT && !c.racecheck) {
				test_reduce(&c, dt, sz[i], false);
				test_scan(&c, dt, sz[i], false);
			}
		}
	}
	/* The last-block kernel resets its ticket: a launch after all of
	 * the above still sees zero. */
	unsigned ticket = 1;
	CUDA_OK(cudaMemcpy(&ticket, c.ws.ticket, sizeof(ticket), cudaMemcpyDeviceToHost));
	CHECK(ticket == 0, "ticket left at %u", ticket);

	gv_ws_deinit(&c.ws);
	cudaFree(c.d_in);
	cudaFree(c.d_out);
	free(c.h_in);
	free(c.h_out);
	free(c.h_ref);
	free(c.h_abs);
	printf("%d runs checked, %d failure%s\n", c.runs, failures, failures == 1 ? "" : "s");
	return failures ? 1 : 0;
}
