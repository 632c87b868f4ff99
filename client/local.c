/*
 * Reductions in this process (gpured.h, "In this process"): the daemon's
 * own kernels (math/) over the caller's memory, with no connection. The
 * elements are cut where the daemon cuts a request (blocks of
 * GR_REDUCE_BLOCK, joined in order), and with threads each thread takes a
 * run of whole blocks, the runs joined in order too: the value, index and
 * count are the daemon's for the same elements, whatever the threads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "client/partial.h"
#include "client/reduce.h"
#include "math/fsum.h"
#include "math/reduce.h"
#include "math/xsum.h"

/* At most this many threads; a thread takes two blocks at least. */
#define LOCAL_THREADS_MAX 64u

typedef struct local_run {
	gr_op op;
	gr_dtype dt;
	const unsigned char *data;
	size_t n;
	gr_partial part;
	pthread_t tid;
	bool started;
} local_run;

static void *local_run_main(void *arg)
{
	local_run *r = arg;

	gr_reduce(r->op, r->dt, r->data, r->n, &r->part);
	return NULL;
}

/* op over data[0..n) into ret, on up to threads threads. */
static int local_partial(gr_op op, gr_dtype dt, const void *data, size_t n, unsigned threads,
			 gr_partial *ret)
{
	const size_t size = gr_dtype_size(dt), blocks = (n + GR_REDUCE_BLOCK - 1) / GR_REDUCE_BLOCK;
	size_t t = threads < LOCAL_THREADS_MAX ? threads : LOCAL_THREADS_MAX;

	if (t > blocks / 2)
		t = blocks / 2;
	if (t < 2) {
		gr_reduce(op, dt, data, n, ret);
		return 0;
	}
	local_run *runs = calloc(t, sizeof(*runs));
	if (!runs)
		return -ENOMEM;
	const size_t per = (blocks + t - 1) / t * GR_REDUCE_BLOCK;
	for (size_t i = 0; i < t; i++) {
		const size_t first = per * i < n ? per * i : n;
		runs[i] = (local_run){ .op = op, .dt = dt,
				       .data = (const unsigned char *)data + first * size,
				       .n = n - first < per ? n - first : per };
		/* run 0 is the caller's, as is any whose thread cannot start */
		runs[i].started = i > 0 && pthread_create(&runs[i].tid, NULL, local_run_main,
							   &runs[i]) == 0;
	}
	for (size_t i = 0; i < t; i++)
		if (!runs[i].started)
			local_run_main(&runs[i]);
	gr_partial_identity(op, dt, ret);
	for (size_t i = 0; i < t; i++) {
		if (runs[i].started)
			pthread_join(runs[i].tid, NULL);
		gr_partial_combine(op, dt, ret, &runs[i].part);
	}
	free(runs);
	return 0;
}

static int local_check(gpured_op op, gpured_dtype dt, const void *data, size_t n)
{
	if ((unsigned)op >= GR_OP_N || (unsigned)dt >= GR_DT_N || (!data && n))
		return -EINVAL;
	return 0;
}

static int local_err(gr_err e)
{
	return e == GR_OK ? 0 : e == GR_ERR_EMPTY ? -ENODATA : -EINVAL;
}

int gpured_local_reduce(gpured_op op, gpured_dtype dt, const void *data, size_t n,
			unsigned threads, gpured_value *ret)
{
	gr_partial p;
	gr_value v;
	int r = local_check(op, dt, data, n);

	if (r < 0 || op == GPURED_OP_MOMENTS)
		return r < 0 ? r : -EINVAL;
	if ((r = local_partial((gr_op)op, (gr_dtype)dt, data, n, threads, &p)) < 0)
		return r;
	if ((r = local_err(gr_partial_finish((gr_op)op, (gr_dtype)dt, &p, &v))) < 0)
		return r;
	*ret = client_value_of(&v, n);
	ret->index = gr_op_has_index((gr_op)op) ? p.index : 0;
	return 0;
}

/* words[0..n) * 2^scale and flags, of count elements, as a canonical
 * partial of op over dt. */
