/*
 * libgpured: the client library of the gpured reduction service.
 *
 * A gpured_t is one connection to the daemon's Unix socket. Requests are
 * msgpack-RPC messages; the array to reduce is sent straight from the
 * caller's memory (no copy), and replies may come back in any order, so
 * several requests can be in flight on one connection (gpured_submit() /
 * gpured_wait()).
 *
 * Errors: every function that can fail returns 0 (or a documented
 * non-negative value) on success and a negative errno-style code on
 * failure. A server error maps to one code each:
 *
 *   invalid_params  -EINVAL     too_large   -E2BIG     empty  -ENODATA
 *   busy            -EBUSY      unknown_method -ENOSYS
 *   invalid_request -EPROTO     internal    -EIO
 *
 * and a broken connection returns the errno of the failure (-ENOENT,
 * -ECONNREFUSED, -EPIPE, -ECONNRESET, or -EPROTO for a reply that is not
 * valid msgpack-RPC). After a connection error the handle is dead: every
 * later call returns the same code; close it and connect again. After a
 * server error for one request the handle stays usable.
 * gpured_errmsg() tells the server's message (or a local one) for the last
 * failure, gpured_errcode() the server's error code name.
 *
 * The library never prints, never aborts, and never raises SIGPIPE.
 *
 * Threads: a handle is not safe for concurrent use; use one gpured_t per
 * thread. Any number of handles may live in one process.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPURED_VERSION_MAJOR 0
#define GPURED_VERSION_MINOR 1

/* Requests that may be outstanding (submitted, not yet collected) at once. */
#define GPURED_MAX_OUTSTANDING 65536

/*
 * The send buffer (SO_SNDBUF) gpured_connect() asks for: large arrays
 * cross a Unix socket faster with it than with Linux's default of about
 * 200 KiB (docs/design/socket.md). The kernel caps it at
 * net.core.wmem_max; small requests do not care.
 */
#define GPURED_SNDBUF_BYTES (4 << 20)

typedef struct gpured gpured_t;

typedef enum gpured_op {
	GPURED_OP_SUM,
	GPURED_OP_MIN,
	GPURED_OP_MAX,
	GPURED_OP_SUMSQ,
	GPURED_OP_ARGMIN, /* the min, and the index of its first element */
	GPURED_OP_ARGMAX, /* the max, and the index of its first element */
	GPURED_OP_MOMENTS, /* count, sum, min, max, mean, var: gpured_reduce_moments() */
} gpured_op;

typedef enum gpured_dtype {
	GPURED_I32,
	GPURED_I64,
	GPURED_U32,
	GPURED_U64,
	GPURED_F32,
	GPURED_F64,
	/* Narrow dtypes: every op gives what it gives for the elements
	 * widened exactly, the floats to float, the integers to int32_t or
	 * uint32_t. C has no type for the floats: pass their bits
	 * (uint16_t, uint8_t), little-endian like every element. */
	GPURED_F16,    /* IEEE binary16 */
	GPURED_BF16,   /* bfloat16 */
	GPURED_F8E4M3, /* OCP float8 E4M3 ("fn": no infinities) */
	GPURED_F8E5M2, /* OCP float8 E5M2 */
	GPURED_I8,
	GPURED_U8,
	GPURED_I16,
	GPURED_U16,
} gpured_dtype;

/*
 * The kind of number a reduction returns: int64 for sum/min/max of signed
 * integers, uint64 for sum/min/max of unsigned integers, double for every
 * float reduction and for every sumsq (see gpured_result_kind()).
 */
typedef enum gpured_kind {
	GPURED_KIND_I64,
	GPURED_KIND_U64,
	GPURED_KIND_F64,
} gpured_kind;

typedef struct gpured_value {
	gpured_kind kind;
	union {
		int64_t i;
		uint64_t u;
		double f;
	} v;
	uint64_t count; /* elements the server reduced */
	/* argmin, argmax: the index of the first element equal to v (the
	 * first NaN when v is NaN), counted from the first element reduced;
	 * 0 for the other ops */
	uint64_t index;
} gpured_value;

/* Names as on the wire ("sum", "f32"); NULL when out of range. */
const char *gpured_op_name(gpured_op op);
const char *gpured_dtype_name(gpured_dtype dt);
/* Parse a NUL-terminated wire name: 0 or -EINVAL. */
int gpured_op_parse(const char *s, gpured_op *ret);
int gpured_dtype_parse(const char *s, gpured_dtype *ret);
/* Bytes per element of dt; 0 when out of range. */
size_t gpured_dtype_size(gpured_dtype dt);
gpured_kind gpured_result_kind(gpured_op op, gpured_dtype dt);
/* The value as a double, whatever its kind. */
double gpured_value_as_double(const gpured_value *v);

/*
 * The socket path a connection to path would use: path itself if not NULL,
 * else $GPURED_SOCKET if set and non-empty, else the daemon's default:
 * /run/gpured.sock when running as root, else $XDG_RUNTIME_DIR/gpured.sock,
 * else /run/gpured.sock. Writes it NUL-terminated to buf[0..size).
 * Returns 0, or -ENAMETOOLONG if it does not fit (or does not fit in a
 * sockaddr_un).
 */
