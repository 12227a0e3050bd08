/* Writing the fuzzers' seed corpora (seeds.h). */
#include "seeds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fuzz_seed_dir(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--write-seeds") == 0)
            return argv[i + 1];
    return NULL;
}

void fuzz_write_seed(const char *dir, const char *name, const void *data, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}
