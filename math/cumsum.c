/*
 * Prefix sums (cumsum.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "math/cumsum.h"
#include "math/widen.h"

/* the order's shape within a tile (cuda/scan.h) */
enum { THREADS = 256, PER = 16, LANES = 32, WARPS = THREADS / LANES };
_Static_assert(THREADS * PER == GR_CUMSUM_TILE, "a tile is 256 threads of 16");
_Static_assert(GR_REDUCE_BLOCK % GR_CUMSUM_TILE == 0, "chunks are whole tiles");

static unsigned tiles_of(size_t n)
{
	return (unsigned)((n + GR_CUMSUM_TILE - 1) / GR_CUMSUM_TILE);
}

gr_cumsum *gr_cumsum_new(gr_dtype dt, size_t chunk_elements, unsigned njobs)
{
	gr_cumsum *cs = calloc(1, sizeof(*cs) + njobs * sizeof(gr_cumsum_job));

	if (!cs)
		return NULL;
	cs->dt = dt;
	cs->njobs = njobs;
	cs->max_tiles = tiles_of(chunk_elements);
	if (gr_dtype_is_float(dt) && cs->max_tiles > 0) {
		size_t nt = (size_t)njobs * cs->max_tiles;
		cs->totals = malloc(nt * sizeof(*cs->totals));
		cs->carries = malloc(nt * sizeof(*cs->carries));
		if (!cs->totals || !cs->carries)
			return gr_cumsum_free(cs);
	}
	return cs;
}

gr_cumsum *gr_cumsum_free(gr_cumsum *cs)
{
	if (cs) {
		free(cs->totals);
		free(cs->carries);
		free(cs);
	}
	return NULL;
}

uint64_t gr_cumsum_bytes(const gr_cumsum *cs)
{
	uint64_t b = sizeof(*cs) + cs->njobs * sizeof(gr_cumsum_job);

	if (cs->totals)
		b += (uint64_t)cs->njobs * cs->max_tiles * 2 * sizeof(double);
	return b;
}

gr_cumsum_job *gr_cumsum_job_new(gr_cumsum *cs, unsigned i, size_t n, uint8_t *out)
{
	unsigned slot = i % cs->njobs;
	gr_cumsum_job *cj = &cs->jobs[slot];
	/* every job handed out before was taken: the carry is known (but
	 * a long float chunk runs faster in two passes over several
	 * workers than in one on one) */
	bool whole = cs->taken == cs->made &&
		     !(cs->split && gr_dtype_is_float(cs->dt) && n >= GR_CUMSUM_SPLIT_MIN);

	cs->made++;
	cj->phase = whole ? GR_CUMSUM_WHOLE : GR_CUMSUM_LOCAL;
	cj->out = out;
	cj->ntiles = tiles_of(n);
	cj->totals = cs->totals ? cs->totals + (size_t)slot * cs->max_tiles : NULL;
	cj->carries = cs->carries ? cs->carries + (size_t)slot * cs->max_tiles : NULL;
	cj->carry = whole ? cs->isum : 0;
	cj->tree = &cs->tree;
	cj->total = 0;
	cj->local_done = cj->final = cj->out_owned = false;
	return cj;
}

/* ---- the tree of tile totals ---- */

/* X_j, the carry into the next tile j: the sums of the aligned ranges
 * that make up tiles [0, j), the largest first, added left to right
 * (-0.0: nothing, for j = 0). */
static double tree_carry(const gr_cumsum_tree *t)
{
	double x = -0.0;

	for (int b = 63; b >= 0; b--)
		if (t->tiles >> b & 1)
			x = x + t->level[b];
	return x;
}

/* Take the next tile's total in: F_j = A_j, then for each aligned range
 * that tile j closes, the range before it of the same size plus F_j. */
static void tree_push(gr_cumsum_tree *t, double a)
{
	uint64_t j1 = t->tiles + 1;
	unsigned z = 0;

	for (; !(j1 >> z & 1); z++)
		a = t->level[z] + a;
	t->level[z] = a;
	t->tiles = j1;
}