int gpured_socket_path(const char *path, char *buf, size_t size);

/*
 * Connect to the daemon at path (resolved as gpured_socket_path() does).
 * On success *ret is a new handle, to be freed with gpured_close().
 * Returns 0 or the connect errno (-ENOENT, -ECONNREFUSED, -EACCES, ...).
 */
int gpured_connect(const char *path, gpured_t **ret);
/* Close the connection and free the handle; NULL is fine. Requests still
 * outstanding are dropped. */
void gpured_close(gpured_t *g);
/*
 * Give up when the server makes no progress (accepts no bytes, sends no
 * reply) for timeout_ms while a call waits: the call then fails with
 * -ETIMEDOUT and the connection is dead. Negative: wait for ever (the
 * default).
 */
void gpured_set_timeout(gpured_t *g, int timeout_ms);
/*
 * Before a call sleeps waiting for a reply, read the socket without
 * blocking for up to spin_us microseconds (0, the default: never; at most
 * GPURED_SPIN_MAX_US). A reply that comes within that time finds the
 * thread awake, which saves the scheduler's wake-up (a few microseconds,
 * more on virtual machines) for a CPU kept busy meanwhile: worth it for
 * one small request at a time, where the round trip is the cost.
 */
#define GPURED_SPIN_MAX_US 1000000u
void gpured_set_spin(gpured_t *g, unsigned spin_us);

/* The socket's file descriptor (for poll(); do not read or write it). */
int gpured_fd(const gpured_t *g);

/*
 * Reduce n elements of type dt at data with op and wait for the result.
 * data holds the elements packed in the machine's (little-endian) layout.
 * Arrays of 2^32 bytes or more return -E2BIG without sending anything.
 * Other requests may be outstanding; their replies are kept for
 * gpured_wait().
 */
int gpured_reduce(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  gpured_value *ret);

/* Shorthands for the two commonest reductions. */
int gpured_sum_f32(gpured_t *g, const float *x, size_t n, double *ret);
int gpured_sum_i64(gpured_t *g, const int64_t *x, size_t n, int64_t *ret);
/*
 * The sums of the narrow dtypes: the integers' exact, the floats' the
 * exact sum rounded once to a double. C has no type for the narrow
 * floats: x holds their bits (uint16_t for f16 and bf16, uint8_t for
 * f8e4m3 and f8e5m2).
 */
int gpured_sum_i8(gpured_t *g, const int8_t *x, size_t n, int64_t *ret);
int gpured_sum_u8(gpured_t *g, const uint8_t *x, size_t n, uint64_t *ret);
int gpured_sum_i16(gpured_t *g, const int16_t *x, size_t n, int64_t *ret);
int gpured_sum_u16(gpured_t *g, const uint16_t *x, size_t n, uint64_t *ret);
int gpured_sum_f16(gpured_t *g, const uint16_t *x, size_t n, double *ret);
int gpured_sum_bf16(gpured_t *g, const uint16_t *x, size_t n, double *ret);
int gpured_sum_f8e4m3(gpured_t *g, const uint8_t *x, size_t n, double *ret);
int gpured_sum_f8e5m2(gpured_t *g, const uint8_t *x, size_t n, double *ret);

/* Ask the server for "pong". */
int gpured_ping(gpured_t *g);

/*
 * Pipelining. gpured_submit() sends one reduce request and returns its id
 * in *ret_id without waiting for the reply. It returns when the whole
 * request has been written to the socket, so data may be reused or freed
 * as soon as it returns. While it writes it also reads replies that arrive
 * and keeps them, so the client and the server never both block on full
 * socket buffers. Ids are non-zero. At most GPURED_MAX_OUTSTANDING requests
 * may be outstanding; one more returns -EAGAIN.
 */
int gpured_submit(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
		  uint32_t *ret_id);

/*
 * Collect the result of any one outstanding request, waiting for one to
 * complete if none has yet. *ret_id is the request's id. Returns 0, or the
 * request's server error (then *ret_id names it and the handle is still
 * usable), or a connection error (then *ret_id is 0), or -ECHILD if
 * nothing is outstanding.
 */
int gpured_wait(gpured_t *g, uint32_t *ret_id, gpured_value *ret);

/* Collect the result of request id, waiting for it. -ESRCH if id is not
 * outstanding. Other replies that arrive meanwhile are kept. */
int gpured_wait_id(gpured_t *g, uint32_t id, gpured_value *ret);

/* Requests submitted and not yet collected. */
unsigned gpured_outstanding(const gpured_t *g);

