/* SPDX-License-Identifier: MIT */
/*
 * A main() for the fuzz targets where libFuzzer is not there (gcc builds): runs
 * LLVMFuzzerTestOneInput on every file named on the command line, or in a directory named
 * there, once. ctest uses it to replay the checked-in corpora, crash regressions included,
 * in the normal and the ASan builds.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0, n;

	if (!f) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (cap - len < 4096) {
			uint8_t *p = realloc(buf, cap + 65536);

			if (!p) {
				free(buf);
				fclose(f);
				return -1;
			}
			buf = p;
			cap += 65536;
		}
		n = fread(buf + len, 1, cap - len, f);
		if (n == 0)
			break;
		len += n;
	}
	fclose(f);
	/* an exact-size copy: reads past the end are caught by ASan */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact) {
			free(buf);
			return -1;
		}
		memcpy(exact, buf, len);
		free(buf);
		(void)LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int run_dir(const char *dir, unsigned int *count)
{
	struct dirent **list;
	int n, i, r = 0;

	n = scandir(dir, &list, NULL, alphasort);
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		if (list[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (run_file(path) < 0)
				r = -1;
			(*count)++;
		}
		free(list[i]);
	}
	free(list);
	return r;
}

int main(int argc, char **argv)
{
	unsigned int count = 0;
	int i, r = 0;

	for (i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			r = -1;
		} else if (S_ISDIR(st.st_mode)) {
			if (run_dir(argv[i], &count) < 0)
				r = -1;
		} else {
			if (run_file(argv[i]) < 0)
				r = -1;
			count++;
		}
	}
	printf("%s: %u inputs run\n", argv[0], count);
	return r < 0 || count == 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