/* ---- the kernels ---- */

static inline double load_f(gr_dtype dt, const uint8_t *p)
{
	if (dt == GR_DT_F32) {
		float f;
		memcpy(&f, p, 4);
		return f;
	}
	double d;
	memcpy(&d, p, 8);
	return d;
}

static inline uint64_t load_i(gr_dtype dt, const uint8_t *p)
{
	switch (dt) {
	case GR_DT_I32: {
		int32_t v;
		memcpy(&v, p, 4);
		return (uint64_t)(int64_t)v;
	}
	case GR_DT_U32: {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return v;
	}
	}
}

/*
 * One tile's threads: thread t's running sums r_e of its elements
 * 16 t .. 16 t + 15 (as doubles) to out, and its total R[t] (elements
 * past n, in a short last tile, read as +0.0; they change no output).
 * in may be out (8-byte elements in place): each element is read before
 * its own output is written.
 */
static void tile_threads(gr_dtype dt, const uint8_t *in, size_t n, double *out, double R[THREADS])
{
	enum { K = 4 }; /* threads side by side: independent chains of additions */
	unsigned t = 0;

	for (; (size_t)(t + K) * PER <= n; t += K) {
		double r[K], v[K][PER];
		for (unsigned k = 0; k < K; k++) {
			size_t i0 = (size_t)(t + k) * PER;
			if (dt == GR_DT_F32) {
				float f[PER];
				memcpy(f, in + 4 * i0, sizeof(f));
				for (unsigned e = 0; e < PER; e++)
					v[k][e] = f[e];
			} else {
				memcpy(v[k], in + 8 * i0, sizeof(v[k]));
			}
			r[k] = -0.0;
		}
		for (unsigned e = 0; e < PER; e++)
			for (unsigned k = 0; k < K; k++) {
				r[k] = r[k] + v[k][e];
				out[(size_t)(t + k) * PER + e] = r[k];
			}
		for (unsigned k = 0; k < K; k++)
			R[t + k] = r[k];
	}
	for (; t < THREADS; t++) {
		size_t i0 = (size_t)t * PER;
		double r = -0.0;
		for (size_t i = i0; i < i0 + PER; i++) {
			r = r + (i < n ? load_f(dt, in + gr_dtype_size(dt) * i) : 0.0);
			if (i < n)
				out[i] = r;
		}
		R[t] = r;
	}
}

/*
 * From the threads' totals R, each thread's sum of the tile before it,
 * E[t] = P_w + W_{l-1} (scan.h, steps 3 to 5: a Kogge-Stone scan of each
 * 32 totals, the groups' totals left to right), and the tile's total.
 */
static double tile_scan(const double R[THREADS], double E[THREADS])
{
	double W[THREADS], p = -0.0;

	memcpy(W, R, sizeof(W));
	for (unsigned w = 0; w < WARPS; w++) {
		double *v = W + LANES * w;
		/* from the top down, so that v[l - d] is still the step's input */
		for (unsigned d = 1; d < LANES; d <<= 1)
			for (unsigned l = LANES - 1; l >= d; l--)
				v[l] = v[l - d] + v[l];
	}
	for (unsigned w = 0; w < WARPS; w++) {
		const double *v = W + LANES * w;
		E[LANES * w] = p + -0.0;
		for (unsigned l = 1; l < LANES; l++)
			E[LANES * w + l] = p + v[l - 1];
		p = p + v[LANES - 1];
	}
	return p;
}

/* LOCAL, one tile: the threads' running sums to out; the tile's total.
 * A narrow float dtype's tile is widened to floats first (widen.h). */
static double tile_local(gr_dtype dt, const uint8_t *in, size_t n, double *out)
{
	double R[THREADS], E[THREADS];

	if (gr_dtype_is_narrow(dt)) {
		uint32_t buf[GR_CUMSUM_TILE];
		gr_widen(dt, in, n, buf);
		tile_threads(GR_DT_F32, (const uint8_t *)buf, n, out, R);
	} else {
		tile_threads(dt, in, n, out, R);
	}
	return tile_scan(R, E);
}

