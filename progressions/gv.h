/*
 * gv: the classic CUDA reduction and scan progressions, one kernel per step.
 *
 * This module is a teaching and measuring bench, not part of the daemon's
 * request path.  Every variant computes the whole answer on the device: a
 * multi-block variant runs all of its passes (the same kernel applied again
 * to the block partials until one value is left), so its time is the time
 * of the complete reduction.
 *
 * Element types and arithmetic:
 *   GV_INT     int32 data summed with wrapping 32-bit arithmetic (the
 *              kernels add as unsigned int, so overflow is defined and every
 *              order gives the same bits); compared exactly.
 *   GV_FLOAT   float data, float accumulation (as the course kernels and
 *              CUB do); compared with a tolerance.
 *   GV_DOUBLE  double data, double accumulation; compared with a tolerance.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include <cuda_runtime.h>

enum gv_dtype {
	GV_INT,
	GV_FLOAT,
	GV_DOUBLE,
	GV_DTYPE_COUNT,
};

/* Size in bytes of one element of @dt. */
size_t gv_dtype_size(enum gv_dtype dt);
const char *gv_dtype_name(enum gv_dtype dt);
/* Parses "int", "float" or "double"; returns -EINVAL otherwise. */
int gv_dtype_parse(const char *s, enum gv_dtype *ret_dt);

/* Threads per block of the classic kernels (steps 1-7, 9). */
#define GV_BLOCK 256

/*
 * Device workspace shared by all variants: partial-sum buffers for the
 * later passes, a scratch copy for the in-place variants, the ticket
 * counter of the single-launch kernel, CUB's temporary storage and the
 * block sums of the multi-block scans.  Sized once for the largest n.
 */
struct gv_ws {
	cudaStream_t stream;
	int sms;                /* multiprocessors */
	size_t l2_bytes;
	size_t n_max;

	void *part[2];          /* ping-pong block partials, 8-byte elements */
	size_t part_elems;
	void *copy;             /* scratch copy of the input, n_max * 8 bytes */
	unsigned *ticket;       /* zero between launches of the last-block kernel */
	void *cub_tmp;
	size_t cub_bytes;
	void *scan_sums;        /* block sums of every level of a scan */
	size_t scan_sums_elems;

	/* When set, run() only writes its launch configuration into cfg. */
	bool describe;
	char cfg[128];
	cudaError_t last_err;
};

/* Allocates the workspace for inputs of up to @n_max elements of any type. */
int gv_ws_init(struct gv_ws *ws, size_t n_max);
void gv_ws_deinit(struct gv_ws *ws);

/* Flags of a variant. */
enum {
	/* Reduces in place: destroys its input; pass a scratch copy. */
	GV_CLOBBERS_INPUT = 1u << 0,
	/* Relies on warp-synchronous execution the CUDA memory model does not
	 * promise (the historical volatile last warp). */
	GV_WARP_SYNC_UNSAFE = 1u << 1,
	/* Has a data race by construction (single-buffered Hillis-Steele). */
	GV_RACY = 1u << 2,
	/* Result depends on the order of atomics (floating point only). */
	GV_NONDETERMINISTIC = 1u << 3,
	/* Writes its result widened, 8 bytes: a double for float and double,
	 * a 64-bit sum for int (the daemon's own kernel, which accumulates
	 * float in double and int in 64 bits). */
	GV_OUT_WIDE = 1u << 4,
};

/*
 * One variant.  run() enqueues the whole computation on ws->stream:
 * reductions write one element to the device pointer @out; scans write n
 * elements (inclusive prefix sums) to @out.  Returns 0 or -EIO (the CUDA
 * error is left in ws->last_err).
 */
struct gv_variant {
	const char *name;
	const char *alias;      /* what course notes call it */
	int step;
	unsigned flags;
	int (*run)(struct gv_ws *ws, enum gv_dtype dt, const void *in,
		   size_t n, void *out);
};

/* The reductions in the order of the progression (steps 1-12, CUB last),
 * and the scans likewise. */
const struct gv_variant *gv_reduce_variants(size_t *ret_count);
const struct gv_variant *gv_scan_variants(size_t *ret_count);

const struct gv_variant *gv_find(const struct gv_variant *v, size_t count,
				 const char *name);

/*
 * Bandwidth ceilings measured in the same run as the variants: a float4
 * grid-stride kernel that reads @bytes (and writes almost nothing), and a
 * float4 copy of @bytes.  @bytes must be a multiple of 16.
 */
int gv_read_ceiling(struct gv_ws *ws, const void *in, size_t bytes, void *sink);
int gv_copy_ceiling(struct gv_ws *ws, const void *in, void *out, size_t bytes);

/* ---- the CPU reference (plain loops) and the checks ---- */

/* Result of a reference sum: the value and the sum of magnitudes. */
struct gv_ref {
	uint32_t isum;          /* GV_INT: wrapping sum, as bits */
	long double fsum;       /* GV_FLOAT / GV_DOUBLE */
	long double abssum;
};

void gv_ref_sum(enum gv_dtype dt, const void *h, size_t n, struct gv_ref *ret);
/* Inclusive scan on the CPU into @h_out (n elements of @dt), plus the
 * running sum of magnitudes (n long doubles) for the tolerance. */
void gv_ref_scan(enum gv_dtype dt, const void *h, size_t n, void *h_out,
		 long double *abs_out);
/* True when the device result @got (one element of @dt) matches @ref;
 * @err gets the absolute error (0 for ints). */
bool gv_check_sum(enum gv_dtype dt, const void *got, size_t n,
		  const struct gv_ref *ref, double *err);
/* The same for what variant v wrote (GV_OUT_WIDE or not), and the number
 * of bytes it writes. */
bool gv_check_result(const struct gv_variant *v, enum gv_dtype dt, const void *got, size_t n,
		     const struct gv_ref *ref, double *err);
size_t gv_result_size(const struct gv_variant *v, enum gv_dtype dt);
/* Number of elements of a scan result that miss the reference. */
size_t gv_check_scan(enum gv_dtype dt, const void *got, const void *ref,
		     const long double *abs, size_t n, size_t *first_bad);

/* Fills @h with pseudo-random data from @seed.  @exact: small integers
 * (in [-8, 8], or full-range int32 for GV_INT) so that every summation
 * order of float and double gives the exact answer; otherwise uniform
 * reals in [-1, 1) (full-range int32 for GV_INT). */
void gv_fill(enum gv_dtype dt, void *h, size_t n, uint64_t seed, bool exact);
