/*
 * Following live publishers until their programs end (live.h).
 */
#include "live.h"

#include <string.h>

#include "clock.h"


int live_sources_gone(const char *const *eps, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strncmp(eps[i], "ipc://", 6) != 0 || tp_endpoint_is_live(eps[i]) != 0)
            return 0;
    return n > 0;
}

size_t live_clocks_apply(tp_sub *sub, st_store *s) {
    size_t n = tp_sub_clock_count(sub), moved = 0;
    tp_sub_clock c;
    for (size_t i = 0; i < n; i++)
        if (tp_sub_clock_best(sub, i, &c) && st_store_set_host_clock(s, c.host, c.offset_ns, c.uncertainty_ns) == 1)
            moved++;
    return moved;
}

const char *live_end_name(live_end e) {
    switch (e) {
    case LIVE_ENDED: return "every producer finished";
    case LIVE_STOPPED: return "interrupted";
    case LIVE_GONE: return "the program went away without its last batch";
    case LIVE_DONE: return "done";
    case LIVE_UNANSWERED: return "nothing answered";
    default: return "error";
    }
}

live_end live_follow(tp_sub *sub, const live_opts *o, err_msg *err) {
    int poll_ms = o->poll_ms > 0 ? o->poll_ms : 250;
    double start = cm_now_s(), quiet_since = start, gone_checked = 0;
    uint64_t batches = 0;
    int said_refused = 0;
    size_t notices_said = 0;
    for (;;) {
        if (o->stop != NULL && *o->stop)
            return LIVE_STOPPED;
        tp_sub_msg m;
        int r = tp_sub_recv(sub, &m, poll_ms, err);
        if (r == ERR_MALFORMED) {
            if (o->on_malformed != NULL)
                o->on_malformed(o->ctx, err);
        } else if (r < 0) {
            if (o->stop != NULL && *o->stop)
                return LIVE_STOPPED;
            return LIVE_FAILED;
        } else if (r == 1) {
            batches++;
            quiet_since = cm_now_s();
            if (o->on_batch != NULL && o->on_batch(o->ctx, &m, err) < 0)
                return LIVE_FAILED;
            if (!o->keep_after_end && tp_sub_all_ended(sub))
                return LIVE_ENDED;
        }
        if (!said_refused && batches == 0 && o->on_refused != NULL && tp_sub_handshake_failed(sub) != NULL) {
            said_refused = 1;
            o->on_refused(o->ctx, sub);
        }
        tp_sub_notice n;
        while (o->on_notice != NULL && notices_said < tp_sub_notice_count(sub) &&
               tp_sub_notice_get(sub, notices_said++, &n) == 0)
            o->on_notice(o->ctx, &n);
        if (o->on_tick != NULL && o->on_tick(o->ctx))
            return LIVE_DONE;
        /* Quiet for a second with every publisher gone: nothing more can come. */
        double now = cm_now_s();
        if (o->wait_s > 0 && batches == 0 && now - start >= o->wait_s) {
            tp_sub_stats st;
            tp_sub_stats_get(sub, &st);
            if (st.handshakes == 0 && st.handshake_failures == 0 && st.received == 0)
                return LIVE_UNANSWERED;
        }
        if (r == 0 && batches > 0 && o->n_endpoints > 0 && now - quiet_since >= 1.0 && now - gone_checked >= 1.0) {
            gone_checked = now;
            if (live_sources_gone(o->endpoints, o->n_endpoints))
                return LIVE_GONE;
        }
    }
}
