/*
 * The records CUPTI 13.1 to 13.5 write in place of those of the CUDA 13.0 headers the tracer is
 * built with. Each is the 13.0 struct with fields appended, so every field the converter reads is
 * where the 13.0 struct has it; only their sizes tell them apart (cupti_load.c). Read from
 * NVIDIA's headers of those releases (the nvidia-cuda-cupti wheels 13.1.75 to 13.5.25, compiled):
 *
 *   13.1: Kernel11 (priority), Context4 (processId)
 *   13.2: Device6 (numTpcs)
 *   13.3: Kernel12 (executionModel)
 *   13.4: Kernel13 (sourceGraphId, sourceGraphNodeId), Memcpy7 and Memset5 (the same two)
 *
 * and the GREEN_CONTEXT records of 13.2 on (below).
 *
 * API, Marker2, Stream, Synchronization2 and ExternalCorrelation are unchanged to 13.5.
 */
#ifndef SYNCTOP_TRACER_CUPTI_NEWER_H
#define SYNCTOP_TRACER_CUPTI_NEWER_H

#include <cupti_activity.h>
#include <stdint.h>

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityKernel10 k;
    int32_t priority;
    uint32_t padding4;
} tr_cupti_kernel11;

typedef struct PACKED_ALIGNMENT {
    tr_cupti_kernel11 k;
    uint32_t executionModel;
    uint32_t padding5;
} tr_cupti_kernel12;

typedef struct PACKED_ALIGNMENT {
    tr_cupti_kernel12 k;
    uint32_t sourceGraphId;
    uint32_t padding6;
    uint64_t sourceGraphNodeId;
} tr_cupti_kernel13;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityContext3 c;
    uint64_t processId;
} tr_cupti_context4;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityDevice5 d;
    uint32_t numTpcs;
    uint32_t reserved0;
} tr_cupti_device6;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityMemcpy6 m;
    uint32_t sourceGraphId;
    uint32_t pad3;
    uint64_t sourceGraphNodeId;
} tr_cupti_memcpy7;

typedef struct PACKED_ALIGNMENT {
    CUpti_ActivityMemset4 m;
    uint32_t sourceGraphId;
    uint32_t pad3;
    uint64_t sourceGraphNodeId;
} tr_cupti_memset5;

/* From 13.2 a green context makes a GREEN_CONTEXT record (a kind these headers do not have), not a
 * CONTEXT record. Its versions (GreenContext, GreenContext2 of 13.2 Update 1, GreenContext3 of
 * 13.4: 152, 168 and 304 bytes) all begin with these fields, the only ones read. */
#define TR_CUPTI_KIND_GREEN_CONTEXT 59
typedef struct {
    CUpti_ActivityKind kind;
    uint32_t contextId;
    uint32_t parentContextId;
    uint32_t deviceId;
} tr_cupti_green_context_head;

/* The sizes NVIDIA's headers give them. */
_Static_assert(sizeof(tr_cupti_kernel11) == 224, "Kernel11 is 224 bytes");
_Static_assert(sizeof(tr_cupti_kernel12) == 232, "Kernel12 is 232 bytes");
_Static_assert(sizeof(tr_cupti_kernel13) == 248, "Kernel13 is 248 bytes");
_Static_assert(sizeof(tr_cupti_context4) == 40, "Context4 is 40 bytes");
_Static_assert(sizeof(tr_cupti_device6) == 192, "Device6 is 192 bytes");
_Static_assert(sizeof(tr_cupti_memcpy7) == 112, "Memcpy7 is 112 bytes");
_Static_assert(sizeof(tr_cupti_memset5) == 104, "Memset5 is 104 bytes");

#endif
