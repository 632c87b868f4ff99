// The public header from C++: it must compile without extensions and
// link with the C library.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "client/gpured.h"

#define CHECK(c)                                                                      \
	do {                                                                          \
		if (!(c)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			return 1;                                                     \
		}                                                                     \
	} while (0)

int main()
{
	char buf[128];
	gpured_dtype dt;
	gpured_value v = {};

	CHECK(gpured_socket_path("/tmp/x.sock", buf, sizeof(buf)) == 0);
	CHECK(std::strcmp(buf, "/tmp/x.sock") == 0);
	CHECK(gpured_dtype_parse("u64", &dt) == 0 && dt == GPURED_U64);
	CHECK(gpured_result_kind(GPURED_OP_SUMSQ, dt) == GPURED_KIND_F64);
	v.kind = GPURED_KIND_U64;
	v.v.u = 42;
	CHECK(gpured_value_as_double(&v) == 42.0);
	CHECK(gpured_errno_from_code("busy") == -EBUSY);
	gpured_close(nullptr);
	return 0;
}