/* CARRY, one tile of n whose out holds the threads' running sums: each
 * becomes fl(fl(X + E_t) + r_e). */
static void tile_carry(double *out, size_t n, double x)
{
	double R[THREADS], E[THREADS];

	/* a thread's total is its last running sum; those of threads cut
	 * short by a short tile touch no output */
	for (unsigned t = 0; t < THREADS; t++)
		R[t] = (size_t)t * PER + PER <= n ? out[t * PER + PER - 1] : 0.0;
	tile_scan(R, E);
	for (unsigned t = 0; t < THREADS && (size_t)t * PER < n; t++) {
		double q = x + E[t];
		size_t end = (size_t)t * PER + PER < n ? (size_t)t * PER + PER : n;
		for (size_t i = (size_t)t * PER; i < end; i++)
			out[i] = q + out[i];
	}
}

static size_t tile_len(size_t n, unsigned j)
{
	size_t first = (size_t)j * GR_CUMSUM_TILE;
	return n - first < GR_CUMSUM_TILE ? n - first : GR_CUMSUM_TILE;
}

/* LOCAL of tiles [j0, j1) */
static void local_float(gr_cumsum_job *cj, gr_dtype dt, const uint8_t *in, size_t n, unsigned j0,
			unsigned j1)
{
	size_t size = gr_dtype_size(dt);
	double *out = (double *)(void *)cj->out;

	for (unsigned j = j0; j < j1; j++) {
		size_t first = (size_t)j * GR_CUMSUM_TILE;
		cj->totals[j] = tile_local(dt, in + first * size, tile_len(n, j), out + first);
	}
}

/* WHOLE: tile by tile, LOCAL, the carry from the tree, the tile's total
 * into it, then CARRY, in a buffer of the thread's own: the output is
 * written once, final (never read back, so a region's output that
 * another request writes meanwhile cannot feed into this one's). */
static void whole_float(gr_cumsum_job *cj, gr_dtype dt, const uint8_t *in, size_t n)
{
	size_t size = gr_dtype_size(dt);
	double *out = (double *)(void *)cj->out;
	double buf[GR_CUMSUM_TILE];

	for (unsigned j = 0; j < cj->ntiles; j++) {
		size_t first = (size_t)j * GR_CUMSUM_TILE, k = tile_len(n, j);
		double a = tile_local(dt, in + first * size, k, buf);
		double x = tree_carry(cj->tree);
		tree_push(cj->tree, a);
		tile_carry(buf, k, x);
		memcpy(out + first, buf, k * sizeof(*buf));
	}
}

/* CARRY of tiles [j0, j1) */
static void carry_float(gr_cumsum_job *cj, size_t n, unsigned j0, unsigned j1)
{
	double *out = (double *)(void *)cj->out;

	for (unsigned j = j0; j < j1; j++)
		tile_carry(out + (size_t)j * GR_CUMSUM_TILE, tile_len(n, j), cj->carries[j]);
}

/* Integers wrap modulo 2^64: running sums from the carry (0 for LOCAL),
 * and the job's total. */
#define LOCAL_INT(name, dt)                                                                        \
	static uint64_t name(const uint8_t *in, size_t n, uint64_t carry, uint64_t *out)           \
	{                                                                                          \
		const size_t size = gr_dtype_size(dt);                                             \
		uint64_t s = carry;                                                                \
		for (size_t i = 0; i < n; i++) {                                                   \
			s += load_i(dt, in + size * i);                                            \
			out[i] = s;                                                                \
		}                                                                                  \
		return s - carry;                                                                  \
	}
LOCAL_INT(local_i32, GR_DT_I32)
LOCAL_INT(local_u32, GR_DT_U32)
LOCAL_INT(local_64, GR_DT_U64)

/* A narrow integer dtype: its elements widened a tile at a time, then as
 * i32's or u32's. */