/*
 * Shared-memory regions (PROTOCOL.md, "map"): memory the daemon reads in
 * place, so that a reduction sends a few dozen bytes however large its
 * array, and the same memory can be reduced again and again.
 *
 * gpured_region_new() makes a memfd of bytes, sealed against shrinking,
 * maps it read-write in this process and hands it to the daemon over g.
 * Write elements at gpured_region_data(), then reduce any part of it by
 * byte offset (no alignment needed) and element count, synchronously or
 * pipelined like gpured_submit() (the replies are collected with
 * gpured_wait()/gpured_wait_id()). A region belongs to the connection
 * that made it: use it with that g only, and free it with
 * gpured_region_free() before gpured_close(g) (after gpured_close() the
 * daemon has released its side; gpured_region_free(NULL, r) then frees
 * ours).
 *
 * Ordering: the daemon reads the elements while a request runs. Write a
 * request's elements before submitting it, and do not write them again
 * until its result is collected: a write meanwhile makes that result
 * unspecified (never an error or a crash).
 *
 * Returns 0 or a negative errno, as everywhere: -EINVAL (invalid_params:
 * a range outside the region, an unknown region...), -E2BIG (too_large:
 * over the daemon's mapped-bytes limits), and the local errors of
 * memfd_create(), ftruncate() and mmap().
 */
typedef struct gpured_region gpured_region_t;

int gpured_region_new(gpured_t *g, size_t bytes, gpured_region_t **ret);

/*
 * Flags of gpured_region_new_flags(), gpured_map_fd_flags() and the
 * device maps' gpured_map_cuda_fd_flags() and gpured_map_cuda_ipc_flags();
 * 0 is what gpured_region_new(), gpured_map_fd() and so on do.
 * GPURED_REGION_WRITABLE: the daemon maps the region for writing too, so
 * that a cumsum can write its prefix sums there (gpured_cumsum_region());
 * it writes nothing else. Unknown flags return -EINVAL.
 */
enum {
	GPURED_REGION_WRITABLE = 1,
};

int gpured_region_new_flags(gpured_t *g, size_t bytes, unsigned flags, gpured_region_t **ret);
/* Where the region's bytes are, read-write, in this process. */
void *gpured_region_data(const gpured_region_t *r);
size_t gpured_region_size(const gpured_region_t *r);
/* 1 when the daemon maps r for writing (GPURED_REGION_WRITABLE), else 0. */
int gpured_region_writable(const gpured_region_t *r);
/* The daemon's id of the region (what gpured_reduce_region() takes). */
uint64_t gpured_region_id(const gpured_region_t *r);
int gpured_region_reduce(gpured_t *g, const gpured_region_t *r, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, gpured_value *ret);
int gpured_region_submit(gpured_t *g, const gpured_region_t *r, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, uint32_t *ret_id);
/* Unmap it in the daemon (waiting for the reply) and here; NULL is fine. */
int gpured_region_free(gpured_t *g, gpured_region_t *r);

/*
 * The same by hand, for memory the caller made: fd is a memfd at least
 * bytes long, sealed with F_SEAL_SHRINK (it stays the caller's; the
 * daemon maps its own view). *ret_region is the daemon's id for it.
 */
int gpured_map_fd(gpured_t *g, int fd, size_t bytes, uint64_t *ret_region);
/* With GPURED_REGION_WRITABLE, fd must be open for reading and writing
 * and not sealed against writing (the daemon refuses it otherwise). */
int gpured_map_fd_flags(gpured_t *g, int fd, size_t bytes, unsigned flags, uint64_t *ret_region);

/*
 * Device memory, reduced on its GPU where it lies (PROTOCOL.md, "map",
 * kinds cuda and cuda_ipc). device names the GPU by its UUID ("GPU-...",
 * as nvidia-smi -L and info's "uuid" say) or PCI bus id.
 * gpured_map_cuda_fd(): fd is a CUDA virtual-memory allocation exported
 * with cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
 * (it stays the caller's). gpured_map_cuda_ipc(): handle is the 64 bytes
 * of a cudaIpcMemHandle_t of cudaMalloc memory; the daemon serves it only
 * when its operator allows (--allow-cuda-ipc). Then reduce it with
 * gpured_reduce_region() and free it with gpured_unmap().
 * Ordering: the daemon reads what the client's stream had finished when
 * the request was sent: synchronise the stream that wrote the data first.
 *
 * The _flags variants take GPURED_REGION_WRITABLE: the daemon maps the
 * memory for reading and writing on its device, so that a cumsum of GPU
 * memory of the same device can write its prefix sums there
 * (gpured_cumsum_region(); the GPU writes them before the reply comes).
 * Flags 0 is what gpured_map_cuda_fd() and gpured_map_cuda_ipc() do
 * (read-only); unknown flags return -EINVAL.
 */
int gpured_map_cuda_fd(gpured_t *g, int fd, size_t bytes, const char *device,
		       uint64_t *ret_region);
int gpured_map_cuda_fd_flags(gpured_t *g, int fd, size_t bytes, const char *device,
			     unsigned flags, uint64_t *ret_region);
