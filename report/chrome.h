/*
 * The timeline of a store as Chrome trace JSON, for Perfetto and chrome://tracing (chrome.c says
 * which rows and categories).
 */
#ifndef SYNCTOP_CHROME_H
#define SYNCTOP_CHROME_H

#include <stdint.h>
#include <stdio.h>

#include "store.h"

/* Told about every hundredth of the events written (done of total). */
typedef void (*rp_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Writes the whole store; flows: launch-to-GPU-work arrows. 0, or ERR_IO when out failed. */
int rp_write_chrome(FILE *out, const st_store *s, int flows, rp_progress_fn progress, void *ctx);

#endif
