/*
 * The CUDA backend's map_device, unmap_device and copy_to_host
 * (engine/backend.h): device memory that clients exported, imported once
 * and read in place, or copied to the host for the CPU.
 */
#pragma once

#include "engine/backend.h"

int cuda_map_device(gr_backend *b, const gr_device_map *m, gr_device_region *ret, char *why,
		    size_t whylen);
void cuda_unmap_device(gr_backend *b, gr_device_region *r);
int cuda_map_device_part(gr_backend *b, gr_device_region *r, int fd, uint64_t offset,
			 uint64_t bytes, char *why, size_t whylen);
/* copy_to_host (backend.h): a blocking copy on the calling thread. */
int cuda_copy_to_host(gr_backend *b, int device, void *dst, const void *src, size_t bytes,
		      char *why, size_t whylen);
