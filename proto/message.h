/*
 * The messages of gpured's protocol, as bytes: what the client sends
 * (requests) and what the daemon sends (responses and errors), written
 * with the gr_mpw_* writers, and the check a client makes on a response it
 * read with gr_obj_parse(). PROTOCOL.md describes every shape here.
 *
 * Each writer appends to a gr_buf and returns 0, -ENOMEM (the buffer may
 * then hold part of the message: drop it), or -EINVAL for arguments
 * outside the protocol.
 */
#pragma once

#include <stdint.h>

#include "mp.h"
#include "obj.h"
#include "types.h"

/* msgpack-RPC message types. */
#define GR_MSG_REQUEST 0
#define GR_MSG_RESPONSE 1
#define GR_MSG_NOTIFICATION 2

/*
 * [0, msgid, "<method>", [  with an array header of nparams: the caller
 * appends the parameters.
 */
int gr_msg_write_request_header(gr_buf *b, uint32_t msgid, gr_method m, uint32_t nparams);

/* A whole request without parameters: [0, msgid, "<method>", []]. */
int gr_msg_write_request(gr_buf *b, uint32_t msgid, gr_method m);

/*
 * A reduce request up to and including the header of its data:
 * [0, msgid, "reduce", [{"op": op, "dtype": dt, "data": <bin header of
 * nbytes>  ...the caller then sends nbytes of packed little-endian
 * elements straight from its memory, and the message is complete.
 */
int gr_msg_write_reduce_header(gr_buf *b, uint32_t msgid, gr_op op, gr_dtype dt, uint32_t nbytes);

/*
 * A moments request up to its data's bin header: {"op": "moments",
 * "dtype": dt, "ddof": ddof, "data": <bin header of nbytes>.
 */
int gr_msg_write_reduce_moments_header(gr_buf *b, uint32_t msgid, gr_dtype dt, uint64_t ddof,
				       uint32_t nbytes);

/*
 * The same with "partial": true after op and dtype: the response then
 * carries the exact partial of a float sum or sumsq (PROTOCOL.md, "Exact
 * partials"; math/fsum.h reads it).
 */
int gr_msg_write_reduce_partial_header(gr_buf *b, uint32_t msgid, gr_op op, gr_dtype dt,
				       uint32_t nbytes);

/*
 * [1, msgid, nil,  the start of a successful response: the caller appends
 * exactly one result object (a map of stats, a string...).
 */
int gr_msg_write_response_header(gr_buf *b, uint32_t msgid);

/*
 * [1, msgid, nil, {"value": v, "count": count}]: reduce's result. The
 * value is written per its kind: I64 as an int, U64 as a uint, F64 always
 * as float64, even when integral.
 */
int gr_msg_write_response_value(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t count);

/*
 * [1, msgid, nil, {"value": v, "index": index, "count": count}]: the
 * result of argmin and argmax.
 */
int gr_msg_write_response_index(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t index,
				uint64_t count);

/* A segmented reduce's result: {"count": count, "segments": nseg,
 * "values": bin of the records}. -E2BIG when they pass a bin's 4 GiB. */
int gr_msg_write_response_segments(gr_buf *b, uint32_t msgid, uint64_t count, uint64_t nseg,
				   const void *records, size_t bytes);

/*
 * cumsum's result up to and including the header of its values:
 * [1, msgid, nil, {"count": count, "values": <bin header of count * 8
 * bytes>  ...the caller then appends (or sends) the count prefix sums, 8
 * little-endian bytes each, and the message is complete. -E2BIG when they
 * pass a bin's 4 GiB.
 */
int gr_msg_write_response_cumsum_header(gr_buf *b, uint32_t msgid, uint64_t count);

/* [1, msgid, nil, {"count": count}]: the result of a cumsum written to a
 * region. */
int gr_msg_write_response_count(gr_buf *b, uint32_t msgid, uint64_t count);

/*
 * [1, msgid, nil, {"count", "sum", "min", "max", "mean", "var"}]: the
 * result of moments. sum, min and max must be of one kind.
 */
int gr_msg_write_response_moments(gr_buf *b, uint32_t msgid, const gr_moments *m);

/*
 * The same with the exact partial beside them (reduce's "partial": true,
 * PROTOCOL.md): {"value", "count", "exact": {"limbs": bin of nlimbs
 * little-endian 64-bit words of a two's complement integer, "scale": int,
 * "specials": uint}}.
 */
int gr_msg_write_response_exact(gr_buf *b, uint32_t msgid, const gr_value *v, uint64_t count,
				const uint64_t *limbs, size_t nlimbs, int scale, unsigned specials);

/*
 * [1, msgid, {"code": "<code>", "message": message}, nil]. msgid is 0 when
 * the request's msgid is unknown. message may be NULL (then the code's
 * name is used).
 */
int gr_msg_write_error(gr_buf *b, uint32_t msgid, gr_err code, const char *message);

/*
 * What a client reads a response with: responses are small maps, and these
 * bound what a confused or hostile server can make a client allocate.
 */
extern const gr_obj_limits gr_msg_response_limits;
/* A partial response larger than this cannot be one of ours. */
#define GR_MSG_RESPONSE_MAX_BYTES (8u << 20)

/*
 * Check that root has the shape [1, msgid, error|nil, result] and take it
 * apart. On success (0): *ret_msgid; *ret_code is GR_OK and *ret_result
 * the result, or the error's code (a code this version does not know reads
 * as GR_ERR_INTERNAL) with *ret_msg and *ret_msglen its message (not
 * NUL-terminated, pointing into the parsed bytes; NULL/0 when absent) and
 * *ret_result NULL. -EBADMSG when the shape is wrong. Any ret_ may be NULL.
 */
int gr_msg_parse_response(const gr_obj *root, uint32_t *ret_msgid, gr_err *ret_code,
			  const char **ret_msg, uint32_t *ret_msglen, const gr_obj **ret_result);

/*
 * Read reduce's result map {"value": ..., "count": ...}, where value must
 * be of the kind expected for the request (gr_result_kind()): an I64 may
 * come as int or uint, a U64 as uint, an F64 as a float. 0 or -EBADMSG.
 */
int gr_msg_parse_reduce_result(const gr_obj *result, gr_kind kind, gr_value *ret_value,
			       uint64_t *ret_count);

/*
 * A moments result, its sum, min and max of the given kind (mean and var
 * are always float64): 0 or -EBADMSG.
 */
int gr_msg_parse_moments_result(const gr_obj *result, gr_kind kind, gr_moments *ret);

/* argmin's and argmax's "index" in a reduce result: 0 or -EBADMSG. */
int gr_msg_parse_reduce_index(const gr_obj *result, uint64_t *ret_index);
