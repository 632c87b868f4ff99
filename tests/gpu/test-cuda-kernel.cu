/*
 * The reduction kernel alone, small enough for compute-sanitizer: every
 * op and dtype against a plain host loop, at byte offsets 0..15 of
 * allocations of exactly the segment's size (so that memcheck sees any
 * read past either end), and bit for bit the same through the
 * single-array path, at every offset, in both forms of its kernel, and
 * inside one mixed batch launch.
 * Exits 77 when there is no GPU.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda/kernel.cuh"
#include "tests/gpu/gpu-rnd.h"

#define CHECK(cond, ...)                                                            \
	do {                                                                        \
		if (!(cond)) {                                                      \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                               \
			fputc('\n', stderr);                                        \
			exit(1);                                                    \
		}                                                                   \
	} while (0)
#define CU(call)                                                                    \
	do {                                                                        \
		cudaError_t e_ = (call);                                            \
		CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));  \
	} while (0)

static const size_t dt_size[6] = { 4, 8, 4, 8, 4, 8 };
static const char *const dt_name[6] = { "i32", "i64", "u32", "u64", "f32", "f64" };
static const char *const op_name[4] = { "sum", "min", "max", "sumsq" };

static void fill(int dt, void *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t r = rnd();
		switch (dt) {
		case 0: ((int32_t *)p)[i] = (int32_t)r; break;
		case 1: ((int64_t *)p)[i] = (int64_t)r; break;
		case 2: ((uint32_t *)p)[i] = (uint32_t)r; break;
		case 3: ((uint64_t *)p)[i] = r; break;
		case 4: ((float *)p)[i] = (float)((int64_t)(r >> 11) % 2000001 - 1000000) / 1000.0f; break;
		case 5: ((double *)p)[i] = (double)((int64_t)(r >> 11) % 2000001 - 1000000) / 997.0; break;
		}
	}
}

static double elem_d(int dt, const void *p, size_t i)
{
	switch (dt) {
	case 0: return ((const int32_t *)p)[i];
	case 1: return (double)((const int64_t *)p)[i];
	case 2: return ((const uint32_t *)p)[i];
	case 3: return (double)((const uint64_t *)p)[i];
	case 4: return ((const float *)p)[i];
	default: return ((const double *)p)[i];
	}
}

/* The host's answer, in the gr_partial member's bits; *tol for floats. */
static uint64_t host_reduce(int op, int dt, const void *p, size_t n, double *tol)
{
	bool fp = dt >= 4 || op == 3;
	*tol = 0;
	if (fp) {
		double acc = op == 1 ? INFINITY : op == 2 ? -INFINITY : 0, mag = 0;
		for (size_t i = 0; i < n; i++) {
			double x = elem_d(dt, p, i);
			if (op == 0)
				acc += x, mag += fabs(x);
			else if (op == 3)
				acc += x * x, mag += x * x;
			else if (op == 1)
				acc = x < acc ? x : acc;
			else
				acc = x > acc ? x : acc;
		}
		*tol = mag * 1e-10 + 1e-300;
		uint64_t u;
		memcpy(&u, &acc, 8);
		return u;
	}
	bool sgn = dt == 0 || dt == 1;
	if (op == 0) {
		uint64_t s = 0;
		for (size_t i = 0; i < n; i++)
			s += dt == 0 ? (uint64_t)(int64_t)((const int32_t *)p)[i]
			   : dt == 1 ? (uint64_t)((const int64_t *)p)[i]
			   : dt == 2 ? (uint64_t)((const uint32_t *)p)[i]
				     : ((const uint64_t *)p)[i];
		return s;
	}
	if (sgn) {
		int64_t m = dt == 0 ? ((const int32_t *)p)[0] : ((const int64_t *)p)[0];
		for (size_t i = 1; i < n; i++) {
			int64_t x = dt == 0 ? ((const int32_t *)p)[i] : ((const int64_t *)p)[i];
			m = op == 1 ? (x < m ? x : m) : (x > m ? x : m);
		}
		return (uint64_t)m;
	}
	uint64_t m = dt == 2 ? ((const uint32_t *)p)[0] : ((const uint64_t *)p)[0];
	for (size_t i = 1; i < n; i++) {
		uint64_t x = dt == 2 ? ((const uint32_t *)p)[i] : ((const uint64_t *)p)[i];
		m = op == 1 ? (x < m ? x : m) : (x > m ? x : m);
	}
	return m;
}