static int local_exact(const uint64_t *words, size_t n, int scale, unsigned flags, uint64_t count,
		       gpured_op op, gpured_dtype dt, gpured_partial *ret)
{
	gr_fsum x;
	int r;

	if (n > GR_FSUM_LIMBS_MAX)
		return -ERANGE;
	x.count = count;
	x.scale = scale;
	x.specials = flags;
	x.nlimbs = (uint32_t)n;
	memset(x.limbs, 0, sizeof(x.limbs));
	memcpy(x.limbs, words, n * sizeof(*words));
	if ((r = gr_fsum_canonical(&x, NULL, 0)) < 0)
		return r;
	client_partial_from_exact(&x, op, dt, ret);
	return 0;
}

int gpured_local_partial(gpured_op op, gpured_dtype dt, const void *data, size_t n,
			 unsigned threads, gpured_partial *ret)
{
	gr_partial p;
	uint64_t words[GR_PARTIAL_LIMBS_MAX];
	int scale, r = local_check(op, dt, data, n);
	unsigned specials;

	if (r < 0 || !client_partial_kind(op, dt))
		return r < 0 ? r : -EINVAL;
	if ((r = local_partial((gr_op)op, (gr_dtype)dt, data, n, threads, &p)) < 0)
		return r;
	size_t nw = gr_partial_limbs(&p, words, GR_PARTIAL_LIMBS_MAX, &scale, &specials);
	return local_exact(words, nw, scale, specials, n, op, dt, ret);
}

int gpured_local_moments(gpured_dtype dt, const void *data, size_t n, uint64_t ddof,
			 unsigned threads, gpured_moments *ret)
{
	gr_partial p;
	gr_moments m;
	int r = local_check(GPURED_OP_MOMENTS, dt, data, n);

	if (r < 0)
		return r;
	if (n && ddof >= n)
		return -EINVAL;
	if ((r = local_partial(GR_OP_MOMENTS, (gr_dtype)dt, data, n, threads, &p)) < 0)
		return r;
	if ((r = local_err(gr_moments_finish((gr_dtype)dt, &p, ddof, &m))) < 0)
		return r;
	*ret = (gpured_moments){
		.count = m.count,
		.sum = client_value_of(&m.sum, m.count),
		.min = client_value_of(&m.min, m.count),
		.max = client_value_of(&m.max, m.count),
		.mean = m.mean,
		.var = m.var,
	};
	return 0;
}

int gpured_local_moments_parts(gpured_dtype dt, const void *data, size_t n, unsigned threads,
			       gpured_value *ret_min, gpured_value *ret_max, gpured_partial *ret_s1,
			       gpured_partial *ret_s2)
{
	gr_partial p;
	uint64_t words[GR_PARTIAL_LIMBS_MAX];
	int scale, r = local_check(GPURED_OP_MOMENTS, dt, data, n);
	unsigned flags;
	size_t nw;
	/* the sums' partials: the float dtype's own, f64's for the integers */
	const gpured_dtype sdt = gr_dtype_is_float((gr_dtype)dt) ? dt : GPURED_F64;

	if (r < 0)
		return r;
	if (n == 0)
		return -ENODATA;
	if ((r = local_partial(GR_OP_MOMENTS, (gr_dtype)dt, data, n, threads, &p)) < 0)
		return r;
	const gr_kind k = gr_result_kind(GR_OP_MIN, (gr_dtype)dt);
	gr_value lo = { .kind = k }, hi = { .kind = k };
	memcpy(&lo.u, &p.lo, 8);
	memcpy(&hi.u, &p.hi, 8);
	*ret_min = client_value_of(&lo, n);
	*ret_max = client_value_of(&hi, n);
	nw = gr_partial_limbs(&p, words, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	if ((r = local_exact(words, nw, scale, flags, n, GPURED_OP_SUM, sdt, ret_s1)) < 0)
		return r;
	nw = xsum_acc_limbs(p.x2acc, p.x2flags, n, words, GR_PARTIAL_LIMBS_MAX, &scale, &flags);
	return local_exact(words, nw, scale, flags, n, GPURED_OP_SUMSQ, sdt, ret_s2);
}