/*
 * A range of several CUDA allocations mapped back to back in the caller's
 * address space (as PyTorch's expandable segments map a large tensor), as
 * one region: fds[i] is allocation i exported as a file descriptor and
 * sizes[i] the bytes of the range it gives; every size but the last a
 * whole number of the device's allocation granules (PROTOCOL.md,
 * "map_part"). The descriptors stay the caller's. On an error the region
 * is unmapped, and gpured_errmsg() says why. flags: as for
 * gpured_map_cuda_fd_flags().
 */
int gpured_map_cuda_fds(gpured_t *g, const int *fds, const size_t *sizes, size_t n,
			const char *device, unsigned flags, uint64_t *ret_region);
int gpured_map_cuda_ipc(gpured_t *g, const void *handle, size_t bytes, const char *device,
			uint64_t *ret_region);
int gpured_map_cuda_ipc_flags(gpured_t *g, const void *handle, size_t bytes, const char *device,
			      unsigned flags, uint64_t *ret_region);
int gpured_unmap(gpured_t *g, uint64_t region);
int gpured_reduce_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, gpured_value *ret);
int gpured_submit_region(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
			 size_t offset, size_t n, uint32_t *ret_id);

/*
 * moments (PROTOCOL.md, "moments"): count, sum, min, max, mean and
 * variance in one pass. sum, min and max are exactly what GPURED_OP_SUM,
 * _MIN and _MAX give for the same elements (of gpured_result_kind()'s
 * kind, count set); mean and var are doubles for every dtype: the exact
 * mean S1 / n and variance (S2 - S1^2 / n) / (n - ddof) of the elements
 * (S1, S2 the exact sums of the elements and of their squares), each
 * rounded once to nearest. A NaN element makes both NaN; infinities make
 * mean what sum is and var NaN.
 *
 * Returns 0 or a negative errno: -ENODATA (empty) for no elements,
 * -EINVAL when ddof is not less than n. gpured_submit_moments() and
 * gpured_submit_region_moments() pipeline like gpured_submit(); collect
 * the result with gpured_wait_id_moments() (gpured_wait() and
 * gpured_wait_id() give only its sum). gpured_reduce(GPURED_OP_MOMENTS)
 * likewise gives its sum, with ddof 0.
 */
typedef struct gpured_moments {
	uint64_t count;
	gpured_value sum, min, max;
	double mean, var;
} gpured_moments;

int gpured_reduce_moments(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			  uint64_t ddof, gpured_moments *ret);
int gpured_submit_moments(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			  uint64_t ddof, uint32_t *ret_id);
int gpured_reduce_region_moments(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				 size_t n, uint64_t ddof, gpured_moments *ret);
int gpured_submit_region_moments(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				 size_t n, uint64_t ddof, uint32_t *ret_id);
int gpured_region_reduce_moments(gpured_t *g, const gpured_region_t *r, gpured_dtype dt,
				 size_t offset, size_t n, uint64_t ddof, gpured_moments *ret);
/* The result of moments request id (waiting for it); -ESRCH if id is not
 * an outstanding moments request. */
int gpured_wait_id_moments(gpured_t *g, uint32_t id, gpured_moments *ret);

/*
 * Segmented reduces (PROTOCOL.md, "Segments"): one result per segment of
 * the elements, as x.sum(axis=1) gives one per row of a matrix. offsets
 * holds nseg + 1 element offsets, offsets[0] = 0 <= offsets[1] <= ... <=
 * offsets[nseg] = n, and segment i is the elements [offsets[i],
 * offsets[i + 1]). Every op and dtype takes them, with data or a region;
 * ddof is moments' (the variance of each segment divides by its length -
 * ddof) and must be 0 for the other ops. The offsets are sent straight
 * from the caller's memory, as the data are.
 *
 * The result is nseg records, one per segment in order, written packed to
 * records[0..records_bytes), which must hold nseg *
 * gpured_segment_record_bytes(op) bytes. Each record is what the op gives
 * for that segment alone (but an integer sumsq may differ in its last
 * bits: PROTOCOL.md says when), in the machine's (little-endian) layout,
 * typed as the result table says (gpured_result_kind(op, dt): the i, u or
 * f of a gpured_number):
 *
 *   sum, min, max, sumsq   one gpured_number               8 bytes
 *   argmin, argmax         a gpured_arg_record: the value
 *                          and the index of its first
 *                          element, counted from the
 *                          segment's first element         16 bytes
 *   moments                a gpured_moments_record: sum,
 *                          min, max (of the result kind),
 *                          mean and var (double)           40 bytes
 *
 * An empty segment is no error: its record holds the op's identity. sum
 * 0 (of its kind), sumsq 0.0; min the dtype's largest value (+inf for
 * floats) and max its smallest (-inf); argmin and argmax that value with
 * index GPURED_SEGMENT_NO_INDEX; moments sum 0, min and max as for min
 * and max, mean and var NaN. A segment of moments no longer than ddof has
 * var NaN.
 *
 * The library checks what costs nothing before it sends: nseg >= 1,
 * offsets[0] == 0, offsets[nseg] == n, records_bytes large enough, no
 * ddof for other ops than moments (each -EINVAL, nothing sent), and that
 * the offsets fit a request (-E2BIG). The daemon checks the rest and
 * answers with its message: offsets that decrease (-EINVAL), more segments
 * than its limits.max_segments (-E2BIG; info says how many, 2097152 by
 * default), a ddof not below n (-EINVAL). A reply whose records do not
 * match the request ends the connection with -EPROTO.
 *
 * gpured_submit_segments() and the region forms pipeline like
 * gpured_submit(); collect the records with gpured_wait_id_segments(),
 * which returns -ESRCH if id is not outstanding and -EINVAL (leaving it
 * outstanding) if it is not a segmented request or its records do not fit
 * records_bytes. records may be NULL (records_bytes 0) to drop them.
 * Until a request is collected, the library keeps its reply's records (up
 * to 40 bytes a segment).
 * gpured_wait() and gpured_wait_id() collect segmented requests too,
 * dropping the records (the value's count is n, its value 0).
 */
