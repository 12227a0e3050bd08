/*
 * A relay's notice to the subscribers below it, published under the topic 'N' (net_topic.h): what
 * happened on the relay that they should hear of although none of their own batches is missing.
 * (tp_sub_notice: its recording stopped, the live stream going on). Body:
 *   relay id (u64 LE) | kind (u8) | host length (u8, 1 to 64) | host | text length (u16 LE, at most
 *   NET_NOTICE_TEXT_MAX) | text
 * Host and text are printable ASCII (the relay replaces any other byte with '?'); a receiver drops
 * and counts a notice that is not exactly that.
 */
#ifndef SYNCTOP_NET_NOTICE_H
#define SYNCTOP_NET_NOTICE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "synctop/net.h"
#include "net_clock.h"
#include "net_loss.h"

#define NET_NOTICE_TEXT_MAX 240
#define NET_NOTICE_FIXED (8 + 1 + 1 + 2)
#define NET_NOTICE_MAX (NET_NOTICE_FIXED + NET_CLOCK_HOST_MAX + NET_NOTICE_TEXT_MAX)

_Static_assert(sizeof(((tp_sub_notice *)0)->host) == NET_CLOCK_HOST_MAX + 1, "a host name as notices carry it");
_Static_assert(sizeof(((tp_sub_notice *)0)->text) == NET_NOTICE_TEXT_MAX + 1, "a text as notices carry it");

/* Writes n into out (room for NET_NOTICE_MAX), its text cut to NET_NOTICE_TEXT_MAX bytes and made
 * printable; the host must pass net_clock_host_ok. Returns the length. */
static inline size_t net_notice_encode(uint8_t *out, const tp_sub_notice *n) {
    size_t hl = strlen(n->host), tl = strnlen(n->text, NET_NOTICE_TEXT_MAX);
    net_loss_put_u64(out, n->relay);
    out[8] = (uint8_t)n->kind;
    out[9] = (uint8_t)hl;
    memcpy(out + 10, n->host, hl);
    out[10 + hl] = (uint8_t)(tl & 0xff);
    out[11 + hl] = (uint8_t)(tl >> 8);
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)n->text[i];
        out[NET_NOTICE_FIXED + hl + i] = c >= 0x20 && c < 0x7f ? c : '?';
    }
    return NET_NOTICE_FIXED + hl + tl;
}

/* 1 and the fields when msg (len bytes) is a well-formed notice, else 0. */
static inline int net_notice_decode(const uint8_t *msg, size_t len, tp_sub_notice *n) {
    if (len < NET_NOTICE_FIXED || len > NET_NOTICE_MAX)
        return 0;
    size_t hl = msg[9];
    if (len < NET_NOTICE_FIXED + hl || !net_clock_host_ok((const char *)msg + 10, hl))
        return 0;
    size_t tl = (size_t)msg[10 + hl] | (size_t)msg[11 + hl] << 8;
    if (tl > NET_NOTICE_TEXT_MAX || len != NET_NOTICE_FIXED + hl + tl)
        return 0;
    const uint8_t *t = msg + NET_NOTICE_FIXED + hl;
    for (size_t i = 0; i < tl; i++)
        if (t[i] < 0x20 || t[i] >= 0x7f)
            return 0;
    n->relay = net_loss_get_u64(msg);
    n->kind = msg[8];
    memcpy(n->host, msg + 10, hl);
    n->host[hl] = '\0';
    memcpy(n->text, t, tl);
    n->text[tl] = '\0';
    return n->kind != 0;
}

#endif
