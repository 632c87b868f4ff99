/*
 * The CUDA backend's map_device and unmap_device (daemon/backend.h):
 * device memory that clients exported, imported once and read in place.
 */
#pragma once

#include "daemon/backend.h"

int cuda_map_device(gr_backend *b, const gr_device_map *m, gr_device_region *ret, char *why,
		    size_t whylen);
void cuda_unmap_device(gr_backend *b, gr_device_region *r);