typedef union gpured_number {
	int64_t i;
	uint64_t u;
	double f;
} gpured_number;

/* The index of an empty segment's argmin or argmax record: 2^64 - 1. */
#define GPURED_SEGMENT_NO_INDEX UINT64_MAX

typedef struct gpured_arg_record {
	gpured_number value;
	uint64_t index;
} gpured_arg_record;

typedef struct gpured_moments_record {
	gpured_number sum, min, max;
	double mean, var;
} gpured_moments_record;

/* Bytes of one record of op: 8, 16 or 40; 0 when op is out of range. */
size_t gpured_segment_record_bytes(gpured_op op);

int gpured_reduce_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, void *records,
			   size_t records_bytes);
int gpured_submit_segments(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			   const uint64_t *offsets, size_t nseg, uint64_t ddof, uint32_t *ret_id);
/* n elements of region at byte offset offset. */
int gpured_reduce_region_segments(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				  size_t offset, size_t n, const uint64_t *offsets, size_t nseg,
				  uint64_t ddof, void *records, size_t records_bytes);
int gpured_submit_region_segments(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				  size_t offset, size_t n, const uint64_t *offsets, size_t nseg,
				  uint64_t ddof, uint32_t *ret_id);
int gpured_region_reduce_segments(gpured_t *g, const gpured_region_t *r, gpured_op op,
				  gpured_dtype dt, size_t offset, size_t n, const uint64_t *offsets,
				  size_t nseg, uint64_t ddof, void *records, size_t records_bytes);
int gpured_region_submit_segments(gpured_t *g, const gpured_region_t *r, gpured_op op,
				  gpured_dtype dt, size_t offset, size_t n, const uint64_t *offsets,
				  size_t nseg, uint64_t ddof, uint32_t *ret_id);
int gpured_wait_id_segments(gpured_t *g, uint32_t id, void *records, size_t records_bytes);

/*
 * Prefix sums (PROTOCOL.md, "cumsum"): value i is the sum of elements 0
 * to i, of gpured_result_kind(GPURED_OP_SUM, dt): int64_t for the signed
 * integers, uint64_t for the unsigned ones, double for the floats (the
 * narrow ones included), 8 bytes each in
 * the machine's (little-endian) layout. Integers wrap modulo 2^64 as sums
 * do; float prefix sums follow the one order PROTOCOL.md defines, so
 * their bits never depend on how the request travels.
 *
 * gpured_cumsum() sends n elements of dt from data and writes their n
 * prefix sums to out (n values of 8 bytes), as the reply arrives. The
 * daemon streams the values back while the elements still go out (the
 * library reads as it writes); n may be up to GPURED_CUMSUM_MAX
 * (536870911, the values of a reply below 4 GiB): more returns -E2BIG
 * without sending anything. gpured_submit_cumsum() pipelines it, like
 * gpured_submit(); gpured_wait_id_cumsum() collects the values into out,
 * which must hold out_n >= n values (-EINVAL otherwise, leaving the
 * request outstanding), or drops them when out is NULL; it returns
 * -ESRCH if id is not outstanding and -EINVAL (left outstanding) if it is
 * not a cumsum of data. Until a request is collected the library keeps
 * its values (8 bytes an element). gpured_wait() and gpured_wait_id()
 * collect it too, dropping the values (the value's count is n, its value
 * 0).
 *
 * Of a region: gpured_cumsum_region() reads n elements of dt at byte
 * offset of region and the daemon writes their prefix sums into
 * out_region from its byte out_offset (a multiple of 8) on, n * 8 bytes
 * and nothing else of it; nothing but the request and a count crosses the
 * socket. out_region must be a region of this connection mapped for
 * writing (gpured_region_new_flags() or gpured_map_fd_flags() with
 * GPURED_REGION_WRITABLE); it may be the input's region, apart from the
 * elements, or exactly over them for 8-byte dtypes (in place). The
 * output lies where the input does: host memory for a shared-memory
 * region; for device memory, GPU memory of the same device mapped with
 * gpured_map_cuda_fd_flags() or gpured_map_cuda_ipc_flags() and
 * GPURED_REGION_WRITABLE, which that GPU scans in place (offset a
 * multiple of the element size). The daemon refuses with -EINVAL, and
 * says why in gpured_errmsg(), an out region that is read-only, unknown,
 * too small, of the other kind of memory or on another device, an
 * out_offset that is not a multiple of 8, a device offset that splits an
 * element, or any other overlap. gpured_submit_cumsum_region() pipelines
 * it; collect it with gpured_wait() or gpured_wait_id() (the count is
 * n). gpured_region_cumsum() and gpured_region_submit_cumsum()
 * take region objects, and refuse a read-only out region before sending
 * (-EINVAL).
 *
 * Ordering, as for every region: write the elements before sending, and
 * read the prefix sums only once the request is collected (until then the
 * daemon may still be writing them).
 */
