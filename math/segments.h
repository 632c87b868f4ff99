/*
 * Segmented reduces ("offsets"): one result per segment of a request's
 * elements, packed into records (PROTOCOL.md, "Segments").
 *
 * A request's elements are reduced in chunks (request.c) whose boundaries
 * fall where the staging slots do, so a segment may begin in one chunk
 * and end in a later one. A chunk's job reduces each segment that lies
 * wholly inside it straight to its record, and hands back a partial for
 * the segment it begins inside of (its head, in the job's result) and
 * for the one it ends inside of (its tail); the loop thread joins those in
 * chunk order (gr_segs_join) and writes the records they complete. Jobs
 * write disjoint records, and each record is written once. A segment's
 * value is its pieces' partials combined in order, which for every op but
 * the sum of squares of integers (whose double lanes follow the pieces'
 * blocks) is a reduce of that segment alone, bit for bit.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "math/reduce.h"

#define GR_SEG_NONE UINT64_MAX

/* What a chunk's job needs to know of the segments, and gives back. */
typedef struct gr_segjob {
	/* set by the submitter */
	const uint64_t *offsets; /* the request's k + 1 */
	uint64_t nseg;           /* k */
	uint64_t first;          /* the job's first element, counted in the request */
	uint8_t *records;        /* the request's, gr_segs_record_bytes() each */
	uint64_t ddof;           /* moments */
	/* set by gr_segs_reduce() */
	uint64_t head_seg;       /* the segment the job begins inside of, or GR_SEG_NONE */
	bool head_open;          /* ... which also goes on past the job's end (no tail then) */
	uint64_t tail_seg;       /* the segment the job ends inside of, or GR_SEG_NONE */
	gr_partial tail;
} gr_segjob;

/* A request's segments: what the loop thread keeps. */
typedef struct gr_segs {
	uint64_t *offsets;       /* k + 1, owned */
	uint64_t nseg;
	uint8_t *records;        /* k records, owned */
	size_t record_bytes;
	uint64_t ddof;
	uint64_t carry_seg;      /* the segment still open after the last joined chunk */
	gr_partial carry;
	unsigned njobs;
	gr_segjob jobs[];        /* one per chunk in flight */
} gr_segs;

/* Bytes of one record: 8 (sum, sumsq, min, max), 16 (argmin, argmax:
 * value, index), 40 (moments: sum, min, max, mean, var). */
size_t gr_segs_record_bytes(gr_op op);

/* A request's segments over offsets[0..nseg] (taken over), with room for
 * njobs chunks in flight. NULL when out of memory (offsets freed). */
gr_segs *gr_segs_new(uint64_t *offsets, uint64_t nseg, gr_op op, uint64_t ddof, unsigned njobs);
gr_segs *gr_segs_free(gr_segs *s);
/* Bytes it holds (to charge them). */
uint64_t gr_segs_bytes(const gr_segs *s);

/* Prepare the job of the chunk in slot i, whose first element is first. */
gr_segjob *gr_segs_job(gr_segs *s, unsigned i, uint64_t first);

/*
 * On the backend's thread: reduce the n elements of data, the request's
 * elements [sj->first, sj->first + n), n >= 1. Writes the records of the
 * segments that begin and end inside them (empty ones included, and those
 * empty ones at the request's end when the job is its last), *head and
 * sj->tail for the others.
 */
void gr_segs_reduce(gr_segjob *sj, gr_op op, gr_dtype dt, const void *data, size_t n,
		    gr_partial *head);

/*
 * A job cut into n parts run apart (on several threads): part i covers the
 * job's elements from parts[i].first on, up to the next part's first, and
 * was reduced by gr_segs_reduce() into heads[i] and parts[i]. Join them in
 * order into what one gr_segs_reduce() of the whole job leaves in *sj and
 * *head, writing the records of the segments the parts complete between
 * them.
 */
void gr_segs_merge(gr_segjob *sj, gr_partial *head, gr_op op, gr_dtype dt,
		   const gr_segjob *parts, const gr_partial *heads, unsigned n);

/*
 * Whether a job's n >= 1 elements hold whole segments only: a segment
 * begins at its first element, and another at its end, or the request
 * ends there. If so, *ret_s0 and *ret_s1 bound the segments [s0, s1)
 * whose records gr_segs_reduce() of the job writes (the empty ones at
 * its start among them, and those at the request's end when it is the
 * last), and it leaves no head or tail.
 */
bool gr_segs_whole(const gr_segjob *sj, uint64_t n, uint64_t *ret_s0, uint64_t *ret_s1);

/* Where a piece of a request's elements that begins at first and would
 * end at want (first < want <= offsets[k]) ends instead: the last
 * segment boundary in (first, want], or want where there is none. */
uint64_t gr_segs_cut(const uint64_t *offsets, uint64_t k, uint64_t first, uint64_t want);

/* On the loop thread, chunk by chunk in order: join a finished job's
 * head and tail to what came before, writing the records they complete. */
void gr_segs_join(gr_segs *s, gr_op op, gr_dtype dt, const gr_segjob *sj,
		  const gr_partial *head);

/* A request of no elements: every segment is empty. */
void gr_segs_all_empty(gr_segs *s, gr_op op, gr_dtype dt);

/* The record of one segment from its partial (of count 0 when empty). */
void gr_segs_record(gr_op op, gr_dtype dt, uint64_t ddof, const gr_partial *p, uint8_t *rec);
