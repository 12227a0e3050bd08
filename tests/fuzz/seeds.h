/*
 * What every fuzzer shares for `FUZZER --write-seeds DIR` (fuzz_smoke.cmake writes each one's
 * corpus that way before the smoke run).
 */
#ifndef SYNCTOP_FUZZ_SEEDS_H
#define SYNCTOP_FUZZ_SEEDS_H

#include <stddef.h>

/* The directory after --write-seeds on the command line, or NULL. */
const char *fuzz_seed_dir(int argc, char **argv);

/* Writes one seed, DIR/NAME; exits with status 1 when it cannot. */
void fuzz_write_seed(const char *dir, const char *name, const void *data, size_t len);

#endif
