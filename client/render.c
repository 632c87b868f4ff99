/*
 * libgpured's renderings of the daemon's replies: stats and info as JSON
 * or a readable table (gpured_stats_format, gpured_info_format). The
 * Prometheus exposition is snapshot.c's.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/call.h"
#include "client/cleanup.h"
#include "client/conn.h"
#include "proto/message.h"
#include "proto/mp.h"
#include "proto/obj.h"

/* ---- rendering ------------------------------------------------------ */


static int buf_indent(gr_buf *b, unsigned n)
{
	return gr_buf_printf(b, "%*s", (int)n, "");
}

static int json_string(gr_buf *b, const char *s, size_t n)
{
	int r = gr_buf_append(b, "\"", 1);

	for (size_t i = 0; i < n && r == 0; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			r = gr_buf_printf(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			r = gr_buf_printf(b, "\\u%04x", c);
		else
			r = gr_buf_append(b, &s[i], 1);
	}
	return r ? r : gr_buf_append(b, "\"", 1);
}

static int scalar_text(gr_buf *b, const gr_obj *o, bool json)
{
	switch (o->type) {
	case GR_MP_NIL:
		return gr_buf_printf(b, json ? "null" : "-");
	case GR_MP_BOOL:
		return gr_buf_printf(b, "%s", o->v.b ? "true" : "false");
	case GR_MP_UINT:
		return gr_buf_printf(b, "%llu", (unsigned long long)o->v.u);
	case GR_MP_INT:
		return gr_buf_printf(b, "%lld", (long long)o->v.i);
	case GR_MP_FLOAT:
		if (o->v.f != o->v.f || o->v.f - o->v.f != 0)
			return gr_buf_printf(b, json ? "null" : "%g", o->v.f);
		if (!json)
			return gr_buf_printf(b, "%.15g", o->v.f);
		/* The shortest digits that read back as the same double. */
		for (int prec = 15; prec < 17; prec++) {
			char t[40];

			snprintf(t, sizeof(t), "%.*g", prec, o->v.f);
			if (strtod(t, NULL) == o->v.f)
				return gr_buf_printf(b, "%s", t);
		}
		return gr_buf_printf(b, "%.17g", o->v.f);
	case GR_MP_STR:
		if (json)
			return json_string(b, o->v.str, o->len);
		return gr_buf_printf(b, "%.*s", (int)o->len, o->v.str);
	case GR_MP_BIN:
	case GR_MP_EXT:
		return gr_buf_printf(b, json ? "\"<%u bytes>\"" : "<%u bytes>", o->len);
	default:
		return -EINVAL;
	}
}

static int render_json(gr_buf *b, const gr_obj *o, bool pretty, unsigned depth)
{
	bool is_map = o->type == GR_MP_MAP;
	unsigned n = o->len;
	int r;

	if (!is_map && o->type != GR_MP_ARRAY)
		return scalar_text(b, o, true);
	r = gr_buf_append(b, is_map ? "{" : "[", 1);
	for (unsigned i = 0; i < n && r == 0; i++) {
		if (i)
			r = gr_buf_append(b, ",", 1);
		if (r == 0 && pretty) {
			r = gr_buf_append(b, "\n", 1);
			r = r ? r : buf_indent(b, 2 * (depth + 1));
		}
		if (r == 0 && is_map) {
			const gr_obj *k = &o->v.items[2 * i];

			if (k->type == GR_MP_STR) {
				r = json_string(b, k->v.str, k->len);
			} else {
				/* JSON keys are strings; quote whatever the
				 * key is. */
				gr_buf t;

				gr_buf_init(&t);
				r = render_json(&t, k, false, 0);
				r = r ? r : json_string(b, (const char *)t.data, t.len);
				gr_buf_deinit(&t);
			}
			r = r ? r : gr_buf_printf(b, pretty ? ": " : ":");
			r = r ? r : render_json(b, &o->v.items[2 * i + 1], pretty, depth + 1);
		} else if (r == 0) {
			r = render_json(b, &o->v.items[i], pretty, depth + 1);
		}
	}
	if (r == 0 && pretty && n > 0) {
		r = gr_buf_append(b, "\n", 1);
		r = r ? r : buf_indent(b, 2 * depth);
	}
	return r ? r : gr_buf_append(b, is_map ? "}" : "]", 1);
}

static bool is_container(const gr_obj *o)
{
	return o->type == GR_MP_MAP || o->type == GR_MP_ARRAY;
}

static int render_text(gr_buf *b, const gr_obj *o, unsigned indent);

/* One "key  value" line, or "key:" and the nested value below it. */
static int render_text_entry(gr_buf *b, const gr_obj *key, const gr_obj *val, unsigned indent,
			     unsigned width)
{
	gr_buf kb;
	int r;

	gr_buf_init(&kb);
	r = scalar_text(&kb, key, false);
	r = r ? r : buf_indent(b, indent);
	if (r == 0 && is_container(val) && val->len > 0) {
		bool flat = val->type == GR_MP_ARRAY;

		for (unsigned i = 0; flat && i < val->len; i++)
			flat = !is_container(&val->v.items[i]);
		if (flat) {
			/* A list of scalars fits on one line. */
			r = gr_buf_printf(b, "%-*.*s  ", (int)width, (int)kb.len, (const char *)kb.data);
			for (unsigned i = 0; i < val->len && r == 0; i++) {
				r = i ? gr_buf_printf(b, ", ") : 0;
				r = r ? r : scalar_text(b, &val->v.items[i], false);
			}
			r = r ? r : gr_buf_printf(b, "\n");
		} else {
			r = gr_buf_printf(b, "%.*s:\n", (int)kb.len, (const char *)kb.data);
			r = r ? r : render_text(b, val, indent + 2);
		}
	} else if (r == 0) {
		r = gr_buf_printf(b, "%-*.*s  ", (int)width, (int)kb.len, (const char *)kb.data);
		if (r == 0 && is_container(val))
			r = gr_buf_printf(b, val->type == GR_MP_MAP ? "{}" : "[]");
		else if (r == 0)
			r = scalar_text(b, val, false);
		r = r ? r : gr_buf_printf(b, "\n");
	}
	gr_buf_deinit(&kb);
	return r;
}

static int render_text(gr_buf *b, const gr_obj *o, unsigned indent)
{
	unsigned width = 0;
	int r = 0;

	if (o->type == GR_MP_MAP) {
		for (unsigned i = 0; i < o->len; i++) {
			const gr_obj *k = &o->v.items[2 * i];

			if (k->type == GR_MP_STR && k->len > width)
				width = k->len;
		}
		for (unsigned i = 0; i < o->len && r == 0; i++)
			r = render_text_entry(b, &o->v.items[2 * i], &o->v.items[2 * i + 1], indent, width);
		return r;
	}
	if (o->type == GR_MP_ARRAY) {
		for (unsigned i = 0; i < o->len && r == 0; i++) {
			const gr_obj *it = &o->v.items[i];

			r = buf_indent(b, indent);
			if (r == 0 && is_container(it)) {
				r = gr_buf_printf(b, "[%u]\n", i);
				r = r ? r : render_text(b, it, indent + 2);
			} else if (r == 0) {
				r = gr_buf_printf(b, "[%u]  ", i);
				r = r ? r : scalar_text(b, it, false);
				r = r ? r : gr_buf_printf(b, "\n");
			}
		}
		return r;
	}
	r = buf_indent(b, indent);
	r = r ? r : scalar_text(b, o, false);
	return r ? r : gr_buf_printf(b, "\n");
}

static int call_format(gpured_t *g, gr_method m, gpured_format fmt, char **ret)
{
	_cleanup_(gr_obj_tree_deinitp) gr_obj_tree tree = { 0 };
	_cleanup_(gr_buf_deinitp) gr_buf out = { 0 };
	_cleanup_(freep) uint8_t *bytes = NULL;
	const gr_obj *res = NULL;
	int r;

	if ((unsigned)fmt > GPURED_FORMAT_TEXT)
		return client_error(g, -EINVAL, "unknown format");
	r = client_call_result(g, m, &bytes, &tree, &res);
	if (r < 0)
		return r;
	if (fmt == GPURED_FORMAT_TEXT) {
		r = render_text(&out, res, 0);
	} else {
		r = render_json(&out, res, fmt == GPURED_FORMAT_JSON_PRETTY, 0);
		if (r == 0 && fmt == GPURED_FORMAT_JSON_PRETTY)
			r = gr_buf_append(&out, "\n", 1);
	}
	r = r ? r : gr_buf_append(&out, "", 1);
	if (r < 0)
		return client_error(g, r, "out of memory");
	*ret = (char *)TAKE_PTR(out.data);
	return 0;
}

int gpured_stats_format(gpured_t *g, gpured_format fmt, char **ret)
{
	return call_format(g, GR_METHOD_STATS, fmt, ret);
}

int gpured_info_format(gpured_t *g, gpured_format fmt, char **ret)
{
	return call_format(g, GR_METHOD_INFO, fmt, ret);
}

int gpured_stats_json(gpured_t *g, char **ret)
{
	return gpured_stats_format(g, GPURED_FORMAT_JSON, ret);
}

int gpured_info_json(gpured_t *g, char **ret)
{
	return gpured_info_format(g, GPURED_FORMAT_JSON, ret);
}