static uint64_t local_narrow(gr_dtype dt, const uint8_t *in, size_t n, uint64_t carry,
			     uint64_t *out)
{
	const size_t size = gr_dtype_size(dt);
	uint32_t buf[GR_CUMSUM_TILE];
	uint64_t total = 0;

	for (size_t i = 0; i < n; i += GR_CUMSUM_TILE) {
		size_t k = n - i < GR_CUMSUM_TILE ? n - i : GR_CUMSUM_TILE;
		gr_widen(dt, in + i * size, k, buf);
		total += (gr_dtype_wide(dt) == GR_DT_I32 ? local_i32 : local_u32)(
		    (const uint8_t *)buf, k, carry + total, out + i);
	}
	return total;
}

static void carry_int(gr_cumsum_job *cj, size_t n)
{
	uint64_t *out = (uint64_t *)(void *)cj->out;
	uint64_t c = cj->carry;

	for (size_t i = 0; i < n; i++)
		out[i] += c;
}

void gr_cumsum_run(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n)
{
	uint64_t *out = (uint64_t *)(void *)cj->out;

	if (n == 0)
		return;
	if (cj->phase == GR_CUMSUM_CARRY) {
		if (gr_dtype_is_float(dt))
			carry_float(cj, n, 0, cj->ntiles);
		else
			carry_int(cj, n);
		return;
	}
	if (gr_dtype_is_float(dt)) {
		if (cj->phase == GR_CUMSUM_WHOLE)
			whole_float(cj, dt, data, n);
		else
			local_float(cj, dt, data, n, 0, cj->ntiles);
		return;
	}
	/* LOCAL's carry is 0 */
	if (gr_dtype_is_narrow(dt))
		cj->total = local_narrow(dt, data, n, cj->carry, out);
	else if (dt == GR_DT_I32)
		cj->total = local_i32(data, n, cj->carry, out);
	else if (dt == GR_DT_U32)
		cj->total = local_u32(data, n, cj->carry, out);
	else
		cj->total = local_64(data, n, cj->carry, out);
}

bool gr_cumsum_splits(const gr_cumsum_job *cj, gr_dtype dt)
{
	return gr_dtype_is_float(dt) &&
	       (cj->phase == GR_CUMSUM_LOCAL || cj->phase == GR_CUMSUM_CARRY);
}

void gr_cumsum_run_tiles(gr_cumsum_job *cj, gr_dtype dt, const void *data, size_t n, unsigned j0,
			 unsigned j1)
{
	j1 = j1 < cj->ntiles ? j1 : cj->ntiles;
	if (cj->phase == GR_CUMSUM_CARRY)
		carry_float(cj, n, j0, j1);
	else
		local_float(cj, dt, data, n, j0, j1);
}

bool gr_cumsum_carry(gr_cumsum *cs, gr_cumsum_job *cj, size_t n)
{
	cs->carried += n;
	cs->taken++;
	if (cj->phase == GR_CUMSUM_WHOLE) {
		/* it carried itself, and took its tiles into the tree */
		cs->isum += cj->total;
		return false;
	}
	cj->phase = GR_CUMSUM_CARRY;
	if (!gr_dtype_is_float(cs->dt)) {
		cj->carry = cs->isum;
		cs->isum += cj->total;
		return cj->carry != 0;
	}
	/* the outputs hold the threads' running sums: every tile has more
	 * to add */
	for (unsigned j = 0; j < cj->ntiles; j++) {
		cj->carries[j] = tree_carry(&cs->tree);
		tree_push(&cs->tree, cj->totals[j]);
	}
	return n > 0;
}

int gr_cumsum_whole(gr_dtype dt, const void *data, size_t n, uint8_t *out)
{
	gr_cumsum *cs;

	if (n == 0)
		return 0;
	cs = gr_cumsum_new(dt, n, 1);
	if (!cs)
		return -ENOMEM;
	gr_cumsum_job *cj = gr_cumsum_job_new(cs, 0, n, out);
	gr_cumsum_run(cj, dt, data, n);
	if (gr_cumsum_carry(cs, cj, n))
		gr_cumsum_run(cj, dt, data, n);
	gr_cumsum_free(cs);
	return 0;
}
