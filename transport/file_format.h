/*
 * Trace-file internals shared by the writer (file_write.c) and the reader (file_read.c): the
 * on-disk layout of the file header, index blocks and footer (file.h describes it), and a small
 * hash map the two use to find producers, strings and metadata by key.
 */
#ifndef SYNCTOP_FILE_FORMAT_H
#define SYNCTOP_FILE_FORMAT_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "hash.h"
#include "synctop/file.h"

#define TP__FHDR_CRC_SPAN 60
#define TP__FOOTER_MAGIC "STFOOTER"
#define TP__FOOTER_SIZE 32
#define TP__FOOTER_CRC_SPAN 28

typedef struct tp__fhdr {
    char magic[16];
    uint16_t version;
    uint16_t hdr_size;
    uint32_t flags;
    uint64_t created_ns;
    uint32_t batch_version;
    uint32_t index_every;
    uint64_t keyframe_bytes;
    uint8_t reserved[12];
    uint32_t hdr_crc;
} tp__fhdr;
static_assert(sizeof(tp__fhdr) == TP_FILE_HDR_SIZE, "file header layout");
static_assert(offsetof(tp__fhdr, hdr_crc) == TP__FHDR_CRC_SPAN, "file header checksum span");

/* Payload of an index block: this head, then n_entries tp_findex_entry. */
typedef struct tp__fidx_head {
    uint64_t prev;
    uint32_t n_entries;
    uint32_t entry_size;
    uint64_t first;
} tp__fidx_head;
static_assert(sizeof(tp__fidx_head) == 24, "index head layout");
static_assert(sizeof(tp_findex_entry) == 56, "index entry layout");

typedef struct tp__ffooter {
    char magic[8];
    uint64_t index_offset;
    uint64_t n_entries;
    uint32_t n_index_blocks;
    uint32_t crc;
} tp__ffooter;
static_assert(sizeof(tp__ffooter) == TP__FOOTER_SIZE, "footer layout");
static_assert(offsetof(tp__ffooter, crc) == TP__FOOTER_CRC_SPAN, "footer checksum span");

/* An open-addressing map from a 128-bit key to a 32-bit value, its slots chosen by SipHash under
 * the process's key (hash.h): producer ids and string ids come from peers and files. */
typedef struct tp__fmap_slot {
    uint64_t k1, k2;
    uint32_t val;
    uint32_t used;
} tp__fmap_slot;

typedef struct tp__fmap {
    tp__fmap_slot *slots;
    size_t cap; /* power of two, or 0 */
    size_t n;
    cm_hash_key key; /* the process's, taken when the table is first made */
} tp__fmap;

/* Returns the value slot for the key, inserting it (value 0, *found = 0) when absent; NULL when
 * memory runs out. */
uint32_t *tp__fmap_put(tp__fmap *m, uint64_t k1, uint64_t k2, int *found);
/* The value for the key, or NULL. */
const uint32_t *tp__fmap_get(const tp__fmap *m, uint64_t k1, uint64_t k2);
void tp__fmap_free(tp__fmap *m);

#endif
