/*
 * libgpured's errors: the codes it returns and their words, the errno
 * that each server error stands for, and a handle's last message, set by
 * a failed call (client_error()) or by the connection's end
 * (client_fail(), sticky).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/conn.h"

static const int err_errno[GR_ERR_N] = {
	[GR_OK] = 0,
	[GR_ERR_INVALID_REQUEST] = -EPROTO,
	[GR_ERR_UNKNOWN_METHOD] = -ENOSYS,
	[GR_ERR_INVALID_PARAMS] = -EINVAL,
	[GR_ERR_TOO_LARGE] = -E2BIG,
	[GR_ERR_EMPTY] = -ENODATA,
	[GR_ERR_BUSY] = -EBUSY,
	[GR_ERR_INTERNAL] = -EIO,
};

int client_errno(gr_err ec)
{
	return err_errno[ec];
}

int gpured_errno_from_code(const char *code)
{
	gr_err e;

	if (!code || !gr_err_parse(code, strlen(code), &e) || e == GR_OK)
		return -EIO;
	return err_errno[e];
}

const char *gpured_strerror(int err)
{
	switch (err) {
	case 0:
		return "Success";
	case -EINVAL:
		return "Invalid parameters";
	case -E2BIG:
		return "Array too large";
	case -ENODATA:
		return "No elements to reduce";
	case -EBUSY:
		return "Server busy";
	case -ENOSYS:
		return "Unknown method";
	case -EPROTO:
		return "Protocol error";
	case -EIO:
		return "Internal server error";
	case -ECHILD:
		return "No request outstanding";
	case -ESRCH:
		return "No such request outstanding";
	case -EAGAIN:
		return "Too many requests outstanding";
	case -ENOENT:
		return "No such file or directory";
	case -ECONNREFUSED:
		return "Connection refused";
	case -ECONNRESET:
		return "Connection reset by peer";
	case -EPIPE:
		return "Broken pipe";
	case -EACCES:
		return "Permission denied";
	case -ENAMETOOLONG:
		return "File name too long";
	case -ENOMEM:
		return "Cannot allocate memory";
	case -ETIMEDOUT:
		return "Timed out waiting for the server";
	}
	/* strerror() may share a buffer between threads for unknown codes;
	 * everything this library returns is listed above. */
	return "Unknown error";
}

const char *gpured_errmsg(const gpured_t *g)
{
	return g->errmsg;
}

const char *gpured_errcode(const gpured_t *g)
{
	return g->errcode[0] ? g->errcode : NULL;
}

__attribute__((format(printf, 3, 4)))
int client_error(gpured_t *g, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
	va_end(ap);
	g->errcode[0] = '\0';
	return err;
}

__attribute__((format(printf, 3, 4)))
int client_fail(gpured_t *g, int err, const char *fmt, ...)
{
	va_list ap;

	if (g->dead)
		return g->dead;
	va_start(ap, fmt);
	vsnprintf(g->errmsg, sizeof(g->errmsg), fmt, ap);
	va_end(ap);
	g->errcode[0] = '\0';
	g->dead = err;
	return err;
}

int client_dead(gpured_t *g)
{
	/* The message of the failure may have been overwritten by a later
	 * request error; repeat it in general terms. */
	if (g->dead)
		client_error(g, g->dead, "connection lost: %s", gpured_strerror(g->dead));
	return g->dead;
}
