/*
 * The CUDA backend's register_host and unregister_host (engine/backend.h).
 */
#pragma once

#include <stddef.h>

#include "engine/backend.h"

int cuda_register_host(gr_backend *b, const void *p, size_t bytes, bool writable, void **ret_reg,
		       char *why, size_t whylen);
void cuda_unregister_host(gr_backend *b, void *reg);