#define GPURED_CUMSUM_MAX ((size_t)(UINT32_MAX / 8))

int gpured_cumsum(gpured_t *g, gpured_dtype dt, const void *data, size_t n, void *out);
int gpured_submit_cumsum(gpured_t *g, gpured_dtype dt, const void *data, size_t n,
			 uint32_t *ret_id);
int gpured_wait_id_cumsum(gpured_t *g, uint32_t id, void *out, size_t out_n);
int gpured_cumsum_region(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset, size_t n,
			 uint64_t out_region, size_t out_offset);
int gpured_submit_cumsum_region(gpured_t *g, uint64_t region, gpured_dtype dt, size_t offset,
				size_t n, uint64_t out_region, size_t out_offset, uint32_t *ret_id);
int gpured_region_cumsum(gpured_t *g, const gpured_region_t *r, gpured_dtype dt, size_t offset,
			 size_t n, const gpured_region_t *out, size_t out_offset);
int gpured_region_submit_cumsum(gpured_t *g, const gpured_region_t *r, gpured_dtype dt,
				size_t offset, size_t n, const gpured_region_t *out,
				size_t out_offset, uint32_t *ret_id);

/*
 * Exact partials (PROTOCOL.md, "Exact partials"). A float sum or sumsq
 * is the exact sum of the elements (of their exact squares) rounded once;
 * its partial is that exact sum before rounding, so that an array split
 * into pieces, reduced by separate requests, daemons or hosts, comes to
 * the bits one request over the whole array gives:
 *
 *     gpured_partial acc, p;
 *     gpured_partial_init(&acc, GPURED_OP_SUM, GPURED_F32);
 *     for each piece:   gpured_reduce_partial(g, GPURED_OP_SUM, GPURED_F32,
 *                                             piece, n, &p);
 *                       gpured_partial_combine(&acc, &p);
 *     gpured_partial_round(&acc, &sum);
 *
 * in any order of the pieces. A gpured_partial is a plain value: copy it,
 * keep it, send its fields elsewhere and fill one by hand from them.
 *
 * Its value is limbs[0..nlimbs) x 2^scale: limbs a two's complement
 * integer of 64-bit words, least significant word first (each word a
 * native uint64_t; on the wire they are little-endian). specials are
 * GPURED_PARTIAL_NAN (a NaN was among the elements), _PINF (a +inf; for
 * sumsq any infinity), _NINF (a -inf) and _NEGZERO (there was an element
 * and every one was -0). count is the number of elements.
 *
 * A partial is valid when nlimbs <= GPURED_PARTIAL_LIMBS_MAX (68), scale
 * lies in [GPURED_PARTIAL_SCALE_MIN, GPURED_PARTIAL_SCALE_MAX] (-2176 ..
 * 2175), the value fits 68 words at scale -2176 (a multiple of 2^-2176
 * with -2^2175 <= value < 2^2175), specials has no other bits, a partial
 * of count 0 is zero with no specials, and _NEGZERO comes alone with a
 * zero value. The exact sum or sumsq of any float elements, up to
 * 2^64 - 1 of them, is always in range (a multiple of 2^-2148 below
 * 2^2112), and so is any combination of such partials.
 */
#define GPURED_PARTIAL_LIMBS_MAX 68
#define GPURED_PARTIAL_SCALE_MIN (-2176)
#define GPURED_PARTIAL_SCALE_MAX 2175

enum {
	GPURED_PARTIAL_NAN = 1,
	GPURED_PARTIAL_PINF = 2,
	GPURED_PARTIAL_NINF = 4,
	GPURED_PARTIAL_NEGZERO = 16,
};

typedef struct gpured_partial {
	gpured_op op;       /* GPURED_OP_SUM or GPURED_OP_SUMSQ */
	gpured_dtype dtype; /* a float dtype: f32, f64, f16, bf16, f8e4m3, f8e5m2 */
	uint64_t count;     /* elements */
	int32_t scale;
	uint32_t specials;
	uint32_t nlimbs;
	uint64_t limbs[GPURED_PARTIAL_LIMBS_MAX];
} gpured_partial;

/* The partial of no elements, for a float (f32, f64, or narrow) sum or sumsq:
 * 0, or -EINVAL for any other op and dtype. */
int gpured_partial_init(gpured_partial *ret, gpured_op op, gpured_dtype dt);

