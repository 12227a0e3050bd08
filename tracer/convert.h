/*
 * Conversion of CUPTI activity records into synctop records (event.h), on the flush thread.
 *
 * The converter owns what it needs to remember between records: which device a context belongs to
 * (synchronization records carry only the context), and a cache from CUPTI's kernel-name pointers
 * to interned string ids so a kernel name is hashed once, not once per launch. Records that the
 * decoder would refuse (end before start, enum values beyond synctop's) are mended or skipped and
 * counted, never passed on; so are records whose times CUPTI could not collect (0), the
 * SYNCHRONIZATION records of queries that found work pending, the RUNTIME/DRIVER records of calls
 * the callbacks measure (twins that another client's RUNTIME or DRIVER kind makes), and records of
 * kinds synctop does not read (another client's, or a newer CUPTI's), which the walk steps over.
 * A launch whose API call lasted the blocking threshold is flagged blocking (a full launch queue
 * makes the host wait there).
 */
#ifndef SYNCTOP_TRACER_CONVERT_H
#define SYNCTOP_TRACER_CONVERT_H

#include <cupti.h>
#include <stdint.h>

#include "synctop/codec.h"

typedef struct tr_conv tr_conv;

typedef struct tr_conv_stats {
    uint64_t converted; /* records added to the encoder */
    uint64_t skipped;   /* records of kinds not converted */
    uint64_t pending;   /* SYNCHRONIZATION records of queries that found work pending */
    uint64_t invalid;   /* records refused (end before start...) */
    uint64_t uncollected; /* records with a start or end CUPTI could not collect (0) */
    uint64_t twins;     /* RUNTIME/DRIVER records of calls the callbacks measure */
    uint64_t untraced;  /* RUNTIME/DRIVER records of calls synctop does not trace (launches only) */
} tr_conv_stats;

tr_conv *tr_conv_new(tp_enc *enc);
void tr_conv_destroy(tr_conv **c);

/* Converts one activity record and adds it to the encoder. Returns 1 when a record was added, 0
 * when skipped, or a negative ERR_* code from the encoder. */
int tr_conv_activity(tr_conv *c, const CUpti_Activity *a);

/* Launch API records this long are flagged TP_F_BLOCKING (0, the default: never). */
void tr_conv_set_block_threshold(tr_conv *c, uint64_t ns);
/* Which device a context belongs to, learnt before its CONTEXT record (context creation). */
void tr_conv_set_context(tr_conv *c, uint32_t context, uint32_t device);
/* The size of the loaded CUPTI's SYNCHRONIZATION records (tr_cupti's sync_size; 0: unknown, taken
 * as CUPTI 13's). CUPTI before 12.8 writes them without returnValue: a query that found work
 * pending cannot be told from a wait then, and every record counts as a wait. */
void tr_conv_set_sync_size(tr_conv *c, size_t bytes);
/* RUNTIME and DRIVER records of launches alone are wanted: the tracer turned the whole kinds on
 * (a CUPTI without per-API records), so the records of other calls it does not trace are left
 * out (counted as untraced). */
void tr_conv_set_launches_only(tr_conv *c, int on);
/* The highest correlation id among the records converted so far. */
uint32_t tr_conv_max_correlation(const tr_conv *c);
/* The device of a context, from CONTEXT records or tr_conv_set_context; TP_NO_DEVICE when
 * unknown. */
uint16_t tr_conv_context_device(const tr_conv *c, uint32_t context);
/* The interned name of a runtime/driver API (0 when unknown). */
uint32_t tr_conv_api_name(tr_conv *c, CUpti_CallbackDomain domain, uint32_t cbid);
/* Forgets cached kernel-name pointers (a module was unloaded: its strings may be reused). */
void tr_conv_forget_names(tr_conv *c);
void tr_conv_stats_get(const tr_conv *c, tr_conv_stats *out);

#endif