static void check_value(int op, int dt, size_t n, unsigned off, uint64_t got, uint64_t want,
			double tol)
{
	if (dt >= 4 || op == 3) {
		double g, w;
		memcpy(&g, &got, 8);
		memcpy(&w, &want, 8);
		CHECK(fabs(g - w) <= tol, "%s %s n=%zu off=%u: got %.17g want %.17g", op_name[op],
		      dt_name[dt], n, off, g, w);
	} else {
		CHECK(got == want, "%s %s n=%zu off=%u: got %llu want %llu", op_name[op], dt_name[dt],
		      n, off, (unsigned long long)got, (unsigned long long)want);
	}
}

struct scratch {
	uint64_t *partials, *out;
	uint32_t *tickets;
};

static uint64_t run_single(const scratch &s, int op, int dt, const void *d, size_t n, int sms)
{
	CU((cudaError_t)gr_kernel_launch_single(op, dt, d, n, s.partials, s.tickets, s.out, sms, 0));
	uint64_t r;
	CU(cudaMemcpy(&r, s.out, 8, cudaMemcpyDeviceToHost));
	return r;
}

/* The single-array kernel in its general form, or the launcher's choice
 * (the SMALL form where it fits). */
template <typename T, int OP>
static uint64_t run_form(const scratch &s, const void *d, size_t n, int sms, bool general)
{
	uint32_t units = (uint32_t)grk::units_of(n, sizeof(T), grk::GEOMETRY);
	CU((grk::launch_single_units<T, OP>(d, n, units, s.partials, s.tickets, s.out, sms,
					     grk::BLOCKS_PER_SM, 0, general)));
	uint64_t r;
	CU(cudaMemcpy(&r, s.out, 8, cudaMemcpyDeviceToHost));
	return r;
}

template <typename T>
static uint64_t run_form_op(const scratch &s, int op, const void *d, size_t n, int sms, bool general)
{
	switch (op) {
	case 0: return run_form<T, grk::SUM>(s, d, n, sms, general);
	case 1: return run_form<T, grk::MIN>(s, d, n, sms, general);
	case 2: return run_form<T, grk::MAX>(s, d, n, sms, general);
	default: return run_form<T, grk::SUMSQ>(s, d, n, sms, general);
	}
}

static uint64_t run_form_any(const scratch &s, int op, int dt, const void *d, size_t n, int sms,
			     bool general)
{
	switch (dt) {
	case 0: return run_form_op<int32_t>(s, op, d, n, sms, general);
	case 1: return run_form_op<int64_t>(s, op, d, n, sms, general);
	case 2: return run_form_op<uint32_t>(s, op, d, n, sms, general);
	case 3: return run_form_op<uint64_t>(s, op, d, n, sms, general);
	case 4: return run_form_op<float>(s, op, d, n, sms, general);
	default: return run_form_op<double>(s, op, d, n, sms, general);
	}
}