/*
 * acc becomes the partial of acc's elements and next's, exactly: the
 * values added at a common scale, the specials joined. Either order gives
 * the same partial. The result is canonical: zero has nlimbs 0 and scale
 * 0; any other value an odd limbs[0], the fewest words, and 0 in the
 * words past nlimbs, so equal values have equal limbs and scale.
 * Returns 0; -EINVAL when either is not valid or their op or dtype
 * differ; -ERANGE when the count would pass 2^64 - 1 or the value leave
 * the range (more than 2^64 elements' worth). acc is untouched on failure.
 */
int gpured_partial_combine(gpured_partial *acc, const gpured_partial *next);

/*
 * Round p's value once to a double in *ret, as the daemon rounds the
 * whole array: NaN if a NaN was among the elements or both +inf and
 * -inf were; else +inf or -inf if one was; else the exact value rounded
 * to nearest, ties to even (+-inf past the largest finite double). A zero
 * value is -0.0 only with GPURED_PARTIAL_NEGZERO (every element of every
 * piece with elements was -0), else +0.0. Returns 0 or -EINVAL when p is
 * not valid.
 */
int gpured_partial_round(const gpured_partial *p, double *ret);

/*
 * Requests with "partial": true, of a float sum or sumsq, as
 * gpured_reduce(), gpured_submit(), gpured_reduce_region() and
 * gpured_submit_region() but for the partial; other ops and dtypes
 * return -EINVAL without sending anything. The daemon's rounded value is
 * gpured_partial_round() of it (the library checks that they agree).
 * A reply whose partial is malformed or out of range ends the connection
 * with -EPROTO, and gpured_errmsg() says what was wrong.
 */
int gpured_reduce_partial(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			  gpured_partial *ret);
int gpured_submit_partial(gpured_t *g, gpured_op op, gpured_dtype dt, const void *data, size_t n,
			  uint32_t *ret_id);
int gpured_reduce_region_partial(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				 size_t offset, size_t n, gpured_partial *ret);
int gpured_submit_region_partial(gpured_t *g, uint64_t region, gpured_op op, gpured_dtype dt,
				 size_t offset, size_t n, uint32_t *ret_id);
int gpured_region_reduce_partial(gpured_t *g, const gpured_region_t *r, gpured_op op,
				 gpured_dtype dt, size_t offset, size_t n, gpured_partial *ret);
int gpured_region_submit_partial(gpured_t *g, const gpured_region_t *r, gpured_op op,
				 gpured_dtype dt, size_t offset, size_t n, uint32_t *ret_id);

/*
 * Collect a request submitted by a *_submit_partial() function, with its
 * partial. gpured_wait_partial() takes any one of them whose reply came
 * (in the order they came), waiting for one if none has, and leaves the
 * other requests outstanding; -ECHILD when no partial request is
 * outstanding. gpured_wait_id_partial() takes request id; -ESRCH if it is
 * not outstanding, -EINVAL (left outstanding) if it was not submitted for
 * a partial. Errors as gpured_wait() and gpured_wait_id(). gpured_wait()
 * and gpured_wait_id() collect partial requests too, with the rounded
 * value only.
 */
int gpured_wait_partial(gpured_t *g, uint32_t *ret_id, gpured_partial *ret);
int gpured_wait_id_partial(gpured_t *g, uint32_t id, gpured_partial *ret);

/*
 * The server's counters ("stats"; PROTOCOL.md says what each means).
 * Fields the server did not send are 0 (backend: empty).
 */
typedef struct gpured_stats_t {
	double uptime_s;
	char backend[64];
	uint64_t connections;         /* open now */
	uint64_t connections_total;   /* accepted since start */
	uint64_t connections_refused; /* of those, refused with busy */
	uint64_t requests;            /* answered */
	uint64_t errors;              /* of those, answered with an error */
	uint64_t bytes_in;
	uint64_t elements;            /* elements reduced */
	uint64_t batches;             /* backend submissions */
	double batch_mean;            /* requests per batch */
	uint64_t inflight;            /* read, not yet answered */
	uint64_t devices;
	uint64_t devices_healthy;
	double latency_p50_us;        /* last byte of a request to its response */
	double latency_p99_us;
	double latency_max_us;
} gpured_stats_t;

int gpured_stats(gpured_t *g, gpured_stats_t *ret);

/*
 * One look at the daemon for a monitor (gpuredctl top): the counters of
 * "stats", its request-latency histogram, and each device of "info" with
 * its jobs and the device-memory regions mapped on it. Two calls to the
 * server, stats first. Rates and interval percentiles come from the
 * difference of two snapshots; the counters only grow while the daemon
 * runs. Fields the server did not send are 0; devices and buckets past
 * the arrays' sizes are left out.
 */
#define GPURED_SNAPSHOT_DEVICES 32
#define GPURED_SNAPSHOT_BUCKETS 32

