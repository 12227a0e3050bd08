/*
 * What to change at a call site that blocks, and why: the cause named from what the trace holds
 * (the PyTorch op in the call site's frames, the Python line, the CUDA call and the kind of
 * block), one suggestion per cause in plain words, and the GPU time it would give back (the GPU
 * idle the analysis attributed to the site's stalls). Nothing is advised that the trace does not
 * support: a site whose cause cannot be told gets AN_FIX_NONE, and a framework is named only when
 * the trace shows it.
 */
#ifndef SYNCTOP_ADVICE_H
#define SYNCTOP_ADVICE_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "store.h"

typedef enum an_fix {
    AN_FIX_NONE = 0,
    AN_FIX_ITEM,         /* .item() / float() / int() of a CUDA tensor */
    AN_FIX_IF_TENSOR,    /* bool() / `if tensor:` / assert on a CUDA tensor */
    AN_FIX_TO_HOST,      /* .cpu() / .numpy() / .tolist() / .to("cpu") */
    AN_FIX_NONZERO,      /* nonzero / masked indexing / unique: data-dependent shapes */
    AN_FIX_DEVICE_SYNC,  /* torch.cuda.synchronize() / cudaDeviceSynchronize */
    AN_FIX_EVENT_SYNC,   /* waiting on a CUDA event from the host */
    AN_FIX_STREAM_SYNC,  /* a stream synchronize with no op behind it */
    AN_FIX_PAGEABLE,     /* an "async" copy through pageable host memory */
    AN_FIX_SYNC_COPY,    /* a synchronous copy (cudaMemcpy) */
    AN_FIX_ALLOC,        /* cudaFree / cudaMalloc in the loop */
    AN_FIX_QUERY,        /* polling cudaStreamQuery / cudaEventQuery */
    AN_FIX_MEMSET,       /* a synchronous memset */
    AN_FIX_INPUT,        /* the host busy loading data (a DataLoader) while the GPU has nothing queued */
    AN_FIX_HOST,         /* the host busy elsewhere (a range, or none) while the GPU has nothing queued */
    AN_FIX_HOST_API,     /* the same, most of it inside CUDA calls that do not wait (cudaMalloc, stream
                            creation, a first launch loading its module) */
    AN_FIX_N_
} an_fix;

typedef struct an_advice {
    int fix;               /* an_fix */
    const char *cause;     /* short: ".item() on a CUDA tensor" */
    const char *change;    /* what to do, one sentence */
    char why[160];         /* the evidence in the trace, one line (sanitized) */
    uint64_t gpu_ns;       /* GPU time it would give back: the site's attributed GPU idle */
} an_advice;

/* The advice for one call site of an analysis. */
void an_advise(const st_store *s, const an_site *site, an_advice *out);
/* The advice for the host's own share of the GPU idle in one range (an_host_range): a DataLoader's
 * range (its name says DataLoader or __next__) is the input pipeline, any other the host's work;
 * range is its name ("" for time in no range). */
void an_advise_host(const st_store *s, const an_host_range *h, const char *range, an_advice *out);
/* Whether the trace shows PyTorch (its operators, its files, its libraries, its step ranges):
 * advice then names PyTorch's ways; without it, only CUDA's. */
int an_trace_uses_pytorch(const st_store *s);
const char *an_fix_name(int fix); /* "item", "if-tensor", ... for JSON */

#endif