int main(void)
{
	int count = 0;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	int sms = 0;
	CU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	scratch s;
	CU(cudaMalloc(&s.partials, 1 << 20));
	CU(cudaMalloc(&s.out, 4096 * 8));
	CU(cudaMalloc(&s.tickets, 65536 * 4));
	CU(cudaMemset(s.tickets, 0, 65536 * 4));

	/* sizes around the row (512 B), group (8 rows) and unit edges */
	const size_t sizes[] = { 1, 3, 31, 33, 127, 128, 129, 1000, 4096, 4099, 33000, 70001 };
	unsigned checks = 0;
	for (size_t n : sizes) {
		for (int dt = 0; dt < 6; dt++) {
			size_t bytes = n * dt_size[dt];
			std::vector<unsigned char> h(bytes);
			fill(dt, h.data(), n);
			for (int op = 0; op < 4; op++) {
				double tol;
				uint64_t want = host_reduce(op, dt, h.data(), n, &tol);
				uint64_t first = 0;
				for (unsigned off = 0; off < 16; off++) {
					/* every offset for small n; a few for large */
					if (n > 1000 && off % 5 != 0 && off != 15)
						continue;
					unsigned char *d;
					CU(cudaMalloc(&d, off + bytes));
					CU(cudaMemcpy(d + off, h.data(), bytes, cudaMemcpyHostToDevice));
					uint64_t got = run_single(s, op, dt, d + off, n, sms);
					uint64_t again = run_single(s, op, dt, d + off, n, sms);
					CU(cudaFree(d));
					check_value(op, dt, n, off, got, want, tol);
					CHECK(got == again, "%s %s n=%zu off=%u: not repeatable", op_name[op],
					      dt_name[dt], n, off);
					if (off == 0)
						first = got;
					CHECK(got == first, "%s %s n=%zu off=%u: bits depend on alignment",
					      op_name[op], dt_name[dt], n, off);
					checks++;
				}
			}
		}
	}

	/* the single-array kernel's SMALL form (one group, data on 16
	 * bytes) and its general form give the same bits */
	for (size_t n : sizes) {
		for (int dt = 0; dt < 6; dt++) {
			if (grk::units_of(n, dt_size[dt], grk::GEOMETRY) > grk::CGROUP)
				continue;
			size_t bytes = n * dt_size[dt];
			std::vector<unsigned char> h(bytes);
			fill(dt, h.data(), n);
			unsigned char *d;
			CU(cudaMalloc(&d, bytes));
			CU(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
			for (int op = 0; op < 4; op++) {
				double tol;
				uint64_t want = host_reduce(op, dt, h.data(), n, &tol);
				uint64_t small = run_form_any(s, op, dt, d, n, sms, false);
				uint64_t general = run_form_any(s, op, dt, d, n, sms, true);
				check_value(op, dt, n, 0, small, want, tol);
				CHECK(small == general, "%s %s n=%zu: the SMALL and general forms differ",
				      op_name[op], dt_name[dt], n);
				checks++;
			}
			CU(cudaFree(d));
		}
	}

	/* float min and max over signed zeros, subnormals, infinities and NaNs
	 * of either sign, bit for bit: -0 is below +0, any NaN gives NaN */
	{
		const size_t zsizes[] = { 1, 2, 31, 33, 129, 4099, 70001 };
		for (size_t n : zsizes) {
			for (int dt = 4; dt < 6; dt++) {
				for (int kind = 0; kind < 6; kind++) {
					size_t bytes = n * dt_size[dt];
					std::vector<unsigned char> h(bytes);
					for (size_t i = 0; i < n; i++) {
						uint64_t r = rnd();
						double tiny = (r & 4 ? -1 : 1) * (dt == 4 ? 1e-40 : 1e-310);
						double v = kind == 0 ? 0.0
							 : kind == 1 ? -0.0
							 : kind == 2 ? (r & 1 ? -0.0 : 0.0)
							 : kind == 3 ? ((r & 3) == 0 ? -0.0 : (r & 3) == 1 ? 0.0 : tiny)
							 : kind == 4 ? ((r & 3) == 0 ? INFINITY : (r & 3) == 1 ? -INFINITY
								       : (r & 1 ? -0.0 : 0.0))
								     : (r & 1 ? -0.0 : 0.0);
						if (kind == 5 && i == (r >> 8) % n)
							v = (r & 2) ? -NAN : NAN;
						if (dt == 4) {
							float f = (float)v;
							memcpy(h.data() + 4 * i, &f, 4);
						} else {
							memcpy(h.data() + 8 * i, &v, 8);
						}
					}
					for (int op = 1; op <= 2; op++) {
						/* the host's answer with -0 below +0 and NaN first */
						bool nan = false;
						double m = op == 1 ? INFINITY : -INFINITY;
						for (size_t i = 0; i < n; i++) {
							double x = elem_d(dt, h.data(), i);
							if (x != x) {
								nan = true;
								continue;
							}
							bool below = x < m || (x == m && std::signbit(x) && !std::signbit(m));
							bool above = x > m || (x == m && !std::signbit(x) && std::signbit(m));
							if (op == 1 ? below : above)
								m = x;
						}
						unsigned char *d;
						CU(cudaMalloc(&d, bytes + 16));
						for (unsigned off : { 0u, 4u, 7u }) {
							CU(cudaMemcpy(d + off, h.data(), bytes, cudaMemcpyHostToDevice));
							uint64_t got = run_single(s, op, dt, d + off, n, sms);
							double g;
							memcpy(&g, &got, 8);
							if (nan)
								CHECK(g != g, "%s %s n=%zu kind %d: got %a, want NaN",
								      op_name[op], dt_name[dt], n, kind, g);
							else
								CHECK(memcmp(&g, &m, 8) == 0,
								      "%s %s n=%zu kind %d off=%u: got %a, want %a",
								      op_name[op], dt_name[dt], n, kind, off, g, m);
							checks++;
						}
						CU(cudaFree(d));
					}
				}
			}
		}
	}

	/* integer extremes over many units: every lane that saw nothing must
	 * start from the dtype's own limits */
	for (int dt = 0; dt < 4; dt++) {
		for (int v = 0; v < 2; v++) {
			size_t n = 50001, bytes = n * dt_size[dt];
			std::vector<unsigned char> h(bytes);
			for (size_t i = 0; i < n; i++) {
				uint64_t x = dt == 0 ? (v ? 0x7fffffffull : 0x80000000ull)
					   : dt == 1 ? (v ? 0x7fffffffffffffffull : 0x8000000000000000ull)
					   : dt == 2 ? (v ? 0xffffffffull : 0)
						     : (v ? ~0ull : 0);
				memcpy(h.data() + i * dt_size[dt], &x, dt_size[dt]);
			}
			unsigned char *d;
			CU(cudaMalloc(&d, bytes));
			CU(cudaMemcpy(d, h.data(), bytes, cudaMemcpyHostToDevice));
			for (int op = 0; op < 3; op++) {
				double tol;
				uint64_t want = host_reduce(op, dt, h.data(), n, &tol);
				check_value(op, dt, n, 0, run_single(s, op, dt, d, n, sms), want, tol);
				checks++;
			}
			CU(cudaFree(d));
		}
	}

	/* many groups: other unit counts than the production geometry's,
	 * so that the single-array kernel's blocks stride over more groups
	 * than the grid has blocks, and the last block combines more group
	 * partials than it gathers into shared memory; the second launch with
	 * the kernel's other rows in flight and ticket fence, which must give
	 * the same bits */
	{
		const size_t n = ((size_t)1 << 21) + 5;
		const uint32_t units_list[] = { 9, 1000, 8200, 16391 };
		for (int dt : { 0, 4, 5 }) {
			size_t bytes = n * dt_size[dt];
			std::vector<unsigned char> h(bytes);
			fill(dt, h.data(), n);
			unsigned char *d;
			CU(cudaMalloc(&d, bytes + 16));
			for (unsigned off : { 0u, 12u }) {
				CU(cudaMemcpy(d + off, h.data(), bytes, cudaMemcpyHostToDevice));
				for (int op = 0; op < 3; op++) {
					double tol;
					uint64_t want = host_reduce(op, dt, h.data(), n, &tol);
					for (uint32_t u : units_list) {
						uint64_t got[2];
						for (int rep = 0; rep < 2; rep++) {
							cudaError_t e = cudaSuccess;
#define GRT_LAUNCH(T, OP)                                                                      \
	e = rep == 0 ? grk::launch_single_units<T, OP, grk::GROUP, false>(                     \
			       d + off, n, u, s.partials, s.tickets, s.out, sms, grk::BLOCKS_PER_SM, 0) \
		     : grk::launch_single_units<T, OP, 16, true>(                              \
			       d + off, n, u, s.partials, s.tickets, s.out, sms, grk::BLOCKS_PER_SM, 0)
#define GRT_OPS(T)                                                                             \
	do {                                                                                   \
		if (op == 0)                                                                   \
			GRT_LAUNCH(T, grk::SUM);                                               \
		else if (op == 1)                                                              \
			GRT_LAUNCH(T, grk::MIN);                                               \
		else                                                                           \
			GRT_LAUNCH(T, grk::MAX);                                               \
	} while (0)
							if (dt == 0)
								GRT_OPS(int32_t);
							else if (dt == 4)
								GRT_OPS(float);
							else
								GRT_OPS(double);
							CU(e);
							CU(cudaMemcpy(&got[rep], s.out, 8, cudaMemcpyDeviceToHost));
						}
						check_value(op, dt, n, off, got[0], want, tol);
						CHECK(got[0] == got[1], "%s %s n=%zu units=%u: variants differ",
						      op_name[op], dt_name[dt], n, u);
						checks++;
					}
				}
			}
			CU(cudaFree(d));
		}
	}

	/* one batch launch of mixed segments at odd offsets equals the
	 * single-array path for each of them, bit for bit */
	const unsigned nseg = 300;
	std::vector<gr_kseg> segs(nseg);
	std::vector<unsigned char> hb;
	std::vector<uint64_t> want(nseg);
	uint32_t units = 0;
	for (unsigned i = 0; i < nseg; i++) {
		int dt = (int)(rnd() % 6), op = (int)(rnd() % 4);
		size_t n = i % 7 == 0 ? rnd() % 40000 : rnd() % 300;
		size_t off = hb.size() + rnd() % 16;
		hb.resize(off + n * dt_size[dt]);
		fill(dt, hb.data() + off, n);
		segs[i] = gr_kseg{ off, n, GR_KSEG_OPDT(op, dt), gr_kernel_unit_rows(n, dt_size[dt]),
				   units, n ? (uint32_t)gr_kernel_units(n, dt_size[dt]) : 0 };
		units += segs[i].units;
	}
	unsigned char *db;
	gr_kseg *dsegs;
	CU(cudaMalloc(&db, hb.size() + 1));
	CU(cudaMalloc(&dsegs, nseg * sizeof(gr_kseg)));
	CU(cudaMemcpy(db, hb.data(), hb.size(), cudaMemcpyHostToDevice));
	CU(cudaMemcpy(dsegs, segs.data(), nseg * sizeof(gr_kseg), cudaMemcpyHostToDevice));
	for (unsigned i = 0; i < nseg; i++)
		if (segs[i].n)
			want[i] = run_single(s, (int)segs[i].opdt / 16, (int)segs[i].opdt % 16,
					     db + segs[i].offset, segs[i].n, sms);
	for (int rep = 0; rep < 3; rep++) {
		CU((cudaError_t)gr_kernel_launch_batch(db, dsegs, nseg, units, s.partials, s.tickets,
						       s.out, sms, 0));
		std::vector<uint64_t> got(nseg);
		CU(cudaMemcpy(got.data(), s.out, nseg * 8, cudaMemcpyDeviceToHost));
		for (unsigned i = 0; i < nseg; i++) {
			if (!segs[i].n)
				continue;
			int op = (int)segs[i].opdt / 16, dt = (int)segs[i].opdt % 16;
			CHECK(got[i] == want[i], "batch segment %u (%s %s n=%llu): %llx != %llx", i,
			      op_name[op], dt_name[dt], (unsigned long long)segs[i].n,
			      (unsigned long long)got[i], (unsigned long long)want[i]);
			double tol;
			uint64_t h = host_reduce(op, dt, hb.data() + segs[i].offset, segs[i].n, &tol);
			check_value(op, dt, segs[i].n, 0, got[i], h, tol);
			checks++;
		}
	}
	/* the same segments with the table in the launch's parameters: the
	 * first GR_KERNEL_PARAM_SEGS of them, bit for bit as above */
	{
		const uint32_t np = GR_KERNEL_PARAM_SEGS;
		const uint32_t pu = segs[np].first_unit;
		CHECK(gr_kernel_launch_batch_params(db, segs.data(), np + 1, units, s.partials,
						    s.tickets, s.out, sms, 0) == (int)cudaErrorInvalidValue,
		      "a table past the parameter limit was taken");
		for (int rep = 0; rep < 3; rep++) {
			CU(cudaMemset(s.out, 0xff, np * 8));
			CU((cudaError_t)gr_kernel_launch_batch_params(db, segs.data(), np, pu, s.partials,
								      s.tickets, s.out, sms, 0));
			std::vector<uint64_t> got(np);
			CU(cudaMemcpy(got.data(), s.out, np * 8, cudaMemcpyDeviceToHost));
			for (unsigned i = 0; i < np; i++) {
				if (!segs[i].n)
					continue;
				CHECK(got[i] == want[i], "parameter table, segment %u: %llx != %llx", i,
				      (unsigned long long)got[i], (unsigned long long)want[i]);
				checks++;
			}
		}
	}
	std::vector<uint32_t> tk(65536);
	CU(cudaMemcpy(tk.data(), s.tickets, 65536 * 4, cudaMemcpyDeviceToHost));
	for (uint32_t t : tk)
		CHECK(t == 0, "a ticket was left non-zero");
	CU(cudaFree(db));
	CU(cudaFree(dsegs));
	CU(cudaFree(s.partials));
	CU(cudaFree(s.out));
	CU(cudaFree(s.tickets));
	printf("kernel: %u checks passed\n", checks);
	return 0;
}
