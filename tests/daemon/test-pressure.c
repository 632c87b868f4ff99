/*
 * CPU pressure from a pressure file: the "some" line's total parsed, and
 * rejected where it is not one; no estimate from a first or a stale
 * sample; the share of the time between samples, averaged over the
 * window; no file read more often than every GR_PRESSURE_SAMPLE_MS; a
 * threshold of 0 always short; a missing or empty file never.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/pressure.h"
#include "tests/check.h"

#define MS 1000000ull

static char path[] = "/tmp/gpured-pressure-XXXXXX";

/* The file a kernel would show with total= us of waiting. */
static void set_total(unsigned long long us)
{
	FILE *f = fopen(path, "w");
	CHECK(f);
	fprintf(f, "some avg10=1.00 avg60=2.00 avg300=3.00 total=%llu\n"
		   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", us);
	CHECK(fclose(f) == 0);
}

static void test_parse(void)
{
	uint64_t t = 0;

	CHECK(gr_pressure_parse("some avg10=0.36 avg60=1.01 avg300=10.91 total=23889726502\n"
				"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", &t) == 0);
	CHECK(t == 23889726502ull);
	CHECK(gr_pressure_parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=7", &t) == 0);
	CHECK(t == 7);
	CHECK(gr_pressure_parse("", &t) < 0);
	CHECK(gr_pressure_parse("full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", &t) < 0);
	CHECK(gr_pressure_parse("some avg10=0.00 avg60=0.00 avg300=0.00\nfull total=5\n", &t) < 0);
	CHECK(gr_pressure_parse("some avg10=0.00 total=\n", &t) < 0);
	CHECK(gr_pressure_parse("some avg10=0.00 total=12x\n", &t) < 0);
}

static void test_share(void)
{
	gr_pressure p;
	uint64_t now = 1000 * MS;

	set_total(1000000);
	CHECK(gr_pressure_init(&p, path, 10) == 0);
	/* the first sample starts the count */
	CHECK(!gr_pressure_short(&p, now));
	CHECK(!p.have);
	/* 5 ms of waiting in 10: half */
	set_total(1005000);
	now += 10 * MS;
	CHECK(gr_pressure_short(&p, now));
	CHECK(p.have && p.share > 0.49 && p.share < 0.51);
	/* none read again within GR_PRESSURE_SAMPLE_MS, whatever the file says */
	uint64_t reads = p.samples;
	set_total(1005000);
	CHECK(gr_pressure_short(&p, now + (GR_PRESSURE_SAMPLE_MS - 1) * MS));
	CHECK(p.samples == reads);
	/* no waiting for a window's length: the share fades below 10% */
	unsigned k = 0;
	while (gr_pressure_short(&p, now += 10 * MS))
		CHECK(++k < 50);
	CHECK_MSG(k >= 5 && k <= 30, "%u samples to fall below 10%%", k);
	/* all the time waiting (more, as the kernel's clocks may say): 100% */
	for (unsigned long long t = 1005000, i = 0; i < 60; i++) {
		t += 12000;
		set_total(t);
		gr_pressure_short(&p, now += 10 * MS);
	}
	CHECK(p.share > 0.99 && p.share <= 1.0);
	/* after a long gap the count starts over: no estimate */
	set_total(5000000);
	CHECK(!gr_pressure_short(&p, now += 2000 * MS));
	CHECK(!p.have);
	gr_pressure_deinit(&p);
	CHECK(p.fd == -1);
}

static void test_threshold(void)
{
	gr_pressure p;

	/* 0: always short, nothing read, even where there is nothing */
	CHECK(gr_pressure_init(&p, "/nonexistent/pressure", 0) == 0);
	CHECK(gr_pressure_short(&p, 1));
	CHECK(p.samples == 0);
	gr_pressure_deinit(&p);
	/* no file, or one that is not a pressure file: never short */
	CHECK(gr_pressure_init(&p, "/nonexistent/pressure", 10) < 0);
	CHECK(!gr_pressure_short(&p, 1) && !gr_pressure_short(&p, 100 * MS));
	gr_pressure_deinit(&p);
	FILE *f = fopen(path, "w");
	CHECK(f && fclose(f) == 0);
	CHECK(gr_pressure_init(&p, path, 10) < 0);
	CHECK(!gr_pressure_short(&p, 100 * MS));
	gr_pressure_deinit(&p);
	/* 100: short only when always waiting */
	set_total(0);
	CHECK(gr_pressure_init(&p, path, 100) == 0);
	CHECK(!gr_pressure_short(&p, 100 * MS));
	set_total(9000);
	CHECK(!gr_pressure_short(&p, 110 * MS));
	set_total(19000);
	CHECK(gr_pressure_short(&p, 120 * MS) == (p.share >= 1.0));
	gr_pressure_deinit(&p);
}

int main(void)
{
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	test_parse();
	test_share();
	test_threshold();
	unlink(path);
	return 0;
}
