/*
 * A run against a baseline run: the call sites of each matched by what a person would call the
 * same place in the code, so that a change of a few lines elsewhere in the file does not make a
 * site "new": the API and the frame the site is named after, without its line (file and function
 * for a Python or a symbolized frame, function and module otherwise); a call with no call site is
 * known by its API alone. Sites with the same key are summed over processes.
 */
#ifndef SYNCTOP_COMPARE_H
#define SYNCTOP_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "store.h"
#include "synctop/error.h"

typedef enum an_delta_kind { AN_DELTA_SAME = 0, AN_DELTA_NEW, AN_DELTA_GONE, AN_DELTA_GREW, AN_DELTA_SHRANK } an_delta_kind;
const char *an_delta_name(int kind); /* "same", "new", "gone", "grew", "shrank" */

typedef struct an_delta {
    char key[320];            /* "API at file:function", sanitized */
    int kind;                 /* an_delta_kind: grew/shrank when blocked time moved by more than 10% */
    uint64_t old_ns, new_ns;  /* blocked time at the site */
    uint64_t old_count, new_count;
    uint64_t old_idle_ns, new_idle_ns; /* GPU idle attributed */
} an_delta;

typedef struct an_diff {
    uint64_t old_blocked_ns, new_blocked_ns;
    uint64_t old_wall_ns, new_wall_ns;
    uint64_t old_stalls, new_stalls;
    an_delta *sites;          /* new ones first, then by how much their blocked time grew */
    size_t n_sites;
    size_t n_new, n_gone, n_grew, n_shrank;
} an_diff;

int an_compare(const st_store *old_s, const an_result *old_r, const st_store *new_s, const an_result *new_r,
               an_diff *out, err_msg *err);
void an_diff_free(an_diff *d);

#endif