typedef struct gpured_device_snapshot_t {
	uint64_t index;
	char kind[8];          /* "cuda" or "cpu" */
	char name[128];
	int healthy;           /* in service */
	uint64_t jobs;         /* jobs run on it since start */
	uint64_t regions;      /* device-memory regions mapped on it now */
	uint64_t region_bytes; /* their bytes */
} gpured_device_snapshot_t;

typedef struct gpured_snapshot_t {
	char version[32];       /* the daemon's */
	double uptime_s;        /* the daemon's clock, for the interval */
	uint64_t requests;      /* answered, of every method (these two
	                         * calls count too) */
	uint64_t errors;
	uint64_t inflight;
	uint64_t connections;
	/* request bytes by the path they came: read from the socket, reduced
	 * in place from shared memory, from device memory */
	uint64_t bytes_socket, bytes_shm, bytes_device;
	uint64_t regions;       /* regions mapped now, of every kind */
	uint64_t mapped_bytes;  /* bytes of the shared-memory ones */
	unsigned ndevices;
	gpured_device_snapshot_t devices[GPURED_SNAPSHOT_DEVICES];
	/* The latency of every reduction since start, a cumulative histogram:
	 * counts[i] took at most le_us[i] microseconds; count is all of them,
	 * sum_us their total. nbuckets 0: the daemon sent none. */
	unsigned nbuckets;
	uint64_t le_us[GPURED_SNAPSHOT_BUCKETS];
	uint64_t counts[GPURED_SNAPSHOT_BUCKETS];
	uint64_t count;
	double sum_us;
} gpured_snapshot_t;

int gpured_snapshot(gpured_t *g, gpured_snapshot_t *ret);

typedef enum gpured_format {
	GPURED_FORMAT_JSON,        /* one line of JSON */
	GPURED_FORMAT_JSON_PRETTY, /* indented JSON, ending in a newline */
	GPURED_FORMAT_TEXT,        /* a readable "key  value" table */
} gpured_format;

/*
 * The server's "stats" or "info" reply rendered whole, with every field the
 * server sent, as JSON or as a readable table. *ret is a NUL-terminated
 * string the caller frees with free().
 */
int gpured_stats_format(gpured_t *g, gpured_format fmt, char **ret);
int gpured_info_format(gpured_t *g, gpured_format fmt, char **ret);
/*
 * The server's stats and info as Prometheus metrics: the text exposition
 * format 0.0.4, the same the daemon serves on --metrics-listen (gpured(8)
 * lists the names). Two calls to the server. *ret is a NUL-terminated
 * string the caller frees with free().
 */
int gpured_metrics_format(gpured_t *g, char **ret);
/* Shorthands for GPURED_FORMAT_JSON. */
int gpured_stats_json(gpured_t *g, char **ret);
int gpured_info_json(gpured_t *g, char **ret);

/*
 * The message of the last failure on g: the server's error message, or a
 * local description. Never NULL; valid until the next call on g.
 */
const char *gpured_errmsg(const gpured_t *g);
/* The server's error code name ("too_large", ...) of the last failure, or
 * NULL if the last failure was local. */
const char *gpured_errcode(const gpured_t *g);

/* The negative errno a server error code name maps to (-EIO if unknown). */
int gpured_errno_from_code(const char *code);
/* A description of a code returned by this library (static storage). */
const char *gpured_strerror(int err);

/*
 * In this process. gpured_local_reduce(), _partial() and _moments() give
 * what gpured_reduce(), gpured_reduce_partial() and
 * gpured_reduce_moments() give for the same elements, the same bits,
 * computed here with the daemon's own kernels and no connection: for
 * arrays in this process's own memory, where reducing them costs less
 * than sending them. threads: at most this many threads share the work
 * (0 or 1: the calling thread alone; each thread takes two blocks of
 * 32,768 elements at least). Returns 0, -ENODATA for min, max, argmin,
 * argmax and moments of no elements, -EINVAL for an op or dtype out of
 * range (or moments to _reduce, a ddof not below n, or an op or dtype
 * without partials to _partial), -ENOMEM.
 */
int gpured_local_reduce(gpured_op op, gpured_dtype dt, const void *data, size_t n,
			unsigned threads, gpured_value *ret);
int gpured_local_partial(gpured_op op, gpured_dtype dt, const void *data, size_t n,
			 unsigned threads, gpured_partial *ret);
int gpured_local_moments(gpured_dtype dt, const void *data, size_t n, uint64_t ddof,
			 unsigned threads, gpured_moments *ret);
/*
 * What moments is made of, for joining with the same of other pieces of
 * an array (elsewhere, in any order): the min and max (as
 * gpured_local_reduce() gives them) and the exact sums of the elements
 * and of their squares, as partials of sum and sumsq of dt (of f64 for
 * an integer dtype, whose sums they hold exactly), in one pass. n >= 1:
 * -ENODATA for no elements.
 */
int gpured_local_moments_parts(gpured_dtype dt, const void *data, size_t n, unsigned threads,
			       gpured_value *ret_min, gpured_value *ret_max,
			       gpured_partial *ret_s1, gpured_partial *ret_s2);

#ifdef __cplusplus
}
#endif
