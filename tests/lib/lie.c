/* Hostile trace files (lie.h). */
#include "lie.h"

#include <stdlib.h>
#include <string.h>

#include "synctop/codec.h"

uint8_t *trace_with_lying_index(const uint8_t *file, size_t len, void (*lie)(tp_findex_entry *), size_t *out_len) {
    if (len < TP_FILE_HDR_SIZE + 32)
        return NULL;
    uint64_t block;
    memcpy(&block, file + len - 32 + 8, 8); /* the footer's index offset */
    if (block < TP_FILE_HDR_SIZE || block >= len - 32)
        return NULL;
    tp_dec d = {0};
    if (tp_dec_open(&d, file + block, len - 32 - block, NULL) != 0 || !(d.hdr.flags & TP_BF_INDEX) ||
        d.payload_len < 24 + sizeof(tp_findex_entry)) {
        tp_dec_free(&d);
        return NULL;
    }
    size_t plen = d.payload_len;
    uint8_t *out = malloc(block + TP_BATCH_HDR_SIZE + plen + 32);
    if (out == NULL) {
        tp_dec_free(&d);
        return NULL;
    }
    memcpy(out, file, block);
    uint8_t *payload = out + block + TP_BATCH_HDR_SIZE;
    memcpy(payload, d.payload, plen);
    tp_findex_entry e;
    memcpy(&e, payload + 24, sizeof e); /* the block's first entry, after its 24-byte head */
    lie(&e);
    memcpy(payload + 24, &e, sizeof e);
    tp_batch_hdr h = d.hdr;
    h.flags &= ~(uint32_t)TP_BF_ZSTD; /* stored raw now */
    h.stored_size = h.raw_size = (uint32_t)plen;
    h.payload_crc = tp_crc32(0, payload, plen);
    memcpy(out + block, &h, sizeof h);
    tp_batch_seal_header(out + block);
    uint8_t *footer = payload + plen;
    memcpy(footer, file + len - 32, 32);
    uint32_t crc = tp_crc32(0, footer, 28);
    memcpy(footer + 28, &crc, 4);
    *out_len = block + TP_BATCH_HDR_SIZE + plen + 32;
    tp_dec_free(&d);
    return out;
}
