/*
 * A fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput() once on
 * every file named (a directory: on every file in it), so that the
 * checked-in corpus, crash reproducers included, is a regression test in
 * every build, gcc's and the sanitizer build's too. Each input gets a heap
 * buffer of exactly its size, as libFuzzer gives it, so that a read past
 * the end is a sanitizer report.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static unsigned n_run;

static void run_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	FILE *f;

	f = fopen(path, "rbe");
	CHECK_MSG(f, "cannot open %s", path);
	CHECK(fstat(fileno(f), &st) == 0);
	/* One byte more for an empty file: malloc(0) may return NULL. */
	buf = malloc((size_t)st.st_size + 1);
	CHECK(buf);
	CHECK(fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	fclose(f);
	if (st.st_size > 0) {
		/* Exactly the input's size, for the sanitizers. */
		uint8_t *exact = realloc(buf, (size_t)st.st_size);

		CHECK(exact);
		buf = exact;
	}
	LLVMFuzzerTestOneInput(buf, (size_t)st.st_size);
	free(buf);
	n_run++;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(const char *path)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct stat st;
	DIR *d;

	CHECK_MSG(stat(path, &st) == 0, "cannot stat %s", path);
	if (!S_ISDIR(st.st_mode)) {
		run_file(path);
		return;
	}
	d = opendir(path);
	CHECK(d);
	/* In name order, so that every run is the same run. */
	while ((de = readdir(d))) {
		char *full;

		if (de->d_name[0] == '.')
			continue;
		CHECK(asprintf(&full, "%s/%s", path, de->d_name) > 0);
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = realloc(names, cap * sizeof(*names));
			CHECK(names);
		}
		names[n++] = full;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n; i++) {
		run_file(names[i]);
		free(names[i]);
	}
	free(names);
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++)
		run_path(argv[i]);
	CHECK_MSG(n_run > 0, "no inputs");
	printf("%u inputs\n", n_run);
	return 0;
}
