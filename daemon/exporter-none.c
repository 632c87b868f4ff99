/*
 * exporter.h for builds without libmicrohttpd: there is no HTTP server,
 * so --metrics-listen is refused at start-up. gpuredctl metrics still
 * renders the same exposition from the stats and info methods.
 */
#include <errno.h>
#include <stdio.h>

#include "daemon/exporter.h"

int gr_exporter_new(gr_server *s, const char *listen, gr_exporter **ret, char *ret_url,
		    size_t urllen, char *errbuf, size_t errlen)
{
	snprintf(errbuf, errlen,
		 "--metrics-listen %s: this gpured was built without libmicrohttpd, so it "
		 "cannot serve HTTP (rebuild with libmicrohttpd-dev installed, or use "
		 "'gpuredctl metrics')",
		 listen);
	return -EOPNOTSUPP;
}

gr_exporter *gr_exporter_close(gr_exporter *e)
{
	return NULL;
}
