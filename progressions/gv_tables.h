/* The parts of the variant tables, one per source file, joined in gv.cu. */
#pragma once

#include "gv.h"

extern const struct gv_variant gv_reduce_classic[];
extern const size_t gv_reduce_classic_count;
extern const struct gv_variant gv_reduce_modern[];
extern const size_t gv_reduce_modern_count;
extern const struct gv_variant gv_scan_table[];
extern const size_t gv_scan_table_count;
