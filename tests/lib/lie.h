/*
 * Hostile trace files for the tests and the fuzzers' seeds: an index that lies about a batch while
 * every checksum holds.
 */
#ifndef SYNCTOP_TEST_LIE_H
#define SYNCTOP_TEST_LIE_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/file.h"

/* A copy of a whole trace file (file, len) whose last index block's first entry is what lie()
 * makes of it, the block's checksums and the footer resealed: a new malloc'd image (*out_len
 * bytes), or NULL when the file has no index at its end. */
uint8_t *trace_with_lying_index(const uint8_t *file, size_t len, void (*lie)(tp_findex_entry *), size_t *out_len);

#endif
