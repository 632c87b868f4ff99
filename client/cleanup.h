/*
 * util/cleanup.h's scope-bound cleanup, and the cleanups of the wire
 * layer's types that libgpured and gpuredctl free by scope.
 */
#pragma once

#include "proto/mp.h"
#include "proto/obj.h"
#include "util/cleanup.h"

static inline void gr_obj_tree_deinitp(gr_obj_tree *t)
{
	gr_obj_tree_deinit(t);
}

static inline void gr_buf_deinitp(gr_buf *b)
{
	gr_buf_deinit(b);
}
