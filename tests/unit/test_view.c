/*
 * The view model (tui/screen.h), without a terminal: golden screens of fixture traces at 80x24 and
 * 200x60 (characters and colour roles, compared with tests/unit/golden/; SYNCTOP_UPDATE_GOLDEN=1
 * rewrites them), the layout over many sizes, glyph and colour fallbacks, sanitized names, and
 * the keys and clicks that move the viewport.
 */
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "analysis.h"
#include "store.h"
#include "load.h"
#include "synth.h"
#include "task.h"
#include "screen.h"
#include "sumview.h"
#include "hta.h"
#include "loop.h"
#include "steps.h"
#include "view_fixture.h"

/* A 16-rank job on two nodes: each rank's row, and its lanes under it. */
TEST(golden_ranks16) { golden_fixture(ranks_store(16, 1500), "ranks16"); }
TEST(golden_ranks16_mono) { golden_fixture_mode(ranks_store(16, 1500), "ranks16-mono", 1); }

/* A rank's row says how far its host's clock was measured to be from the viewer's, and within
 * what; ranks of a host not measured say nothing of it. */
TEST(rank_rows_state_their_hosts_measured_clock) {
    st_store *s = ranks_store(16, 500);
    ASSERT_EQ(st_store_set_host_clock(s, "node2", 1500000000LL, 250000), 1);
    st_store_commit(s);
    fixture f;
    fixture_open(&f, s);
    render(&f, 200, 60);
    int measured = 0, plain = 0;
    for (int y = 0; y < f.g.h; y++) {
        const char *row = row_text(&f.g, y);
        if (strstr(row, " on node2 (clock +1500.000 ms \xc2\xb1 0.250 ms)") != NULL)
            measured++;
        else if (strstr(row, " on node1") != NULL) {
            ASSERT(strstr(row, "clock") == NULL);
            plain++;
        }
    }
    ASSERT_GT(measured, 0);
    ASSERT_GT(plain, 0);
    f.v.ascii = 1;
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, " on node2 (clock +1500.000 ms +- 0.250 ms)"));
    fixture_close(&f);
}

/* 16 ranks: each folded into its row, and one stalls row per call for all of them (its count the
 * sum of the ranks' own, counted here from the analysis' blocks); i walks every rank's stalls. */
TEST(many_ranks_fold_and_share_a_row_per_call) {
    fixture f;
    fixture_open(&f, ranks_store(16, 1500));
    render(&f, 200, 60);
    for (int r = 0; r < 16; r++) {
        char want[32];
        snprintf(want, sizeof want, "\xe2\x96\xb8r%d ", r); /* folded */
        ASSERT(screen_has(&f.g, want));
    }
    ASSERT(!screen_has(&f.g, "r0:T4242")); /* the lanes stay folded */
    ASSERT_GT(f.v.stalls.n_sites, 0);
    uint64_t per_site_blocks = 0;
    int procs[16] = {0};
    for (size_t i = 0; i < f.an.n_blocks; i++) {
        const an_block *b = &f.an.blocks[i];
        char lab[512], top[512];
        an_site_label(f.s, b->callsite, b->name, lab, sizeof lab);
        an_site_label(f.s, f.v.stalls.sites[0].callsite, f.v.stalls.sites[0].name, top, sizeof top);
        if (strcmp(lab, top) == 0) {
            per_site_blocks++;
            ASSERT_LT(b->producer, 16);
            procs[b->producer] = 1;
        }
    }
    int n_procs = 0;
    for (int r = 0; r < 16; r++)
        n_procs += procs[r];
    ASSERT_EQ(n_procs, 16);
    ASSERT_EQ(f.v.stalls.sites[0].n_procs, 16);
    ASSERT_UEQ(f.v.stalls.sites[0].count, per_site_blocks);
    ASSERT(screen_has(&f.g, "\xc3\x97" "16 train.py:42 train_step"));
    /* i visits the stalls of every rank */
    int seen[16] = {0};
    for (uint64_t k = 0; k < per_site_blocks; k++) {
        key(&f, 'i');
        for (size_t i = 0; i < f.an.n_blocks; i++)
            if (f.an.blocks[i].start == f.v.cursor && f.an.blocks[i].producer < 16)
                seen[f.an.blocks[i].producer] = 1;
    }
    int n_seen = 0;
    for (int r = 0; r < 16; r++)
        n_seen += seen[r];
    ASSERT_EQ(n_seen, 16);
    fixture_close(&f);
}

TEST(golden_synth) { golden_fixture(synth_store(1, 3000), "synth"); }
TEST(golden_synth_mono) { golden_fixture_mode(synth_store(1, 3000), "synth-mono", 1); }
TEST(golden_alexnet_mono) { golden_fixture_mode(kineto_store("alexnet_a100_sync_heavy.json.gz"), "alexnet-mono", 1); }
TEST(golden_alexnet) { golden_fixture(kineto_store("alexnet_a100_sync_heavy.json.gz"), "alexnet"); }
TEST(golden_event_sync_single_stream) {
    golden_fixture(kineto_store("event_sync_single_stream.json.gz"), "event_sync_single");
}
TEST(golden_event_sync_multi_stream) {
    golden_fixture(kineto_store("event_sync_multi_stream.json.gz"), "event_sync_multi");
}
TEST(golden_sampled_rank0) { golden_fixture(kineto_store("sampled_rank-0.json.gz"), "sampled_rank0"); }

static st_store *two_ranks_store(void) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    char path[1024];
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/sampled_rank-%d.json.gz", KINETO_TRACE_DIR, r);
        if (ingest_file(s, path, NULL, NULL, &err) != 0)
            TASK_FAIL_("%s: %s", path, err.msg);
    }
    return s;
}

/* The viewer's states beyond the first screen, on two ranks: the process tree with rank 0 folded,
 * the idle breakdown pane, and a stall marked (m) and fitted (f) after n. */
static void golden_states(const char *name, int mono) {
    static const int sizes[2][2] = {{80, 24}, {200, 60}};
    static const struct { const char *suffix, *keys; } states[] = {{"folded", "c"}, {"breakdown", "b"}, {"marked", "nmf"}};
    st_store *s = two_ranks_store();
    for (int i = 0; i < 2; i++)
        for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
            fixture f;
            fixture_open(&f, s);
            f.v.mono = mono;
            render(&f, sizes[i][0], sizes[i][1]);
            for (const char *c = states[k].keys; *c; c++)
                key(&f, *c);
            while (vw_figs_update(&f.v, f.s, 1000) == 0)
                ;
            render(&f, sizes[i][0], sizes[i][1]);
            assert_cells_safe(&f.g, 0);
            char full[128];
            snprintf(full, sizeof full, "%s-%s", name, states[k].suffix);
            golden_mode(&f.g, full, mono);
            f.s = NULL;
            vw_state_free(&f.v);
            vw_grid_free(&f.g);
            an_result_free(&f.an);
        }
    st_store_destroy(&s);
}

TEST(golden_ranks_states) { golden_states("ranks", 0); }
TEST(golden_ranks_states_mono) { golden_states("ranks-mono", 1); }

/* ---- layout ---- */

static int rect_in(const vw_rect *r, int w, int h) {
    return r->x >= 0 && r->y >= 0 && r->w >= 0 && r->h >= 0 && r->x + r->w <= w && r->y + r->h <= h;
}
static int overlap(const vw_rect *a, const vw_rect *b) {
    if (a->w == 0 || a->h == 0 || b->w == 0 || b->h == 0)
        return 0;
    return a->x < b->x + b->w && b->x < a->x + a->w && a->y < b->y + b->h && b->y < a->y + a->h;
}

TEST(layout_panels_fit_and_never_overlap_at_any_size) {
    int checked = 0;
    for (int w = 80; w <= 220; w++) {
        for (int h = 24; h <= 70; h += (w % 3) + 1) {
            for (int gpus = 1; gpus <= 9; gpus += 4) {
                for (int det = 0; det <= 1; det++) {
                    vw_layout L;
                    vw_layout_compute(w, h, gpus, det, &L);
                    ASSERT(!L.too_small);
                    const vw_rect *r[] = {&L.title, &L.gpus, &L.ruler, &L.lanes, &L.detail, &L.stalls, &L.keys};
                    int total = 0;
                    for (int i = 0; i < 7; i++) {
                        ASSERT(rect_in(r[i], w, h));
                        total += r[i]->h;
                        for (int j = i + 1; j < 7; j++)
                            ASSERT(!overlap(r[i], r[j]));
                    }
                    ASSERT_EQ(total, h);
                    ASSERT_EQ(L.title.y, 0);
                    ASSERT_EQ(L.title.h, 1);
                    ASSERT_GE(L.gpus.h, 1);
                    ASSERT_GE(L.lanes.h, 4);
                    ASSERT_EQ(L.keys.y, h - 1);
                    ASSERT(det || L.stalls.h >= 6);
                    ASSERT(rect_in(&L.timeline, w, h));
                    ASSERT_GE(L.timeline.w, 60);
                    ASSERT_EQ(L.timeline.x + L.timeline.w, w);
                    checked++;
                }
            }
        }
    }
    ASSERT_GT(checked, 3000);
    vw_layout L;
    vw_layout_compute(79, 24, 1, 0, &L);
    ASSERT(L.too_small);
    vw_layout_compute(80, 23, 1, 0, &L);
    ASSERT(L.too_small);
}

/* The stalls panel holds its rows and no more; the lanes get what it does not need, and rows the
 * lanes leave empty go to more stall rows, then to the detail pane. */
TEST(layout_fits_the_stalls_panel_and_the_lanes_to_their_content) {
    static const int lane_rows[] = {0, 3, 8, 40, 400}, sites[] = {0, 1, 5, 30, 1000};
    int checked = 0;
    for (int w = 80; w <= 200; w += 60)
        for (int h = 24; h <= 70; h += 23)
            for (int det = 0; det <= 1; det++)
                for (size_t a = 0; a < 5; a++)
                    for (size_t b = 0; b < 5; b++) {
                        vw_layout C, L;
                        vw_layout_compute(w, h, 1, det, &C);
                        L = C;
                        vw_layout_fit(&L, lane_rows[a], sites[b]);
                        const vw_rect *r[] = {&L.title, &L.gpus, &L.ruler, &L.lanes, &L.detail, &L.stalls, &L.keys};
                        int total = 0;
                        for (int i = 0; i < 7; i++) {
                            ASSERT(rect_in(r[i], w, h));
                            total += r[i]->h;
                            for (int j = i + 1; j < 7; j++)
                                ASSERT(!overlap(r[i], r[j]));
                        }
                        ASSERT_EQ(total, h);
                        ASSERT_EQ(L.lanes.y, C.lanes.y);
                        ASSERT_EQ(L.timeline.h, L.lanes.h);
                        ASSERT_GE(L.lanes.h, VW_MIN_LANES);
                        ASSERT_GE(L.detail.h, C.detail.h);
                        int want = 1 + (sites[b] > 1 ? sites[b] : 1);
                        if (det) {
                            /* the detail pane took the panel's rows; rows the lanes leave empty bring
                             * the panel back, three or more of them, up to its sites */
                            int need_l = lane_rows[a] > VW_MIN_LANES ? lane_rows[a] : VW_MIN_LANES;
                            int spare = C.lanes.h > need_l ? C.lanes.h - need_l : 0;
                            int back = spare < want ? spare : want;
                            ASSERT_EQ(L.stalls.h, back >= 3 ? back : 0);
                        } else {
                            /* never more stall rows than sites, never fewer than the usual panel holds */
                            ASSERT(L.stalls.h <= want);
                            ASSERT(L.stalls.h >= (want < C.stalls.h ? want : C.stalls.h));
                        }
                        /* the lanes show every row they have, up to what the usual layout gave them
                         * plus the stall rows not needed */
                        int room = C.lanes.h + (det ? 0 : C.stalls.h - (want < C.stalls.h ? want : C.stalls.h));
                        int need = lane_rows[a] > VW_MIN_LANES ? lane_rows[a] : VW_MIN_LANES;
                        ASSERT_EQ(L.lanes.h, need < room ? need : room);
                        checked++;
                    }
    ASSERT_GT(checked, 300);
    /* by hand: 200x60, one GPU, 8 lane rows, one call site (the AlexNet trace's shape at issue) */
    vw_layout L;
    vw_layout_compute(200, 60, 1, 0, &L);
    ASSERT_EQ(L.stalls.h, 15);
    vw_layout_fit(&L, 8, 1);
    ASSERT_EQ(L.stalls.h, 2);
    ASSERT_EQ(L.lanes.h, 8);
    ASSERT_EQ(L.detail.h, 60 - 1 - 1 - 1 - 8 - 2 - 1);
    /* 80x24, 20 lane rows, 2 sites: the panel's 6 rows become 3, the lanes get 3 more */
    vw_layout_compute(80, 24, 1, 0, &L);
    int lanes0 = L.lanes.h;
    ASSERT_EQ(L.stalls.h, 6);
    vw_layout_fit(&L, 20, 2);
    ASSERT_EQ(L.stalls.h, 3);
    ASSERT_EQ(L.lanes.h, lanes0 + 3);
}

TEST(rendered_screens_keep_header_and_keys_at_every_size) {
    fixture f;
    fixture_open(&f, synth_store(2, 4000));
    for (int w = 80; w <= 220; w += 7) {
        for (int h = 24; h <= 70; h += 5) {
            render(&f, w, h);
            assert_cells_safe(&f.g, 0);
            ASSERT_STR_CONTAINS(row_text(&f.g, 0), "synctop");
            ASSERT_STR_CONTAINS(row_text(&f.g, 0), "python train.py");
            ASSERT_STR_CONTAINS(row_text(&f.g, 1), "GPU0");
            ASSERT_STR_CONTAINS(row_text(&f.g, h - 1), "Help");
            ASSERT(screen_has(&f.g, "top stalls"));
            ASSERT(screen_has(&f.g, "stream 7"));
            ASSERT(screen_has(&f.g, "train.py:42 train_step"));
        }
    }
    fixture_close(&f);
}

/* However narrow, the too-small message keeps the size it needs (it drops words instead). */
TEST(small_terminal_names_the_size_it_needs_at_any_width) {
    fixture f;
    fixture_open(&f, synth_store(3, 1000));
    for (int w = 79; w >= 5; w -= 1) {
        render(&f, w, 10);
        if (!screen_has(&f.g, "80x24")) {
            char *t = vw_grid_text(&f.g);
            TASK_FAIL_("%dx10: no 80x24 in\n%s", w, t);
        }
        if (w >= 46)
            ASSERT(screen_has(&f.g, "terminal too small: "));
    }
    fixture_close(&f);
    vw_sum_view sv = {0};
    vw_grid g = {.w = 30, .h = 10};
    vw_sum_render(NULL, 0, &sv, &g);
    ASSERT(screen_has(&g, "needs 80x24"));
    vw_grid_free(&g);
}

TEST(small_terminal_says_so_without_crashing) {
    fixture f;
    fixture_open(&f, synth_store(3, 1000));
    static const int sizes[][2] = {{79, 24}, {80, 23}, {40, 10}, {1, 1}, {2, 30}, {300, 3}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        render(&f, sizes[i][0], sizes[i][1]);
        assert_cells_safe(&f.g, 0);
        if (sizes[i][0] >= 50)
            ASSERT(screen_has(&f.g, "terminal too small"));
        vw_key(&f.v, f.s, sizes[i][0], sizes[i][1], '+');
        vw_mouse(&f.v, f.s, sizes[i][0], sizes[i][1], VW_MOUSE_CLICK, 5, 5);
    }
    render(&f, 80, 24);
    ASSERT(!screen_has(&f.g, "terminal too small"));
    fixture_close(&f);
}

/* ---- glyphs, colours, names ---- */

TEST(ascii_mode_uses_only_ascii) {
    fixture f;
    fixture_open(&f, synth_store(4, 3000));
    f.v.ascii = 1;
    render(&f, 120, 40);
    assert_cells_safe(&f.g, 1);
    ASSERT(screen_has(&f.g, "#"));
    key(&f, '?');
    render(&f, 120, 40);
    assert_cells_safe(&f.g, 1);
    fixture_close(&f);
}

/* In ASCII, GPU idle's '.' is its own: a host call's cells, whole or partly filled, never use it. */
TEST(ascii_host_calls_and_gpu_idle_look_different) {
    fixture f;
    fixture_open(&f, synth_store(4, 3000));
    f.v.ascii = 1;
    render(&f, 200, 60);
    int api = 0, bubbles = 0, short_calls = 0;
    for (int i = 0; i < f.g.w * f.g.h; i++) {
        const vw_cell *c = &f.g.cells[i];
        if (c->role == ROLE_API) {
            api++;
            ASSERT(c->ch != '.');
            short_calls += c->ch == ',';
        }
        bubbles += c->role == ROLE_BUBBLE && c->ch == '.';
    }
    ASSERT_GT(api, 0);
    ASSERT_GT(short_calls, 0);
    ASSERT_GT(bubbles, 0);
    fixture_close(&f);
}

TEST(kinds_have_distinct_glyphs_and_roles) {
    fixture f;
    fixture_open(&f, synth_store(5, 2000));
    /* zoom in on the first step: the copy, the memset and the kernels take whole cells */
    f.v.t0 = f.v.origin;
    f.v.t1 = f.v.origin + 300000;
    f.v.follow = 0;
    render(&f, 200, 60);
    ASSERT_GT(count_role(&f.g, ROLE_KERNEL), 5);
    ASSERT_GT(count_role(&f.g, ROLE_MEMCPY), 5);
    ASSERT_GT(count_role(&f.g, ROLE_NVTX), 5);
    uint32_t kernel_ch = 0, memcpy_ch = 0;
    for (int i = 0; i < f.g.w * f.g.h; i++) {
        if (f.g.cells[i].role == ROLE_KERNEL && f.g.cells[i].ch == 0x2588)
            kernel_ch = f.g.cells[i].ch;
        if (f.g.cells[i].role == ROLE_MEMCPY)
            memcpy_ch = f.g.cells[i].ch;
    }
    ASSERT_EQ(kernel_ch, 0x2588);
    ASSERT(memcpy_ch == 0x2593 || memcpy_ch == 0x2592); /* shades: visible without colour */
    /* a blocking sync on the host lane is red, whatever the zoom */
    ASSERT_GT(count_role(&f.g, ROLE_BLOCKED), 0);
    f.v.t0 = f.v.origin;
    f.v.t1 = f.v.end;
    render(&f, 200, 60);
    ASSERT_GT(count_role(&f.g, ROLE_BLOCKED), 0);
    fixture_close(&f);
}

TEST(control_characters_in_names_never_reach_a_cell) {
    st_store *s = st_store_new(NULL);
    tp_enc_opts eo = {.producer = 5};
    tp_enc *enc = tp_enc_new(&eo);
    const char evil[] = "evil\x1b]0;pwned\x07kernel\n\r\x9b" "31m";
    uint32_t nm = tp_enc_intern(enc, evil, sizeof evil - 1);
    uint32_t cmd = tp_enc_intern_cstr(enc, "bad\x1b[2Jcmd");
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 1, .cmdline = cmd, .rank = -1, .world = -1};
    tp_enc_add(enc, &p);
    tp_thread th = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 9, .name = nm, .pid = 1};
    tp_enc_add(enc, &th);
    for (int i = 0; i < 50; i++) {
        tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 3, .start = 1000000 + (uint64_t)i * 10000,
                       .end = 1000000 + (uint64_t)i * 10000 + 9000, .name = nm, .grid = {1, 1, 1}, .block = {1, 1, 1}};
        tp_enc_add(enc, &k);
        tp_api a = {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 9, .start = k.start, .end = k.end,
                    .name = nm};
        tp_enc_add(enc, &a);
    }
    add_enc(s, enc);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    fixture f;
    fixture_open(&f, s);
    /* put the cursor on the kernel lane so the detail line names it */
    f.v.cursor_row = 1;
    f.v.cursor = 1000000 + 4000;
    render(&f, 160, 40);
    assert_cells_safe(&f.g, 0);
    ASSERT(screen_has(&f.g, "evil?]0;pwned?kernel"));
    ASSERT(screen_has(&f.g, "bad?[2Jcmd"));
    fixture_close(&f);
}

/* ---- keys and mouse ---- */

TEST(zoom_keeps_the_cursor_time_in_place_and_pans) {
    fixture f;
    fixture_open(&f, synth_store(6, 5000));
    render(&f, 120, 40);
    uint64_t w0 = f.v.t1 - f.v.t0;
    f.v.cursor = f.v.t0 + w0 / 3;
    uint64_t c = f.v.cursor;
    key(&f, '+');
    ASSERT_UEQ(f.v.cursor, c);
    ASSERT(f.v.t1 - f.v.t0 <= w0 / 2 + 1);
    ASSERT(f.v.t0 <= c && c < f.v.t1);
    /* the cursor's screen fraction is kept */
    double frac = (double)(c - f.v.t0) / (double)(f.v.t1 - f.v.t0);
    ASSERT(frac > 0.32 && frac < 0.35);
    key(&f, '-');
    ASSERT(f.v.t1 - f.v.t0 >= w0 - 2);
    /* zoom all the way in stops at one nanosecond per column; out stops near the whole trace */
    for (int i = 0; i < 80; i++)
        key(&f, '+');
    ASSERT_LE(f.v.t1 - f.v.t0, 200);
    render(&f, 120, 40);
    for (int i = 0; i < 80; i++)
        key(&f, '-');
    ASSERT(f.v.t1 - f.v.t0 <= (f.v.end - f.v.origin) * 2);
    key(&f, '0');
    uint64_t t0 = f.v.t0;
    key(&f, 'L');
    ASSERT(f.v.t0 > t0);
    key(&f, 'H');
    ASSERT_UEQ(f.v.t0, t0);
    /* ctrl+wheel zooms around the pointer; the wheel alone scrolls the lanes under it, not the time */
    render(&f, 120, 40);
    uint64_t before = f.v.t1 - f.v.t0;
    vw_mouse(&f.v, f.s, 120, 40, VW_MOUSE_WHEEL_UP | VW_MOUSE_CTRL, 60, 6);
    ASSERT(f.v.t1 - f.v.t0 < before);
    fixture_close(&f);
    /* sixteen ranks' lanes, more than the screen holds: a notch down scrolls them, up comes back */
    fixture_open(&f, ranks_store(16, 2000));
    render(&f, 120, 30); /* many ranks come folded */
    key(&f, 'C');        /* every rank open */
    render(&f, 120, 30);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 30, &L);
    before = f.v.t1 - f.v.t0;
    int rows_before = f.v.row_scroll;
    vw_mouse(&f.v, f.s, 120, 30, VW_MOUSE_WHEEL_DOWN, 60, L.lanes.y + 1);
    ASSERT_UEQ(f.v.t1 - f.v.t0, before);
    ASSERT_GT(f.v.row_scroll, rows_before);
    vw_mouse(&f.v, f.s, 120, 30, VW_MOUSE_WHEEL_UP, 60, L.lanes.y + 1);
    ASSERT_EQ(f.v.row_scroll, rows_before);
    fixture_close(&f);
}

TEST(next_stall_selects_its_call_site_and_highlights_its_spans) {
    fixture f;
    fixture_open(&f, synth_store(7, 3000));
    render(&f, 120, 40);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 40, &L);
    int in_lanes = 0;
    for (int i = L.lanes.y * 120; i < (L.lanes.y + L.lanes.h) * 120; i++)
        in_lanes += f.g.cells[i].role == ROLE_SELECTION;
    ASSERT_EQ(in_lanes, 0); /* only the selected stall row, not yet its spans */
    ASSERT_GE(f.an.n_blocks, 2);
    /* the cursor starts on the first event, which is the first blocking call: n goes to the next */
    ASSERT_UEQ(f.v.cursor, f.an.blocks[0].start);
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, f.an.blocks[1].start);
    ASSERT_EQ(f.v.focus, VW_FOCUS_TIMELINE); /* n never moves the focus */
    const an_stall_site *site = &f.v.stalls.sites[f.v.stalls.sel];
    ASSERT_UEQ(site->callsite, f.an.blocks[1].callsite);
    render(&f, 120, 40);
    for (int i = L.lanes.y * 120; i < (L.lanes.y + L.lanes.h) * 120; i++)
        in_lanes += f.g.cells[i].role == ROLE_SELECTION;
    ASSERT_GT(in_lanes, 0); /* and now its spans on the host lane */
    ASSERT(screen_has(&f.g, "stall "));
    /* n and N walk every stall in time order, whatever the call site and the focus */
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, f.an.blocks[2].start);
    key(&f, VW_KEY_TAB);
    ASSERT_EQ(f.v.focus, VW_FOCUS_STALLS);
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, f.an.blocks[3].start);
    key(&f, 'N');
    key(&f, 'N');
    ASSERT_UEQ(f.v.cursor, f.an.blocks[1].start);
    /* i walks the selected site's stalls, worst first, and says where it is: "1/N" */
    size_t n_site = 0;
    uint64_t worst = 0, worst_start = 0;
    site = &f.v.stalls.sites[f.v.stalls.sel];
    for (size_t i = 0; i < f.an.n_blocks; i++) {
        const an_block *b = &f.an.blocks[i];
        if (b->producer != site->producer || b->callsite != site->callsite ||
            (site->callsite == 0 && b->name != site->name))
            continue;
        n_site++;
        if (b->end - b->start > worst) {
            worst = b->end - b->start;
            worst_start = b->start;
        }
    }
    ASSERT_GT(n_site, 1);
    key(&f, 'i');
    ASSERT_UEQ(f.v.cursor, worst_start);
    char want[64];
    snprintf(want, sizeof want, "stall 1/%zu by length", n_site);
    ASSERT_STR_CONTAINS(f.v.message, want);
    key(&f, 'i');
    snprintf(want, sizeof want, "stall 2/%zu by length", n_site);
    ASSERT_STR_CONTAINS(f.v.message, want);
    key(&f, 'I');
    ASSERT_UEQ(f.v.cursor, worst_start);
    key(&f, 'I'); /* back past the worst: the shortest, wrapping */
    snprintf(want, sizeof want, "stall %zu/%zu by length", n_site, n_site);
    ASSERT_STR_CONTAINS(f.v.message, want);
    /* tab back to the timeline: the detail line names the blocking call and its call site */
    key(&f, VW_KEY_TAB);
    render(&f, 120, 40);
    ASSERT(screen_has(&f.g, "BLOCKING call"));
    ASSERT(screen_has(&f.g, "cudaStreamSynchronize"));
    key(&f, VW_KEY_ENTER); /* the detail pane lists the frames */
    render(&f, 120, 40);
    ASSERT(screen_has(&f.g, "libtorch_cuda.so"));
    fixture_close(&f);
}

TEST(help_search_and_quit_keys) {
    fixture f;
    fixture_open(&f, synth_store(8, 3000));
    render(&f, 100, 30);
    key(&f, '?');
    render(&f, 100, 30);
    ASSERT(screen_has(&f.g, "synctop help"));
    key(&f, VW_KEY_ESC);
    render(&f, 100, 30);
    ASSERT(!screen_has(&f.g, "synctop help"));
    key(&f, '/');
    for (const char *p = "SGEMM"; *p; p++)
        key(&f, *p);
    render(&f, 100, 30);
    ASSERT(screen_has(&f.g, "/SGEMM"));
    key(&f, VW_KEY_ENTER);
    size_t lane = 0;
    for (size_t l = 0; l < st_lane_count(f.s); l++)
        if (st_lane_get(f.s, l)->kind == ST_LANE_STREAM)
            lane = l;
    (void)lane;
    render(&f, 100, 30);
    ASSERT(screen_has(&f.g, "found"));
    ASSERT(screen_has(&f.g, "ampere_sgemm_128x64_tn"));
    ASSERT_EQ(vw_key(&f.v, f.s, 100, 30, 'q'), VW_ACT_QUIT);
    fixture_close(&f);
}

static int by_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* After a search, n and N go to the next and previous match, wrapping round (as in less); esc gives
 * them back to the stalls. The matches are found here from the store's own events. */
TEST(n_and_n_after_a_search_go_from_match_to_match) {
    fixture f;
    fixture_open(&f, synth_store(8, 3000));
    uint64_t starts[4096];
    size_t m = 0;
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        for (size_t i = 0; i < n; i++)
            if (st_ev_name(f.s, &e[i]) && strstr(st_str(f.s, st_ev_name(f.s, &e[i])), "sgemm") != NULL && m < 4096)
                starts[m++] = e[i].start;
    }
    qsort(starts, m, sizeof starts[0], by_u64);
    ASSERT_GT(m, 3);
    render(&f, 120, 40);
    f.v.cursor = starts[0]; /* on the first: enter finds the second */
    key(&f, '/');
    for (const char *p = "SGEMM"; *p; p++)
        key(&f, *p);
    key(&f, VW_KEY_ENTER);
    ASSERT_UEQ(f.v.cursor, starts[1]);
    char want[64];
    snprintf(want, sizeof want, ": 2 of %zu", m);
    ASSERT_STR_CONTAINS(f.v.message, want);
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, starts[2]);
    key(&f, 'N');
    key(&f, 'N');
    ASSERT_UEQ(f.v.cursor, starts[0]);
    key(&f, 'N'); /* before the first: the last, wrapping */
    ASSERT_UEQ(f.v.cursor, starts[m - 1]);
    ASSERT_STR_CONTAINS(f.v.message, "wrapped to the end");
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, starts[0]);
    ASSERT_STR_CONTAINS(f.v.message, "wrapped to the start");
    /* esc: n is the next stall again */
    key(&f, VW_KEY_ESC);
    key(&f, 'n');
    ASSERT_STR_CONTAINS(f.v.message, "stall ");
    fixture_close(&f);
}

/* The rows the lanes leave free, with the cursor on no event, show the stall row selected in the
 * panel: its figures (the panel's own) and its call site's frames. */
TEST(free_detail_rows_show_the_selected_stall_rows_call_site) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    f.v.cursor = f.v.origin;
    render(&f, 200, 60);
    ASSERT_GT(f.v.stalls.n_sites, 2);
    ASSERT(screen_has(&f.g, "(no event here"));
    const an_stall_site *x = &f.v.stalls.sites[1];
    f.v.stalls.sel = 1;
    render(&f, 200, 60);
    char want[128];
    snprintf(want, sizeof want, " top stall 2: %" PRIu64 " call%s, ", x->count, x->count == 1 ? "" : "s");
    ASSERT(screen_has(&f.g, want));
    /* its frames, the one it is named after marked */
    size_t nf = 0;
    const st_frame *fr = st_callsite_frames(f.s, x->callsite, &nf);
    ASSERT_GT(nf, 0);
    const st_frame *named = st_site_frame(f.s, x->callsite);
    ASSERT_NOT_NULL(named);
    snprintf(want, sizeof want, " > #%zu op  %s", (size_t)(named - fr), st_str(f.s, named->func));
    ASSERT(screen_has(&f.g, want));
    fixture_close(&f);
}

/* Zoomed in to a millisecond 30 s into the trace, the ruler names one tick's time and the others
 * by their distance from it, instead of times that differ only in their last digits. */
TEST(deep_zoom_ruler_labels_count_from_an_anchor) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    ASSERT(f.v.end - f.v.origin > 31000000000ull);
    f.v.follow = 0;
    f.v.t0 = f.v.origin + 30428900000ull;
    f.v.t1 = f.v.t0 + 1000000;
    render(&f, 200, 60);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    const char *ruler = row_text(&f.g, L.ruler.y);
    /* ticks every 100 us from 30.4289 s: the first by its time, the next by its distance */
    ASSERT_STR_CONTAINS(ruler, "30.4289s");
    ASSERT_STR_CONTAINS(ruler, "+100.0\xc2\xb5s");
    ASSERT_STR_CONTAINS(ruler, "+900.0\xc2\xb5s");
    ASSERT_NULL(strstr(ruler, "30.4290s"));
    fixture_close(&f);
}

/* While a profiler trace is read whole: the file's name (sanitized), the share read, and how to
 * leave; with no total known, the bytes read alone. */
TEST(the_reading_screen_says_how_far_and_how_to_leave) {
    fixture f;
    fixture_open(&f, synth_store(3, 100));
    f.g.w = 100;
    f.g.h = 30;
    vw_render_loading(&f.v, &f.g, "big\x1b[2J.json.gz", 41u << 20, 100u << 20);
    assert_cells_safe(&f.g, 0);
    ASSERT(screen_has(&f.g, " synctop  reading big?[2J.json.gz"));
    ASSERT(screen_has(&f.g, "41%  41.0 MiB of 100.0 MiB"));
    ASSERT(screen_has(&f.g, "q stops"));
    ASSERT_EQ(count_role(&f.g, ROLE_KERNEL), 40 * 41 / 100);
    vw_render_loading(&f.v, &f.g, "-", 5u << 20, 0);
    ASSERT(screen_has(&f.g, "5.0 MiB read"));
    fixture_close(&f);
}

TEST(replay_now_hides_what_has_not_happened_yet) {
    fixture f;
    fixture_open(&f, synth_store(9, 3000));
    f.v.now = f.v.origin + (f.v.end - f.v.origin) / 2;
    vw_sites_update(&f.v);
    size_t half_sites_count = f.v.stalls.n_sites ? (size_t)f.v.stalls.sites[0].count : 0;
    render(&f, 120, 40);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 40, &L);
    /* the right part of every lane is empty */
    for (int y = L.lanes.y; y < L.lanes.y + 4; y++)
        for (int x = L.timeline.x + L.timeline.w * 3 / 4; x < L.timeline.x + L.timeline.w - 2; x++)
            ASSERT_EQ(f.g.cells[y * f.g.w + x].ch, ' ');
    f.v.now = UINT64_MAX;
    vw_sites_update(&f.v);
    ASSERT(f.v.stalls.sites[0].count > half_sites_count);
    fixture_close(&f);
}

TEST(clicks_select_a_lane_time_or_a_stall_row) {
    fixture f;
    fixture_open(&f, synth_store(10, 3000));
    render(&f, 120, 40);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 40, &L);
    vw_mouse(&f.v, f.s, 120, 40, VW_MOUSE_CLICK, L.timeline.x + 50, L.lanes.y + 2);
    ASSERT_EQ(f.v.cursor_row, 2);
    ASSERT_EQ(f.v.focus, VW_FOCUS_TIMELINE);
    uint64_t expect = f.v.t0 + (uint64_t)50 * ((f.v.t1 - f.v.t0) / (uint64_t)L.timeline.w);
    ASSERT_UEQ(f.v.cursor, expect);
    vw_mouse(&f.v, f.s, 120, 40, VW_MOUSE_CLICK, 10, L.stalls.y + 2);
    ASSERT_EQ(f.v.focus, VW_FOCUS_STALLS);
    ASSERT_EQ(f.v.stalls.sel, 1);
    fixture_close(&f);
}

/* ---- colour scheme and monochrome ---- */

TEST(scheme_table_gives_every_role_a_readable_entry) {
    for (int r = 0; r < ROLE_N_; r++) {
        const vw_scheme *e = vw_scheme_get(r);
        ASSERT_NOT_NULL(e);
        if (e->name == NULL)
            TASK_FAIL_("role %d (%c) has no entry in the scheme table", r, vw_role_letter(r));
        ASSERT(e->fg >= VW_C_DEFAULT && e->fg <= VW_C_WHITE);
        ASSERT(e->bg >= VW_C_DEFAULT && e->bg <= VW_C_WHITE);
        if (e->fg == e->bg && e->fg != VW_C_DEFAULT)
            TASK_FAIL_("role %s: foreground and background are the same colour", e->name);
        for (int k = 0; k < r; k++)
            ASSERT(strcmp(vw_scheme_get(k)->name, e->name) != 0);
    }
    ASSERT(vw_scheme_get(ROLE_N_) == NULL);
    ASSERT(vw_scheme_get(-1) == NULL);
    /* in colour, the kinds of work are different colours */
    static const int kinds[] = {ROLE_KERNEL, ROLE_MEMCPY, ROLE_MEMSET, ROLE_API, ROLE_BLOCKED, ROLE_BUBBLE};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        for (size_t j = 0; j < i; j++)
            ASSERT(vw_scheme_get(kinds[i])->fg != vw_scheme_get(kinds[j])->fg ||
                   vw_scheme_get(kinds[i])->attr != vw_scheme_get(kinds[j])->attr);
}

/* Which kind of lane a row is, from its label. */
static int row_kind(const vw_grid *g, int y) {
    const char *t = row_text(g, y);
    if (strncmp(t, "GPU", 3) == 0)
        return 1;
    if (strncmp(t, " stream", 7) == 0 || strncmp(t, " sync", 5) == 0)
        return 2;
    if (t[0] == 'T')
        return 3;
    return 4;
}

/* In monochrome, within one kind of lane, two cells that mean different things never look the
 * same: glyph and attributes together tell every role apart. */
static void assert_mono_distinct(const vw_grid *g, const vw_layout *L) {
    enum { N = 512 };
    static uint32_t ch[N];
    static int attr[N], role[N], kind[N];
    int n = 0;
    for (int y = L->lanes.y; y < L->lanes.y + L->lanes.h; y++) {
        int k = row_kind(g, y);
        for (int x = L->timeline.x; x < L->timeline.x + L->timeline.w; x++) {
            const vw_cell *c = &g->cells[y * g->w + x];
            if (c->ch == ' ')
                continue;
            int a = vw_scheme_get(c->role)->mono | c->attr;
            int seen = 0;
            for (int i = 0; i < n; i++) {
                if (kind[i] != k || ch[i] != c->ch || attr[i] != a)
                    continue;
                seen = 1;
                if (role[i] != c->role)
                    TASK_FAIL_("mono: roles %c and %c both look like U+%04X attr %x on one kind of lane",
                               vw_role_letter(role[i]), vw_role_letter(c->role), c->ch, a);
            }
            if (!seen && n < N) {
                ch[n] = c->ch, attr[n] = a, role[n] = c->role, kind[n] = k;
                n++;
            }
        }
    }
    ASSERT_GT(n, 5);
}

TEST(mono_screens_tell_every_kind_apart_without_colour) {
    static const char *const traces[] = {NULL, "sampled_rank-0.json.gz", "alexnet_a100_sync_heavy.json.gz"};
    for (size_t t = 0; t < 3; t++) {
        for (int ascii = 0; ascii <= 1; ascii++) {
            fixture f;
            fixture_open(&f, traces[t] ? kineto_store(traces[t]) : synth_store(12, 3000));
            f.v.mono = 1;
            f.v.ascii = ascii;
            vw_layout L;
            render(&f, 200, 60);
            vw_layout_for(&f.v, f.s, 200, 60, &L);
            assert_mono_distinct(&f.g, &L);
            /* zoomed in on a stall, with its call site selected: selection and cursor too */
            key(&f, 'n');
            render(&f, 200, 60);
            assert_mono_distinct(&f.g, &L);
            key(&f, '+');
            render(&f, 200, 60);
            assert_mono_distinct(&f.g, &L);
            fixture_close(&f);
        }
    }
}

/* ---- the ruler ---- */

typedef struct label {
    int col;
    char text[32];
} label;

/* The ruler's labels: runs of characters other than the line, ticks and the cursor mark. */
static int ruler_labels(const vw_grid *g, const vw_layout *L, label *out, int max) {
    int n = 0;
    for (int x = L->timeline.x; x < g->w;) {
        uint32_t c = g->cells[L->ruler.y * g->w + x].ch;
        if (c == 0x2500 || c == 0x2534 || c == 0x25BC || c == ' ') {
            x++;
            continue;
        }
        label lb = {.col = x};
        size_t k = 0;
        while (x < g->w) {
            c = g->cells[L->ruler.y * g->w + x].ch;
            if (c == 0x2500 || c == 0x2534 || c == 0x25BC || c == ' ')
                break;
            if (k + 4 < sizeof lb.text)
                k += (size_t)(c < 0x80 ? (lb.text[k] = (char)c, 1) : (lb.text[k] = 'u', 1));
            x++;
        }
        lb.text[k] = '\0';
        if (n < max)
            out[n++] = lb;
    }
    return n;
}

TEST(cursor_mark_never_cuts_a_ruler_label) {
    static const char *const traces[] = {NULL, "alexnet_a100_sync_heavy.json.gz"};
    for (size_t t = 0; t < 2; t++) {
        fixture f;
        fixture_open(&f, traces[t] ? kineto_store(traces[t]) : synth_store(13, 3000));
        render(&f, 120, 40);
        vw_layout L;
        vw_layout_for(&f.v, f.s, 120, 40, &L);
        /* every label there is: with the cursor at the left edge and at the right edge */
        label all[64], got[64];
        int n_all = 0;
        for (int end = 0; end <= 1; end++) {
            f.v.cursor = end ? f.v.t1 - 1 : f.v.t0;
            render(&f, 120, 40);
            int n = ruler_labels(&f.g, &L, got, 64);
            for (int i = 0; i < n; i++) {
                int dup = 0;
                for (int k = 0; k < n_all; k++)
                    dup |= all[k].col == got[i].col && strcmp(all[k].text, got[i].text) == 0;
                if (!dup && n_all < 64)
                    all[n_all++] = got[i];
            }
        }
        ASSERT_GE(n_all, 4);
        /* wherever the cursor is, each label shown is one of those, whole, at its place; at most
         * the one under the cursor is left out */
        uint64_t colw = (f.v.t1 - f.v.t0) / (uint64_t)L.timeline.w;
        for (int c = 0; c < L.timeline.w; c++) {
            f.v.cursor = f.v.t0 + (uint64_t)c * colw;
            render(&f, 120, 40);
            ASSERT_EQ(f.g.cells[L.ruler.y * f.g.w + L.timeline.x + c].ch, 0x25BC);
            int n = ruler_labels(&f.g, &L, got, 64);
            ASSERT_GE(n, n_all - 1);
            for (int i = 0; i < n; i++) {
                int ok = 0;
                for (int k = 0; k < n_all; k++)
                    ok |= all[k].col == got[i].col && strcmp(all[k].text, got[i].text) == 0;
                if (!ok)
                    TASK_FAIL_("cursor at column %d: ruler label \"%s\" at %d is cut: %s", c, got[i].text, got[i].col,
                               row_text(&f.g, L.ruler.y));
            }
        }
        fixture_close(&f);
    }
}

TEST(ruler_labels_deep_in_a_long_trace_tell_ticks_apart) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    render(&f, 120, 40);
    f.v.t0 = f.v.origin + 30000000000ull; /* 30 s in, 500 us wide */
    f.v.t1 = f.v.t0 + 500000;
    f.v.follow = 0;
    render(&f, 120, 40);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 40, &L);
    label got[64];
    int n = ruler_labels(&f.g, &L, got, 64);
    ASSERT_GE(n, 3);
    for (int i = 1; i < n; i++)
        if (strcmp(got[i].text, got[i - 1].text) == 0)
            TASK_FAIL_("two ticks read the same: %s", row_text(&f.g, L.ruler.y));
    fixture_close(&f);
}

/* ---- n, N and search bring what they find into view ---- */

static uint64_t colw_of(const fixture *f, int w, int h) {
    vw_layout L;
    vw_layout_for(&f->v, f->s, w, h, &L);
    return (f->v.t1 - f->v.t0) / (uint64_t)L.timeline.w;
}

TEST(next_stall_brings_a_narrow_or_distant_stall_into_view) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    render(&f, 120, 40);
    /* the whole trace (43 s) is shown: the next stall is 54 us, far narrower than a cell */
    key(&f, 'n');
    const an_block *b = NULL;
    for (size_t i = 0; i < f.an.n_blocks; i++)
        if (f.an.blocks[i].start == f.v.cursor)
            b = &f.an.blocks[i];
    ASSERT_NOT_NULL(b);
    ASSERT(b->start >= f.v.t0 && b->end <= f.v.t1);
    uint64_t cw = colw_of(&f, 120, 40);
    ASSERT_GE(b->end - b->start, 2 * cw); /* a few cells wide */
    ASSERT_LE(b->end - b->start, 16 * cw);
    render(&f, 120, 40);
    /* far away and zoomed all the way in: n and N jump there and zoom out to show it */
    for (int dir = 0; dir < 2; dir++) {
        f.v.t0 = dir ? f.v.end - 200 : f.v.origin;
        f.v.t1 = f.v.t0 + 200;
        f.v.cursor = f.v.t0;
        f.v.follow = 0;
        render(&f, 120, 40);
        key(&f, dir ? 'N' : 'n');
        b = NULL;
        for (size_t i = 0; i < f.an.n_blocks; i++)
            if (f.an.blocks[i].start == f.v.cursor)
                b = &f.an.blocks[i];
        ASSERT_NOT_NULL(b);
        ASSERT(b->start >= f.v.t0 && b->end <= f.v.t1);
        ASSERT_GE(b->end - b->start, colw_of(&f, 120, 40));
        render(&f, 120, 40);
    }
    /* a stall already well in view and wide enough: nothing moves, as in less */
    f.v.t0 = b->start - 10 * (b->end - b->start);
    f.v.t1 = b->end + 30 * (b->end - b->start);
    f.v.cursor = f.v.t0;
    render(&f, 120, 40);
    uint64_t t0 = f.v.t0, t1 = f.v.t1;
    key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, b->start);
    ASSERT_UEQ(f.v.t0, t0);
    ASSERT_UEQ(f.v.t1, t1);
    fixture_close(&f);
}

TEST(search_brings_a_narrow_match_into_view) {
    fixture f;
    fixture_open(&f, synth_store(14, 3000));
    f.v.t0 = f.v.origin;
    f.v.t1 = f.v.origin + (f.v.end - f.v.origin) * 4; /* zoomed out: every kernel under a cell */
    f.v.follow = 0;
    render(&f, 120, 40);
    key(&f, '/');
    for (const char *p = "SGEMM"; *p; p++)
        key(&f, *p);
    key(&f, VW_KEY_ENTER);
    ASSERT(screen_has(&f.g, "") && strstr(f.v.message, "found") != NULL);
    /* the match: the event the cursor is on, in the cursor row's lane */
    render(&f, 120, 40);
    ASSERT(screen_has(&f.g, "ampere_sgemm_128x64_tn"));
    size_t lane = SIZE_MAX;
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        for (size_t i = 0; i < n; i++)
            if (e[i].start == f.v.cursor && strstr(st_str(f.s, st_ev_name(f.s, &e[i])), "sgemm")) {
                lane = l;
                ASSERT(e[i].start >= f.v.t0 && st_ev_end(f.s, &e[i]) <= f.v.t1);
                ASSERT_GE(st_ev_dur(f.s, &e[i]), colw_of(&f, 120, 40));
            }
    }
    ASSERT(lane != SIZE_MAX);
    fixture_close(&f);
}

/* ---- header figures: replay's now, the visible window ---- */

static const an_gpu_fig *fig0(const vw_state *v) {
    ASSERT(v->header.figs_ready);
    ASSERT_GE(v->header.n_figs, 1);
    return &v->header.figs[0];
}

static void expect_figs_match_analysis(fixture *f, uint64_t a, uint64_t b) {
    an_opts o = {.t0 = a, .t1 = b};
    an_result r;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(f->s, &o, &r, &err));
    ASSERT_GE(r.n_devices, 1);
    const an_gpu_fig *g = fig0(&f->v);
    ASSERT_UEQ(g->span_ns, b - a);
    ASSERT_UEQ(g->busy_ns, r.devices[0].busy_ns);
    ASSERT_UEQ(g->idle_ns, r.devices[0].idle_ns);
    ASSERT_UEQ(g->blocked_ns, r.devices[0].blocked_ns);
    an_result_free(&r);
}

TEST(gpu_figures_follow_replay_now_and_the_window) {
    fixture f;
    fixture_open(&f, synth_store(15, 6000));
    render(&f, 160, 40);
    char whole[512], half[512];
    snprintf(whole, sizeof whole, "%s", row_text(&f.g, 1));
    /* replay playing, now at 40%: the figures are those of the trace up to now */
    uint64_t span = f.v.end - f.v.origin;
    f.v.now = f.v.origin + span * 2 / 5;
    vw_sites_update(&f.v);
    ASSERT_EQ(vw_figs_update(&f.v, f.s, 0), 1);
    expect_figs_match_analysis(&f, f.v.origin, f.v.now);
    uint64_t blocked_40 = fig0(&f.v)->blocked_ns;
    render(&f, 160, 40);
    snprintf(half, sizeof half, "%s", row_text(&f.g, 1));
    ASSERT(strcmp(whole, half) != 0);
    char want[64], d[32];
    vw_fmt_dur(d, sizeof d, blocked_40, 0);
    snprintf(want, sizeof want, "host blocked %s", d);
    ASSERT_STR_CONTAINS(half, want);
    /* now moves on: a little work at a time (as the viewer does between frames) gives the same */
    f.v.now = f.v.origin + span * 3 / 4;
    int steps = 0;
    while (vw_figs_update(&f.v, f.s, 50) == 0)
        steps++;
    ASSERT_GT(steps, 3);
    expect_figs_match_analysis(&f, f.v.origin, f.v.now);
    ASSERT_GT(fig0(&f.v)->blocked_ns, blocked_40);
    /* w: what the window shows, wherever it is */
    f.v.now = UINT64_MAX;
    key(&f, 'v');
    ASSERT_EQ(f.v.header.scope_window, 1);
    for (int i = 1; i <= 3; i++) {
        f.v.t0 = f.v.origin + span * (uint64_t)i / 5;
        f.v.t1 = f.v.t0 + span / 7;
        f.v.follow = 0;
        ASSERT_EQ(vw_figs_update(&f.v, f.s, 0), 1);
        expect_figs_match_analysis(&f, f.v.t0, f.v.t1);
        render(&f, 160, 40);
        ASSERT_STR_CONTAINS(row_text(&f.g, 1), "in view");
    }
    key(&f, 'v');
    render(&f, 160, 40);
    ASSERT_STR_EQ(row_text(&f.g, 1), whole);
    fixture_close(&f);
}

TEST(stream_bubbles_are_drawn_on_their_own_lanes) {
    fixture f;
    fixture_open(&f, kineto_store("sampled_rank-0.json.gz"));
    /* a stream-level bubble while the GPU as a whole was busy: only the stream's lane shows it */
    const an_bubble *sb = NULL;
    for (size_t i = 0; i < f.an.n_bubbles && sb == NULL; i++) {
        const an_bubble *x = &f.an.bubbles[i];
        if (x->lane == AN_DEVICE_LANE || x->end - x->start < 200000)
            continue;
        int in_device = 0;
        for (size_t k = 0; k < f.an.n_bubbles; k++) {
            const an_bubble *y = &f.an.bubbles[k];
            in_device |= y->lane == AN_DEVICE_LANE && y->start < x->end && x->start < y->end;
        }
        if (!in_device)
            sb = x;
    }
    ASSERT_NOT_NULL(sb);
    uint64_t d = sb->end - sb->start;
    f.v.t0 = sb->start - d / 4;
    f.v.t1 = sb->end + d / 4;
    f.v.follow = 0;
    f.v.cursor = f.v.t0;
    f.v.cursor_row = 0;
    render(&f, 200, 60);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    char want[32];
    snprintf(want, sizeof want, " stream %u", st_lane_get(f.s, sb->lane)->id);
    int y = -1;
    for (int r = L.lanes.y; r < L.lanes.y + L.lanes.h; r++)
        if (strncmp(row_text(&f.g, r), want, strlen(want)) == 0 && row_text(&f.g, r)[strlen(want)] == ' ')
            y = r;
    ASSERT(y >= 0);
    int bubbles = 0, device_bubbles = 0;
    for (int x = L.timeline.x + L.timeline.w * 3 / 10; x < L.timeline.x + L.timeline.w * 7 / 10; x++) {
        bubbles += f.g.cells[y * f.g.w + x].role == ROLE_BUBBLE;
        device_bubbles += f.g.cells[L.lanes.y * f.g.w + x].role == ROLE_BUBBLE;
    }
    ASSERT_GT(bubbles, L.timeline.w / 3);
    ASSERT_EQ(device_bubbles, 0);
    fixture_close(&f);
}

/* ---- wide characters ---- */

TEST(wide_characters_in_names_take_two_cells) {
    if (setlocale(LC_CTYPE, "C.UTF-8") == NULL)
        fprintf(stderr, "no C.UTF-8 locale: the view's own width table is used\n");
    ASSERT_EQ(vw_char_width(0x8BAD), 2);  /* 训 */
    ASSERT_EQ(vw_char_width(0x1F680), 2); /* rocket */
    ASSERT_EQ(vw_char_width('a'), 1);
    ASSERT_EQ(vw_char_width(0xE9), 1);
    ASSERT_EQ(vw_char_width(0x301), 0); /* combining acute */
    st_store *s = st_store_new(NULL);
    tp_enc_opts eo = {.producer = 5};
    tp_enc *enc = tp_enc_new(&eo);
    uint32_t tname = tp_enc_intern_cstr(enc, "\xe8\xae\xad\xe7\xbb\x83\xf0\x9f\x9a\x80x"); /* 训练🚀x */
    uint32_t kname = tp_enc_intern_cstr(enc, "\xe5\x8d\xb7\xe7\xa7\xaf\xe6\xa0\xb8\xe5\xbf\x83_conv"); /* 卷积核心_conv */
    uint32_t cmd = tp_enc_intern_cstr(enc, "python \xe8\xae\xad\xe7\xbb\x83.py");
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 1, .cmdline = cmd, .rank = -1, .world = -1};
    tp_enc_add(enc, &p);
    tp_thread th = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 9, .name = tname, .pid = 1};
    tp_enc_add(enc, &th);
    for (int i = 0; i < 50; i++) {
        tp_kernel k = {.kind = TP_K_KERNEL, .device = 0, .stream = 3, .start = 1000000 + (uint64_t)i * 10000,
                       .end = 1000000 + (uint64_t)i * 10000 + 9000, .name = kname, .grid = {1, 1, 1}, .block = {1, 1, 1}};
        tp_enc_add(enc, &k);
        tp_api a = {.kind = TP_K_API, .device = 0, .tid = 9, .start = k.start, .end = k.start + 3000, .name = kname};
        tp_enc_add(enc, &a);
    }
    add_enc(s, enc);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    fixture f;
    fixture_open(&f, s);
    f.v.cursor_row = 1; /* the stream: the detail line names its kernel */
    f.v.cursor = 1000000 + 4000;
    for (int w = 80; w <= 200; w += 13) {
        render(&f, w, 30);
        assert_cells_safe(&f.g, 0);
        ASSERT(screen_has(&f.g, "python \xe8\xae\xad\xe7\xbb\x83.py"));
        ASSERT(screen_has(&f.g, "\xe5\x8d\xb7\xe7\xa7\xaf\xe6\xa0\xb8\xe5\xbf\x83_conv"));
        ASSERT(!screen_has(&f.g, "??"));
        /* every row is exactly w columns wide on a terminal, and each wide character is followed
         * by its second half */
        for (int y = 0; y < 30; y++) {
            int cols = 0;
            for (int x = 0; x < w; x++) {
                uint32_t c = f.g.cells[y * w + x].ch;
                if (c == VW_CH_WIDE) {
                    ASSERT(x > 0 && vw_char_width(f.g.cells[y * w + x - 1].ch) == 2);
                    continue;
                }
                int cw = vw_char_width(c);
                if (cw == 2)
                    ASSERT(x + 1 < w && f.g.cells[y * w + x + 1].ch == VW_CH_WIDE);
                cols += cw;
            }
            ASSERT_EQ(cols, w);
        }
    }
    /* the thread's lane label: the name fits its 12 columns whole, or ends in an ellipsis */
    render(&f, 80, 30);
    ASSERT(screen_has(&f.g, "T9 \xe8\xae\xad\xe7\xbb\x83\xf0\x9f\x9a\x80x"));
    /* the help box drawn over wide characters leaves no half of one behind */
    key(&f, '?');
    render(&f, 80, 30);
    for (int i = 0; i < 80 * 30; i++)
        if (f.g.cells[i].ch == VW_CH_WIDE)
            ASSERT(i % 80 > 0 && vw_char_width(f.g.cells[i - 1].ch) == 2);
    fixture_close(&f);
}

/* ---- the key table ---- */

TEST(key_table_drives_handler_bar_and_help) {
    /* every key the help names runs a command, and the named keys are the ones bound */
    ASSERT_EQ(vw_cmd_of_key('q'), VW_CMD_QUIT);
    ASSERT_EQ(vw_cmd_of_key(VW_KEY_F10), VW_CMD_QUIT);
    ASSERT_EQ(vw_cmd_of_key('n'), VW_CMD_NEXT_STALL);
    ASSERT_EQ(vw_cmd_of_key('\r'), VW_CMD_ENTER);
    ASSERT_EQ(vw_cmd_of_key('x'), VW_CMD_NONE);
    char lines[40][96];
    size_t n = vw_help_lines(lines, 40);
    ASSERT_GT(n, 10);
    int seen_left = 0, seen_quit = 0;
    for (size_t i = 0; i < n; i++) {
        seen_left |= strncmp(lines[i], "left/right h/l ", 15) == 0;
        seen_quit |= strncmp(lines[i], "?/q F1/F10 ", 11) == 0 && strstr(lines[i], "quit") != NULL;
        /* each line's first key names a key that runs a command */
        char first[32];
        size_t fl = 1; /* up to the first space or the "/" between two keys ("/" alone is a key) */
        while (fl < sizeof first - 1 && lines[i][fl] && lines[i][fl] != ' ' && lines[i][fl] != '/')
            fl++;
        memcpy(first, lines[i], fl);
        first[fl] = '\0';
        int bound = 0;
        for (int k = 0x21; k < 0x7F && !bound; k++)
            bound = vw_key_name(k) && strcmp(vw_key_name(k), first) == 0 && vw_cmd_of_key(k) != VW_CMD_NONE;
        for (int k = VW_KEY_UP; k <= VW_KEY_F10 && !bound; k++)
            bound = vw_key_name(k) && strcmp(vw_key_name(k), first) == 0 && vw_cmd_of_key(k) != VW_CMD_NONE;
        bound |= strcmp(first, "space") == 0 && vw_cmd_of_key(' ') == VW_CMD_PLAY;
        if (!bound)
            TASK_FAIL_("help line \"%s\" names no bound key", lines[i]);
    }
    ASSERT(seen_left);
    ASSERT(seen_quit);
    /* the bar differs by mode where the table says so */
    const char *k[16], *l[16];
    size_t nr = vw_bar_items(0, k, l, 16), nl = vw_bar_items(1, k, l, 16);
    ASSERT_EQ(nr, 10);
    ASSERT_EQ(nl, 10);
    ASSERT_STR_EQ(k[7], "F");
    ASSERT_STR_EQ(l[7], "Follow");
    ASSERT_STR_EQ(l[1], "Pause");

    fixture f;
    fixture_open(&f, synth_store(8, 3000));
    render(&f, 80, 24);
    /* the whole help fits an 80x24 screen, down to its last line */
    key(&f, '?');
    render(&f, 80, 24);
    ASSERT(screen_has(&f.g, "synctop help"));
    ASSERT(screen_has(&f.g, "red host spans"));
    ASSERT(screen_has(&f.g, "mouse"));
    key(&f, 'q'); /* q closes the help, not the viewer */
    ASSERT_EQ(f.v.help, 0);
    /* G and g keep the zoom: the window's width is what it was */
    key(&f, '+');
    key(&f, '+');
    key(&f, '+');
    uint64_t width = f.v.t1 - f.v.t0;
    key(&f, 'G');
    ASSERT_UEQ(f.v.t1 - f.v.t0, width);
    ASSERT(f.v.t1 >= f.v.end);
    ASSERT_UEQ(f.v.cursor, f.v.end - 1);
    key(&f, 'g');
    ASSERT_UEQ(f.v.t1 - f.v.t0, width);
    ASSERT_UEQ(f.v.t0, f.v.origin);
    fixture_close(&f);
}

/* The window stays on the trace: a jump to an early stall does not show half a screen before its
 * start, and panning right stops near its end. */
TEST(the_window_stays_on_the_trace) {
    fixture f;
    fixture_open(&f, synth_store(8, 3000));
    render(&f, 80, 24);
    key(&f, 'n');
    ASSERT_GE(f.v.t0, f.v.origin);
    for (int i = 0; i < 50; i++)
        key(&f, 'L');
    uint64_t width = f.v.t1 - f.v.t0;
    ASSERT_LE(f.v.t1, f.v.end + width / 50 + 1);
    ASSERT_GE(f.v.cursor, f.v.t0);
    ASSERT_LT(f.v.cursor, f.v.t1);
    for (int i = 0; i < 50; i++)
        key(&f, 'H');
    ASSERT_UEQ(f.v.t0, f.v.origin);
    fixture_close(&f);
}

/* Search as in less: "/" and enter alone repeats the last term; the match is counted ("2 of N")
 * and the search wraps to the start with a notice. */
TEST(search_repeats_counts_and_wraps) {
    fixture f;
    fixture_open(&f, synth_store(14, 3000));
    render(&f, 120, 40);
    /* the matches, counted independently: events named like "sgemm", case-insensitive */
    uint64_t total = 0;
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        for (size_t i = 0; i < n; i++)
            total += st_ev_name(f.s, &e[i]) && strcasestr(st_str(f.s, st_ev_name(f.s, &e[i])), "sgemm") != NULL;
    }
    ASSERT_GT(total, 2);
    key(&f, '/');
    for (const char *p = "sgemm"; *p; p++)
        key(&f, *p);
    key(&f, VW_KEY_ENTER);
    char want[96];
    snprintf(want, sizeof want, "of %" PRIu64, total);
    ASSERT_STR_CONTAINS(f.v.message, want);
    uint64_t first = f.v.cursor;
    key(&f, '/');
    key(&f, VW_KEY_ENTER); /* the same term again: the next match */
    ASSERT_STR_CONTAINS(f.v.message, "sgemm");
    ASSERT(f.v.cursor > first);
    /* from the last match, the next one wraps to the start */
    key(&f, '/');
    f.v.cursor = f.v.end; /* past every match (while the prompt is open nothing moves it) */
    key(&f, VW_KEY_ENTER);
    ASSERT_STR_CONTAINS(f.v.message, "wrapped to the start");
    ASSERT_STR_CONTAINS(f.v.message, "1 of");
    fixture_close(&f);
}

/* An empty trace says so instead of "REPLAY ▶"; in monochrome the help does not speak of red. */
TEST(empty_trace_and_monochrome_help_say_what_is_shown) {
    fixture f;
    st_store *s = st_store_new(NULL);
    st_store_commit(s);
    fixture_open(&f, s);
    render(&f, 80, 24);
    ASSERT(screen_has(&f.g, "no events"));
    fixture_close(&f);
    fixture_open(&f, synth_store(8, 3000));
    f.v.mono = 1;
    key(&f, '?');
    render(&f, 80, 24);
    ASSERT(screen_has(&f.g, "reversed host spans"));
    ASSERT(!screen_has(&f.g, "red host spans"));
    fixture_close(&f);
}

/* A copy of the first row of g that holds needle (and also, when not NULL); NULL when none. */
static char *row_with(const vw_grid *g, const char *needle, const char *also) {
    for (int y = 0; y < g->h; y++) {
        const char *t = row_text(g, y);
        if (strstr(t, needle) != NULL && (also == NULL || strstr(t, also) != NULL))
            return strdup(t);
    }
    return NULL;
}

/* The stalls panel sorts by total, longest, count or GPU idle caused (> and <, as in htop), marks
 * the column, and keeps the selection on its call site. */
TEST(stalls_panel_sorts_by_column) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    render(&f, 200, 60);
    ASSERT_GT(f.v.stalls.n_sites, 2);
    for (size_t i = 1; i < f.v.stalls.n_sites; i++)
        ASSERT(f.v.stalls.sites[i - 1].total_ns >= f.v.stalls.sites[i].total_ns);
    ASSERT(screen_has(&f.g, "TOTAL\xe2\x96\xbc"));
    f.v.stalls.sel = 2;
    an_stall_site chosen = f.v.stalls.sites[2];
    key(&f, '>');
    ASSERT_STR_CONTAINS(f.v.message, "longest");
    for (size_t i = 1; i < f.v.stalls.n_sites; i++)
        ASSERT(f.v.stalls.sites[i - 1].max_ns >= f.v.stalls.sites[i].max_ns);
    ASSERT_UEQ(f.v.stalls.sites[f.v.stalls.sel].callsite, chosen.callsite);
    ASSERT_EQ(f.v.stalls.sites[f.v.stalls.sel].name, chosen.name);
    /* the column sorted by first: a space between the panel's name and its label, and the other
     * labels where they were */
    char *head_total = row_with(&f.g, "top stalls", NULL);
    ASSERT_NOT_NULL(head_total);
    key(&f, '>');
    for (size_t i = 1; i < f.v.stalls.n_sites; i++)
        ASSERT(f.v.stalls.sites[i - 1].count >= f.v.stalls.sites[i].count);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, " top stalls COUNT\xe2\x96\xbc "));
    char *head_count = row_with(&f.g, "top stalls", NULL);
    ASSERT_NOT_NULL(head_count);
    static const char *const labels[] = {"MAX", "%WALL", "GPU IDLE", "CAUSE", "CALL SITE"};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        ASSERT_EQ(strstr(head_count, labels[i]) - head_count, strstr(head_total, labels[i]) - head_total);
    free(head_total);
    free(head_count);
    key(&f, '>');
    for (size_t i = 1; i < f.v.stalls.n_sites; i++)
        ASSERT(f.v.stalls.sites[i - 1].gpu_idle_ns >= f.v.stalls.sites[i].gpu_idle_ns);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "GPU IDLE\xe2\x96\xbc"));
    /* the GPU idle a site caused is the sum of its stalls' (the analysis' own figure) */
    uint64_t sum = 0;
    const an_stall_site *top = &f.v.stalls.sites[0];
    for (size_t i = 0; i < f.an.n_blocks; i++)
        if (f.an.blocks[i].producer == top->producer && f.an.blocks[i].callsite == top->callsite &&
            (top->callsite || f.an.blocks[i].name == top->name))
            sum += f.an.blocks[i].gpu_idle_ns;
    ASSERT_UEQ(top->gpu_idle_ns, sum);
    key(&f, '<');
    key(&f, '<');
    key(&f, '<');
    ASSERT_EQ(f.v.stalls.sort, AN_STALL_BY_TOTAL);
    fixture_close(&f);
}

/* Enter on a row of the stalls panel opens that call site's stall (its longest), not the event
 * that happened to be under the cursor. */
TEST(enter_on_a_stall_row_opens_that_sites_stall) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    render(&f, 200, 60);
    ASSERT_GT(f.v.stalls.n_sites, 2);
    key(&f, VW_KEY_TAB);
    ASSERT_EQ(f.v.focus, VW_FOCUS_STALLS);
    f.v.stalls.sel = 1;
    an_stall_site chosen = f.v.stalls.sites[1];
    f.v.cursor = f.v.origin; /* on nothing of that site */
    key(&f, VW_KEY_ENTER);
    ASSERT_EQ(f.v.detail, 1);
    /* the cursor is on a span of the chosen site, as long as the site's longest */
    const an_block *at = NULL;
    for (size_t i = 0; i < f.an.n_blocks && at == NULL; i++)
        if (f.an.blocks[i].start == f.v.cursor && an_stall_site_has(&chosen, &f.an.blocks[i]))
            at = &f.an.blocks[i];
    ASSERT_NOT_NULL(at);
    ASSERT_UEQ(at->end - at->start, chosen.max_ns);
    ASSERT_EQ(f.v.stalls.sel, 1);
    /* Enter in the timeline still toggles the pane */
    key(&f, VW_KEY_TAB);
    key(&f, VW_KEY_ENTER);
    ASSERT_EQ(f.v.detail, 0);
    fixture_close(&f);
}

/* Stall rows that would read the same show the frame where their stacks part (the trace's own
 * Python frames: torch/cuda/__init__.py(975) synchronize and torch/profiler/profiler.py(811) step). */
TEST(stall_rows_that_read_the_same_are_told_apart) {
    fixture f;
    fixture_open(&f, kineto_store("qwen_h100_with_stack.json.gz"));
    f.v.now = f.v.end;
    vw_sites_update(&f.v);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "profile.py:34 run_torch_profiler in cudaDeviceSynchronize (via torch/cuda/__init__.py:975 synchronize)"));
    ASSERT(screen_has(&f.g, "profile.py:34 run_torch_profiler in cudaDeviceSynchronize (via torch/profiler/profiler.py:811 step)"));
    /* and again after a sort */
    key(&f, '>');
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "(via torch/profiler/profiler.py:811 step)"));
    fixture_close(&f);
}

/* The display row of a lane, by the rule store.h states for lanes: a GPU's summary row comes before
 * the first lane of each (producer, device). */
static int display_row(const st_store *s, size_t lane) {
    int row = 0;
    uint32_t last_p = UINT32_MAX;
    uint16_t last_d = TP_NO_DEVICE;
    for (size_t l = 0; l <= lane; l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->device != TP_NO_DEVICE && (li->producer != last_p || li->device != last_d))
            row++;
        last_p = li->producer;
        last_d = li->device;
        row += l < lane;
    }
    return row;
}

/* Perfetto's keys: w/s zoom, a/d pan, f fits the event under the cursor, m marks its span; the
 * detail pane names the other end of a launch with the delay between the call and the start. */
TEST(perfetto_keys_zoom_pan_fit_mark_and_the_launch_of_a_kernel) {
    fixture f;
    fixture_open(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"));
    render(&f, 200, 60);
    /* the longest kernel, and its launch found by a scan of every host call of its process */
    const st_event *k = NULL, *launch = NULL;
    size_t kl = 0, ll = 0;
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        for (size_t i = 0; i < n; i++)
            if (st_lane_get(f.s, l)->kind == ST_LANE_STREAM && st_ev_kind(f.s, &e[i]) == TP_K_KERNEL && e[i].corr &&
                (k == NULL || st_ev_dur(f.s, &e[i]) > st_ev_dur(f.s, k))) {
                k = &e[i];
                kl = l;
            }
    }
    ASSERT_NOT_NULL(k);
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        if (st_lane_get(f.s, l)->kind != ST_LANE_THREAD || st_lane_get(f.s, l)->producer != st_lane_get(f.s, kl)->producer)
            continue;
        for (size_t i = 0; i < n; i++)
            if (e[i].corr == k->corr && e[i].start <= k->start) {
                launch = &e[i];
                ll = l;
            }
    }
    ASSERT_NOT_NULL(launch);

    /* w and s halve and double the window around the cursor; a and d pan and come back */
    f.v.cursor = k->start;
    f.v.cursor_row = display_row(f.s, kl);
    key(&f, 'w');
    key(&f, 'w');
    uint64_t w0 = f.v.t1 - f.v.t0, t0 = f.v.t0;
    key(&f, 'w');
    ASSERT(f.v.t1 - f.v.t0 >= w0 / 2 - 1 && f.v.t1 - f.v.t0 <= w0 / 2 + 1);
    key(&f, 's');
    ASSERT(f.v.t1 - f.v.t0 >= w0 - 2 && f.v.t1 - f.v.t0 <= w0 + 2);
    w0 = (f.v.end - f.v.origin) / 8; /* in the middle of the trace: panning is not stopped at an end */
    t0 = f.v.origin + (f.v.end - f.v.origin) / 2;
    f.v.t0 = t0;
    f.v.t1 = t0 + w0;
    key(&f, 'd');
    ASSERT(f.v.t0 > t0);
    key(&f, 'a');
    ASSERT_UEQ(f.v.t0, t0);

    /* f: the kernel fills most of the window */
    f.v.cursor = k->start;
    key(&f, 'f');
    uint64_t d = st_ev_dur(f.s, k);
    ASSERT(f.v.t0 <= k->start && f.v.t1 >= st_ev_end(f.s, k));
    ASSERT(d * 5 / 4 + 1 >= f.v.t1 - f.v.t0);
    render(&f, 200, 60);
    /* the kernel's bar now spans most of the lane: its name is written inside it, reversed */
    {
        vw_layout LL;
        vw_layout_for(&f.v, f.s, 200, 60, &LL);
        const char *kn = st_str(f.s, st_ev_name(f.s, k));
        if (strncmp(kn, "void ", 5) == 0)
            kn += 5;
        char head[24];
        snprintf(head, sizeof head, "%.20s", kn);
        int y = LL.lanes.y + display_row(f.s, kl) - f.v.row_scroll;
        const char *at = strstr(row_text(&f.g, y), head);
        ASSERT_NOT_NULL(at);
        int x = 0; /* its column: the row's text up to it, counted in code points */
        for (const char *p = row_text(&f.g, y); p < at; p++)
            x += ((unsigned char)*p & 0xC0) != 0x80;
        ASSERT(f.g.cells[y * f.g.w + x].attr & VW_A_REVERSE);
    }
    /* the detail names the launch and the time from the call to the kernel's start */
    char nm[128], dly[32], want[256];
    snprintf(nm, sizeof nm, "%s", st_str(f.s, st_ev_name(f.s, launch)));
    vw_fmt_dur(dly, sizeof dly, k->start - launch->start, 0);
    snprintf(want, sizeof want, "launched by %s on thread %u; %s from the call to the start", nm,
             st_lane_get(f.s, ll)->id, dly);
    ASSERT(screen_has(&f.g, want));

    /* m marks the kernel: its duration, on the ruler and in the message; m again unmarks */
    key(&f, 'm');
    ASSERT(f.v.ruler.marked);
    ASSERT_UEQ(f.v.ruler.mark0, k->start);
    ASSERT_UEQ(f.v.ruler.mark1, st_ev_end(f.s, k));
    char dur[32];
    vw_fmt_dur(dur, sizeof dur, d, 0);
    ASSERT_STR_CONTAINS(f.v.message, dur);
    render(&f, 200, 60);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_STR_CONTAINS(row_text(&f.g, L.ruler.y), dur);
    key(&f, 'm');
    ASSERT(!f.v.ruler.marked);

    /* on the call: the kernel it launched, and how long after the call it started */
    f.v.cursor_row = display_row(f.s, ll);
    f.v.cursor = launch->start;
    key(&f, 'f');
    render(&f, 200, 60);
    snprintf(nm, sizeof nm, "%s", st_str(f.s, st_ev_name(f.s, k)));
    snprintf(want, sizeof want, "kernel %.40s", nm);
    ASSERT(screen_has(&f.g, want));
    snprintf(want, sizeof want, "starts %s after the call", dly);
    ASSERT(screen_has(&f.g, want));
    fixture_close(&f);
}

/* A profiler trace recorded with_stack: the stall behind a hidden `if tensor:` in transformers
 * (kineto_expected.py --sites: cudaStreamSynchronize inside aten::_local_scalar_dense < aten::item
 * < aten::is_nonzero < transformers/modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa) is
 * named in the stalls panel by that line and the op, and its detail pane marks that frame. */
TEST(profiler_stacks_name_the_program_line_and_op) {
    fixture f;
    fixture_open(&f, kineto_store("qwen_h100_with_stack.json.gz"));
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "transformers/modeling_attn_mask_utils.py:243 _ignore_causal_mask_sdpa [aten::is_nonzero] "
                            "in cudaStreamSynchronize"));
    /* the cause column: the hidden branch, and the profiler's own device-wide syncs */
    ASSERT(screen_has(&f.g, " if tensor transformers/modeling_attn_mask_utils.py:243"));
    ASSERT(screen_has(&f.g, " dev sync  moca/library/profiling/profile.py:34"));
    /* the two cudaDeviceSynchronize calls by the program's line, not torch's */
    ASSERT(screen_has(&f.g, "moca/library/profiling/profile.py:34 run_torch_profiler in cudaDeviceSynchronize"));
    ASSERT(!screen_has(&f.g, "torch/cuda/__init__.py:975 synchronize in"));
    /* walk to the stream sync: its detail pane */
    size_t i = 0;
    while (i < f.an.n_blocks && strcmp(st_str(f.s, f.an.blocks[i].name), "cudaStreamSynchronize") != 0)
        i++;
    ASSERT(i < f.an.n_blocks);
    for (size_t k = 0; k < f.an.n_blocks && f.v.cursor != f.an.blocks[i].start; k++)
        key(&f, 'n');
    ASSERT_UEQ(f.v.cursor, f.an.blocks[i].start);
    key(&f, VW_KEY_ENTER);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "   #0 op  aten::_local_scalar_dense"));
    ASSERT(screen_has(&f.g, "   #2 op  aten::is_nonzero"));
    ASSERT(screen_has(&f.g, " > #3 py  transformers/modeling_attn_mask_utils.py:243  _ignore_causal_mask_sdpa"));
    /* at 80x24 the pane is short: it moves on to keep the marked frame in sight */
    render(&f, 80, 24);
    ASSERT(screen_has(&f.g, " > #3 py  transformers/"));
    fixture_close(&f);
}

/* Two ranks each with a GPU: the header, the lanes and the stalls panel say which rank each is,
 * and at 80 columns the count of GPUs not shown does not cover the figures. */
TEST(ranks_are_told_apart_in_header_lanes_and_stalls) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    char path[1024];
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/sampled_rank-%d.json.gz", KINETO_TRACE_DIR, r);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    }
    ASSERT_EQ(st_producer_count(s), 2);
    fixture f;
    fixture_open(&f, s);
    render(&f, 80, 24);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 80, 24, &L);
    ASSERT_EQ(L.gpus.h, 1);
    char *hdr = row_text(&f.g, L.gpus.y);
    ASSERT_STR_CONTAINS(hdr, "r0:GPU0");
    ASSERT_STR_CONTAINS(hdr, "host blocked");
    ASSERT_STR_CONTAINS(hdr, "(+1 more)");
    ASSERT(strstr(hdr, "host blocked") < strstr(hdr, "(+1 more)"));
    render(&f, 200, 60);
    /* the stalls panel's rows: the rank, then the operator that made the call */
    ASSERT(screen_has(&f.g, " r0 aten::to in cudaMem"));
    ASSERT(screen_has(&f.g, " r1 aten::to in cudaMem"));
    ASSERT(screen_has(&f.g, " r0:GPU0 ["));
    ASSERT(screen_has(&f.g, " r1:GPU1 ["));
    ASSERT(screen_has(&f.g, "\nr1:GPU1 ")); /* a lane label */
    /* each process's row has its figures at a glance: the analysis' busy share of its GPU */
    for (uint32_t p = 0; p < 2; p++) {
        char want[48];
        const an_device *d = NULL;
        for (size_t i = 0; i < f.an.n_devices; i++)
            if (f.an.devices[i].producer == p)
                d = &f.an.devices[i];
        ASSERT_NOT_NULL(d);
        char head[16];
        snprintf(head, sizeof head, "\xe2\x96\xbe" "r%u ", p);
        snprintf(want, sizeof want, "busy %4.1f%%  host blocked", 100.0 * (double)d->busy_ns / (double)d->span_ns);
        int found = 0;
        for (int y = 0; y < 60 && !found; y++) {
            const char *row = row_text(&f.g, y);
            found = strncmp(row, head, strlen(head)) == 0 && strstr(row, want) != NULL;
        }
        if (!found)
            TASK_FAIL_("no row of %s with \"%s\"", head, want);
    }
    fixture_close(&f);
}

/* Four processes at 80x24, scrolled to the last row: the top lane row names the process the rows
 * under it belong to, even when its own row has scrolled away. */
static void check_scrolled_rows_name_their_process(void) {
    err_msg err = {{0}};
    char path[1024];
    st_store *s = st_store_new(NULL);
    static const char *const files[] = {"sampled_rank-0.json.gz", "sampled_rank-1.json.gz",
                                        "alexnet_a100_sync_heavy.json.gz", "event_sync_multi_stream.json.gz"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, files[i]);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    }
    size_t np = st_producer_count(s);
    ASSERT_EQ(np, 4);
    /* each process's rows: its own, a row per GPU, its lanes (lanes come grouped by process) */
    int first[8] = {0}, total = 0;
    uint32_t lastp = UINT32_MAX;
    uint16_t lastd = TP_NO_DEVICE;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        if (li->producer != lastp)
            first[li->producer] = total++;
        if (li->device != TP_NO_DEVICE && (li->producer != lastp || li->device != lastd))
            total++;
        lastp = li->producer;
        lastd = li->device;
        total++;
    }
    fixture f;
    fixture_open(&f, s);
    render(&f, 80, 24);
    f.v.cursor_row = total - 1;
    render(&f, 80, 24);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 80, 24, &L);
    ASSERT_EQ(f.v.row_scroll, total - L.lanes.h);
    uint32_t owner = 0;
    for (uint32_t p = 0; p < np; p++)
        if (first[p] <= f.v.row_scroll)
            owner = p;
    ASSERT(first[owner] < f.v.row_scroll); /* its own row is above the window */
    const st_producer_info *pi = st_producer_get(f.s, owner);
    char want[32];
    /* named by rank, or by pid when the rank does not tell it from the others (traces without
     * distributedInfo all say rank 0) */
    int shared = 0;
    for (uint32_t p = 0; p < np; p++)
        shared |= p != owner && st_producer_get(f.s, p)->rank == pi->rank;
    if (pi->rank >= 0 && !shared)
        snprintf(want, sizeof want, "\xe2\x96\xbe" "r%d", pi->rank);
    else
        snprintf(want, sizeof want, "\xe2\x96\xbe" "p%u", pi->pid);
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y), want);
    fixture_close(&f);
}

/* Lanes as a tree (Nsight Systems'): a row per process when there are several, whose name stays at
 * the top while its rows scroll; c folds the process, GPU or thread under the cursor, C unfolds all,
 * e hides the lanes with nothing in the window; a jump to a stall unfolds what hides it. */
TEST(lanes_fold_by_process_gpu_and_thread_and_idle_lanes_hide) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    char path[1024];
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/sampled_rank-%d.json.gz", KINETO_TRACE_DIR, r);
        ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    }
    /* what the store holds, counted here: lanes and devices per producer */
    size_t lanes[2] = {0, 0}, streams0 = 0;
    for (size_t l = 0; l < st_lane_count(s); l++) {
        const st_lane_info *li = st_lane_get(s, l);
        ASSERT(li->producer < 2);
        lanes[li->producer]++;
        streams0 += li->producer == 0 && li->kind == ST_LANE_STREAM;
    }
    fixture f;
    fixture_open(&f, s);
    render(&f, 200, 60);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    /* rows: process r0, its GPU row, its lanes, process r1, its GPU row, its lanes */
    size_t all = 2 + 2 + lanes[0] + lanes[1];
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y), "\xe2\x96\xbe" "r0");
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y), "rank 0/128");
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y + 2 + (int)lanes[0]), "\xe2\x96\xbe" "r1");
    ASSERT_EQ(L.lanes.h, (int)all);

    /* c on r0's first stream folds r0's GPU: its streams go, its row stays, the cursor is on it */
    f.v.cursor_row = 2;
    key(&f, 'c');
    ASSERT_STR_CONTAINS(f.v.message, "folded");
    ASSERT_EQ(f.v.cursor_row, 1);
    render(&f, 200, 60);
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_EQ(L.lanes.h, (int)(all - streams0));
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y + 1), "\xe2\x96\xb8" "r0:GPU0");
    /* c on the process row folds all of r0 into its one row */
    f.v.cursor_row = 0;
    key(&f, 'c');
    render(&f, 200, 60);
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_EQ(L.lanes.h, (int)(2 + 1 + lanes[1]));
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y), "\xe2\x96\xb8" "r0");
    ASSERT_STR_CONTAINS(row_text(&f.g, L.lanes.y + 1), "r1");
    /* the header still shows both GPUs: folding hides lanes, not figures */
    ASSERT(screen_has(&f.g, " r0:GPU0 ["));
    /* C unfolds everything */
    key(&f, 'C');
    render(&f, 200, 60);
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_EQ(L.lanes.h, (int)all);
    /* a thread's ranges fold under it */
    int trow = -1;
    for (int y = L.lanes.y; y < L.lanes.y + L.lanes.h && trow < 0; y++)
        if (strstr(row_text(&f.g, y), "r0:T4037"))
            trow = y - L.lanes.y;
    ASSERT(trow > 0);
    f.v.cursor_row = trow + 1; /* its ranges */
    key(&f, 'c');
    ASSERT_EQ(f.v.cursor_row, trow);
    render(&f, 200, 60);
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_EQ(L.lanes.h, (int)all - 1);
    key(&f, 'C');

    /* e: zoomed into a short window, the lanes with no event there go; each one left has one */
    f.v.t0 = f.v.origin + (f.v.end - f.v.origin) / 2;
    f.v.t1 = f.v.t0 + 20000; /* 20 us */
    key(&f, 'e');
    ASSERT(f.v.lanes.hide_idle);
    render(&f, 200, 60);
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    size_t busy = 0;
    for (size_t l = 0; l < st_lane_count(f.s); l++) {
        size_t n;
        const st_event *e = st_lane_events(f.s, l, &n);
        for (size_t i = 0; i < n; i++)
            if (e[i].start < f.v.t1 && (st_ev_end(f.s, &e[i]) > f.v.t0 || (st_ev_end(f.s, &e[i]) == e[i].start && e[i].start >= f.v.t0))) {
                busy++;
                break;
            }
    }
    ASSERT(busy < lanes[0] + lanes[1]);
    ASSERT_EQ(L.lanes.h, (int)(4 + busy) > VW_MIN_LANES ? (int)(4 + busy) : VW_MIN_LANES);
    key(&f, 'e');
    ASSERT(!f.v.lanes.hide_idle);

    /* folded, then a jump to r0's stall: the fold opens to show it */
    f.v.cursor_row = 0;
    key(&f, 'c');
    key(&f, 'g');
    key(&f, 'n');
    ASSERT_EQ(f.v.lanes.n_folds, 0);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "BLOCKING call"));

    fixture_close(&f);

    check_scrolled_rows_name_their_process();
}

/* The idle breakdown pane (b) of a trace at 200x60, its figures made. */
static void open_breakdown(fixture *f, st_store *s, const char *keys_first) {
    fixture_open(f, s);
    render(f, 200, 60);
    for (const char *c = keys_first; *c; c++)
        key(f, *c);
    key(f, 'b');
    while (vw_figs_update(&f->v, f->s, 1000) == 0)
        ;
    render(f, 200, 60);
}

/* b: the idle breakdown pane. Over the whole trace its shares are the analysis' own per-device
 * figures (busy, and idle by cause from its bubbles); HTA's rows are hta_analyze's per stream. */
TEST(breakdown_pane_shows_idle_by_cause_and_hta_per_stream) {
    fixture f;
    open_breakdown(&f, kineto_store("alexnet_a100_sync_heavy.json.gz"), "0");
    ASSERT(f.v.stalls.breakdown);
    ASSERT_EQ(f.an.n_devices, 1);
    const an_device *dv = &f.an.devices[0];
    double span = (double)dv->span_ns;
    uint64_t caused = dv->idle_by_cause[AN_CAUSE_BLOCK] + dv->idle_by_cause[AN_CAUSE_LAUNCH] + dv->idle_by_cause[AN_CAUSE_HOST];
    char want[256];
    snprintf(want, sizeof want, " GPU0           %6.1f%% %6.1f%% %12.1f%% %8.1f%% %13.1f%% %7.1f%%", 100.0 * (double)dv->busy_ns / span,
             100.0 * (double)dv->idle_ns / span, 100.0 * (double)dv->idle_by_cause[AN_CAUSE_BLOCK] / span,
             100.0 * (double)dv->idle_by_cause[AN_CAUSE_LAUNCH] / span, 100.0 * (double)dv->idle_by_cause[AN_CAUSE_HOST] / span,
             100.0 * (double)(dv->idle_ns - caused) / span);
    if (!screen_has(&f.g, want)) {
        char *t = vw_grid_text(&f.g);
        TASK_FAIL_("want \"%s\" in\n%s", want, t);
    }
    ASSERT(!screen_has(&f.g, "top stalls"));
    /* HTA's rows: one per stream it found, with its ops */
    hta_result h;
    err_msg err = {{0}};
    ASSERT_OK(hta_analyze(f.s, NULL, &h, &err));
    ASSERT_GT(h.n_streams, 0);
    ASSERT_NOT_NULL(f.v.stalls.hta);
    ASSERT_EQ(f.v.stalls.hta->n_streams, h.n_streams);
    for (size_t i = 0; i < h.n_streams; i++) {
        char row[64];
        snprintf(row, sizeof row, " r%d stream %lld ", h.streams[i].rank, (long long)h.streams[i].stream);
        ASSERT(screen_has(&f.g, row));
        snprintf(row, sizeof row, " %10" PRIu64, h.streams[i].ops);
        ASSERT(screen_has(&f.g, row));
    }
    hta_result_free(&h);
    /* b again: the stalls */
    key(&f, 'b');
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "top stalls"));
    fixture_close(&f);
}

/* The breakdown pane ends with the host's share of the whole run by the range it ran, largest
 * first, as the analysis counted it (report --check-idle holds that against an independent count):
 * on the ResNet loop the DataLoader's __next__ first. */
TEST(breakdown_pane_names_the_ranges_the_host_kept_the_gpu_waiting_in) {
    fixture f;
    open_breakdown(&f, kineto_store("resnet_2080ti_two_threads.json.gz"), "");
    if (!screen_has(&f.g, " HOST-ELSEWHERE, WHOLE RUN, BY THE RANGE IT RAN"))
        TASK_FAIL_("no host ranges in\n%s", vw_grid_text(&f.g));
    ASSERT_GE(f.an.n_host_ranges, 2);
    uint64_t all = 0;
    for (size_t i = 0; i < f.an.n_host_ranges; i++)
        all += f.an.host_ranges[i].idle_ns;
    const an_host_range *h = &f.an.host_ranges[0];
    ASSERT_STR_EQ(st_str(f.s, h->name), "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__");
    char want[256];
    snprintf(want, sizeof want, " %6.1f%%  enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__",
             100.0 * (double)h->idle_ns / (double)all);
    if (!screen_has(&f.g, want)) {
        char *t = vw_grid_text(&f.g);
        TASK_FAIL_("want \"%s\" in\n%s", want, t);
    }
    ASSERT(screen_has(&f.g, "(in no range)"));
    fixture_close(&f);
}

/* t: the stalls panel counts the step at the cursor only. On the known loop (tests/lib/loop.h) each
 * step has one cudaStreamSynchronize and every 5th step (4, 9, ...) a 30 ms cudaDeviceSynchronize. */
static const an_stall_site *site_named(const fixture *f, const char *api) {
    for (size_t i = 0; i < f->v.stalls.n_sites; i++)
        if (strcmp(st_str(f->s, f->v.stalls.sites[i].name), api) == 0)
            return &f->v.stalls.sites[i];
    return NULL;
}

TEST(stalls_panel_shows_the_step_at_the_cursor_on_t) {
    const char *path = task_path("loop.json");
    ASSERT_OK(loop_trace_write(path, NULL));
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    fixture f;
    fixture_open(&f, s);
    an_steps st;
    ASSERT_OK(an_steps_find(f.s, &f.an, NULL, &st, &err));
    ASSERT_EQ(st.n_steps, 30);
    f.v.steps = &st;
    /* the whole run */
    ASSERT_UEQ(site_named(&f, "cudaStreamSynchronize")->count, 30);
    ASSERT_UEQ(site_named(&f, "cudaDeviceSynchronize")->count, 6);
    /* step 4: its two stalls */
    f.v.cursor = st.steps[4].start + (st.steps[4].end - st.steps[4].start) / 2;
    key(&f, 't');
    ASSERT_STR_CONTAINS(f.v.message, "stalls of step 4");
    ASSERT_EQ(f.v.stalls.n_sites, 2);
    ASSERT_UEQ(site_named(&f, "cudaStreamSynchronize")->count, 1);
    ASSERT_UEQ(site_named(&f, "cudaDeviceSynchronize")->count, 1);
    ASSERT_UEQ(site_named(&f, "cudaDeviceSynchronize")->total_ns, 30000000);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "CALL SITE  (step 4 only; t: all)"));
    /* %WALL is of the step: 30 ms of its 40 */
    char *dev_row = row_with(&f.g, "cudaDeviceSynchronize", "%");
    ASSERT_NOT_NULL(dev_row);
    ASSERT_STR_CONTAINS(dev_row, " 75.0%");
    free(dev_row);
    /* the cursor in step 5: the panel follows it */
    f.v.cursor = st.steps[5].start + 1;
    vw_sites_update(&f.v);
    ASSERT_EQ(f.v.stalls.n_sites, 1);
    ASSERT_UEQ(site_named(&f, "cudaStreamSynchronize")->count, 1);
    /* before the first step: none, and the panel says why */
    f.v.cursor = st.steps[0].start - 1;
    vw_sites_update(&f.v);
    ASSERT_EQ(f.v.stalls.n_sites, 0);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "the cursor is in no step (t: all the run)"));
    /* t again: the whole run */
    key(&f, 't');
    ASSERT_STR_CONTAINS(f.v.message, "stalls of the whole run");
    ASSERT_UEQ(site_named(&f, "cudaStreamSynchronize")->count, 30);
    f.v.steps = NULL;
    an_steps_free(&st);
    fixture_close(&f);
}

/* The step strip under the ruler, and } { to the slow steps: on the known loop (tests/lib/loop.h),
 * steps 4, 9 ... 29 are slow (40 ms against a 10 ms median). */
TEST(step_strip_numbers_steps_and_braces_go_to_the_slow_ones) {
    const char *path = task_path("loop.json");
    ASSERT_OK(loop_trace_write(path, NULL));
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    fixture f;
    fixture_open(&f, s);
    an_steps st;
    ASSERT_OK(an_steps_find(f.s, &f.an, NULL, &st, &err));
    ASSERT_EQ(st.n_steps, 30);
    f.v.steps = &st;
    render(&f, 200, 60);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 60, &L);
    ASSERT_EQ(L.steps.h, 1);
    ASSERT_EQ(L.steps.y, L.ruler.y + 1);
    ASSERT_EQ(L.lanes.y, L.steps.y + 1);
    char *row = row_text(&f.g, L.steps.y);
    ASSERT_STR_CONTAINS(row, " steps (prof)");
    ASSERT_STR_CONTAINS(row, "4!");   /* a slow step, numbered where its 40 ms leave room */
    ASSERT_STR_CONTAINS(row, "29!");
    /* } from the start: step 4, fitted; again: step 9; { back to 4 */
    key(&f, 'g');
    key(&f, '}');
    ASSERT_STR_CONTAINS(f.v.message, "step 4: 40.00ms, slow (median 10.00ms)");
    ASSERT_UEQ(f.v.cursor, st.steps[4].start);
    ASSERT(f.v.t0 <= st.steps[4].start && f.v.t1 >= st.steps[4].end);
    key(&f, '}');
    ASSERT_UEQ(f.v.cursor, st.steps[9].start);
    key(&f, '{');
    ASSERT_UEQ(f.v.cursor, st.steps[4].start);
    /* zoomed on step 4, its segment is red all along and the cells left of it are not */
    render(&f, 200, 60);
    int c4 = -1, c5 = -1;
    for (int x = L.timeline.x; x < 200; x++) {
        const vw_cell *c = &f.g.cells[L.steps.y * 200 + x];
        if (c->role == ROLE_BLOCKED && c4 < 0)
            c4 = x;
        if (c4 >= 0 && c->role != ROLE_BLOCKED && c5 < 0)
            c5 = x;
    }
    ASSERT(c4 > L.timeline.x);
    ASSERT(c5 > c4 + 100); /* 40 ms of a 50 ms window */
    f.v.steps = NULL;
    an_steps_free(&st);
    fixture_close(&f);
}

/* ---- the summary-only screen (attach --summary) ---- */

/* What a subscriber would hold of producer 0x100 + rank after `intervals` summaries of 1 s each,
 * starting at relay time 1000 s: each interval's events span 800 ms on 2 GPUs, busy for
 * (rank % 10 + 1) * 80 ms per GPU per interval, the host blocked 200 ms, 5000 events. */
static tp_sub_summary sum_fixture(int rank, int intervals) {
    tp_sub_summary x;
    memset(&x, 0, sizeof x);
    uint64_t busy = (uint64_t)(rank % 10 + 1) * 80000000ull * 2;
    x.last.producer = 0x100 + (uint64_t)rank;
    x.last.start_ns = 1000000000000ull + (uint64_t)(intervals - 1) * 1000000000ull;
    x.last.interval_ns = 1000000000ull;
    x.last.t_min = 5000000000ull;
    x.last.t_max = x.last.t_min + 800000000ull;
    x.last.busy_ns = busy;
    x.last.blocked_ns = 200000000ull;
    x.last.events = 5000;
    x.last.pid = 7000 + (uint32_t)rank;
    x.last.rank = rank;
    x.last.world = 64;
    x.last.devices = 2;
    snprintf(x.last.host, sizeof x.last.host, "node%02d", rank / 8);
    x.summaries = (uint64_t)intervals;
    x.interval_ns = (uint64_t)intervals * 1000000000ull;
    x.span_ns = (uint64_t)intervals * 800000000ull;
    x.busy_ns = (uint64_t)intervals * busy;
    x.blocked_ns = (uint64_t)intervals * 200000000ull;
    x.events = (uint64_t)intervals * 5000;
    return x;
}

/* 64 ranks, given in reverse order, each fed its summaries one at a time (so each row's history
 * holds them), rank 9 with 3 drops and rank 2 open. */
static vw_sum_row *sum_rows64(void) {
    vw_sum_row *rows = calloc(64, sizeof *rows);
    for (int i = 0; i < 64; i++) {
        int rank = 63 - i;
        for (int k = 1; k <= 12; k++) {
            tp_sub_summary x = sum_fixture(rank, k);
            /* the recent intervals vary: the busy share of interval k is (k % 4 + 1) / 8 */
            x.last.busy_ns = (uint64_t)(k % 4 + 1) * 200000000ull;
            x.last.drops = rank == 9 ? 3 : 0;
            vw_sum_row_update(&rows[i], &x);
        }
        rows[i].open = rank == 2;
    }
    vw_sum_sort(rows, 64);
    return rows;
}

TEST(summary_row_figures_follow_the_summaries) {
    vw_sum_row r;
    memset(&r, 0, sizeof r);
    tp_sub_summary x = sum_fixture(3, 1);
    vw_sum_row_update(&r, &x);
    x = sum_fixture(3, 4);
    vw_sum_row_update(&r, &x);
    /* busy: 4 * 2 * 320 ms over 4 * 800 ms spans on 2 GPUs = 40 %; blocked 200 of 800 ms = 25 % */
    ASSERT(r.busy > 39.999 && r.busy < 40.001);
    ASSERT(r.idle > 59.999 && r.idle < 60.001);
    ASSERT(r.blocked > 24.999 && r.blocked < 25.001);
    /* 20000 events from the first summary's start (1000 s) to the fourth's end (1004 s) */
    ASSERT(r.events_per_s > 4999.9 && r.events_per_s < 5000.1);
    ASSERT_EQ(r.rank, 3);
    ASSERT_UEQ(r.pid, 7003);
    ASSERT_STR_EQ(r.host, "node00");
    /* two summaries taken: two points of history, each 640 ms of 1600 GPU-ms */
    ASSERT_EQ(r.n_hist, 2);
    ASSERT(r.hist[1] > 0.399f && r.hist[1] < 0.401f);
    /* the same summary again adds no point */
    vw_sum_row_update(&r, &x);
    ASSERT_EQ(r.n_hist, 2);
}

TEST(golden_summary_rows_64_ranks) {
    vw_sum_row *rows = sum_rows64();
    for (int i = 0; i < 64; i++)
        ASSERT_EQ(rows[i].rank, i); /* sorted by rank */
    static const int sizes[2][2] = {{80, 24}, {200, 60}};
    for (int i = 0; i < 2; i++) {
        vw_sum_view sv = {.summaries = 768, .raw_batches = 41};
        vw_grid g = {.w = sizes[i][0], .h = sizes[i][1]};
        /* at 80x24 the selection is moved down to rank 30: the rows scroll to keep it shown */
        for (int k = 0; i == 0 && k < 30; k++)
            ASSERT_EQ(vw_sum_key(&sv, 64, g.h, VW_KEY_DOWN), VW_SUM_REDRAW);
        vw_sum_render(rows, 64, &sv, &g);
        assert_cells_safe(&g, 0);
        ASSERT(screen_has(&g, "SUMMARY ONLY  64 producers"));
        ASSERT(screen_has(&g, "open 1: 41 raw batches"));
        ASSERT(screen_has(&g, "node03"));
        if (i == 0) {
            ASSERT(strstr(row_text(&g, 2 + 30 - sv.scroll), "   30 node03") != NULL);
            ASSERT(strstr(row_text(&g, 23), "rows 11-31 of 64") != NULL); /* 21 rows, the 31st selected last */
        } else {
            /* 57 ranks shown at 200x60: 60 rows less the title, the column names and the key bar */
            ASSERT(strstr(row_text(&g, 2), "    0 node00") != NULL);
            ASSERT(strstr(row_text(&g, 58), "   56 node07") != NULL);
            ASSERT(strstr(row_text(&g, 59), "rows 1-57 of 64") != NULL);
        }
        golden_mode(&g, "summary64", 0);
        vw_grid_free(&g);
    }
    free(rows);
}

TEST(summary_screen_keys_and_sanitized_hosts) {
    vw_sum_row *rows = sum_rows64();
    snprintf(rows[0].host, sizeof rows[0].host, "evil\x1b]0;pwned\x07");
    vw_sum_view sv = {0};
    vw_grid g = {.w = 80, .h = 24};
    vw_sum_render(rows, 64, &sv, &g);
    char *t = vw_grid_text(&g);
    ASSERT(strchr(t, 0x1b) == NULL && strchr(t, 0x07) == NULL);
    free(t);
    /* ASCII glyphs only, markers and sparklines included */
    sv.ascii = 1;
    vw_sum_render(rows, 64, &sv, &g);
    for (int i = 0; i < g.w * g.h; i++)
        ASSERT(g.cells[i].ch >= 0x20 && g.cells[i].ch < 0x7f);
    ASSERT(strstr(row_text(&g, 4), "-     2 node00") != NULL); /* rank 2 is open */
    sv.ascii = 0;
    ASSERT_EQ(vw_sum_key(&sv, 64, 24, VW_KEY_END), VW_SUM_REDRAW);
    ASSERT_EQ(sv.sel, 63);
    ASSERT_EQ(sv.scroll, 64 - 21);
    ASSERT_EQ(vw_sum_key(&sv, 64, 24, VW_KEY_ENTER), VW_SUM_TOGGLE);
    ASSERT_EQ(vw_sum_key(&sv, 64, 24, VW_KEY_TAB), VW_SUM_LANES);
    ASSERT_EQ(vw_sum_key(&sv, 64, 24, 'q'), VW_SUM_QUIT);
    ASSERT_EQ(vw_sum_key(&sv, 64, 24, VW_KEY_HOME), VW_SUM_REDRAW);
    ASSERT_EQ(sv.sel, 0);
    ASSERT_EQ(sv.scroll, 0);
    /* nothing to open without rows; below 80x24 it says so */
    vw_sum_view empty = {0};
    ASSERT_EQ(vw_sum_key(&empty, 0, 24, VW_KEY_ENTER), VW_SUM_NONE);
    vw_grid small = {.w = 60, .h = 20};
    vw_sum_render(rows, 64, &sv, &small);
    ASSERT(screen_has(&small, "terminal too small"));
    vw_grid_free(&small);
    vw_grid_free(&g);
    free(rows);
}

/* Processes that say their rank but not the job's size (a profiler trace without world_size):
 * their rows name the rank alone, never "rank 0/-1". */
TEST(process_rows_name_a_rank_without_a_world_size_alone) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, "alexnet_a100_sync_heavy.json.gz");
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, "event_sync_single_stream.json.gz");
    ASSERT_OK(ingest_file(s, path, NULL, NULL, &err));
    ASSERT_EQ(st_producer_count(s), 2);
    ASSERT_EQ(st_producer_get(s, 0)->rank, 0);
    ASSERT(st_producer_get(s, 0)->world <= 0);
    fixture f;
    fixture_open(&f, s);
    render(&f, 200, 60);
    ASSERT(screen_has(&f.g, "  rank 0  ") || screen_has(&f.g, "  rank 0\n"));
    ASSERT(!screen_has(&f.g, "/-1"));
    ASSERT(!screen_has(&f.g, "rank 0/0"));
    fixture_close(&f);
}

/* A profiler trace loaded as the viewer loads it (ops: its operators as ranges too) or as report does. */
static st_store *load_ops(const char *path, int ops) {
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    ingest_loader *ld = ingest_open(s, path, NULL, NULL, &err);
    ASSERT_NOT_NULL(ld);
    if (ops)
        ingest_keep_ops(ld);
    ASSERT_EQ(ingest_step(ld, 0, &err), 1);
    ingest_close(&ld);
    st_store_commit(s);
    return s;
}

/* The screen row whose label is drawn as the cursor's (reversed), -1 when none is. */
static int cursor_screen_row(const vw_grid *g) {
    for (int y = 0; y < g->h; y++)
        if (g->cells[y * g->w].attr & VW_A_REVERSE)
            return y;
    return -1;
}

/* With a thread's ranges open by depth, a search puts the cursor on the row of the depth the
 * operator it found sits at: the depth kineto_expected.py counts rows holding it in the JSON. */
TEST(search_lands_on_the_depth_row_of_the_operator_found) {
    char path[1024], cmd[4096], line[4096];
    snprintf(path, sizeof path, "%s/qwen_h100_with_stack.json.gz", KINETO_TRACE_DIR);
    snprintf(cmd, sizeof cmd, "python3 '%s' --ranges aten::item '%s' | grep '^depth '", KINETO_EXPECTED, path);
    FILE *p = popen(cmd, "r");
    ASSERT_NOT_NULL(p);
    unsigned long depth = 99;
    ASSERT_NOT_NULL(fgets(line, sizeof line, p));
    ASSERT_EQ(sscanf(line, "depth %lu", &depth), 1);
    ASSERT_EQ(pclose(p), 0);
    st_store *s = load_ops(path, 1);
    fixture f;
    fixture_open(&f, s);
    render(&f, 160, 48);
    /* rows: GPU0, stream 7, its ranges, the thread, the thread's ranges */
    const char *seq = "jjjjo/aten::item\r";
    for (const char *k = seq; *k; k++)
        key(&f, *k);
    render(&f, 160, 48);
    ASSERT_STR_CONTAINS(f.v.message, "found \"aten::item\": 1 of 1");
    int y = cursor_screen_row(&f.g);
    ASSERT_GE(y, 0);
    char want[32];
    snprintf(want, sizeof want, "   depth %lu ", depth);
    ASSERT_STR_CONTAINS(row_text(&f.g, y), want);
    fixture_close(&f);
}

/* A profiler trace made by hand: operators on one thread whose names hold escapes, one that starts
 * with another (shorter: inside it), one that crosses the end of those around it, and a blocking
 * call in the innermost. Depths by hand: step 0; aten::outer 1 (in step); aten::inner 2 (same start
 * as aten::outer, shorter); aten::cross 2 (starts in aten::outer, ends past step: below the two
 * open ranges); aten::late 3 (starts after step and aten::outer ended, but inside aten::cross,
 * which sits on them: no two ranges of one depth overlap). Nothing of the names' escapes reaches a
 * cell. */
static const char k_hostile_ops[] =
    "{\"traceEvents\": ["
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"step\\u001b[31m\", \"pid\": 1, \"tid\": 5, \"ts\": 1000100, \"dur\": 100},"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::outer\", \"pid\": 1, \"tid\": 5, \"ts\": 1000110, \"dur\": 50},"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::inner\\u0007\\u009b\", \"pid\": 1, \"tid\": 5, \"ts\": 1000110, \"dur\": 20},"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::cross\", \"pid\": 1, \"tid\": 5, \"ts\": 1000150, \"dur\": 100},"
    "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::late\", \"pid\": 1, \"tid\": 5, \"ts\": 1000210, \"dur\": 10},"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": 1, \"tid\": 5, "
    "\"ts\": 1000112, \"dur\": 5, \"args\": {\"correlation\": 1}}]}";

TEST(hostile_operator_names_nest_by_hand_and_reach_no_cell) {
    const char *path = task_path("ops.json");
    FILE *fp = fopen(path, "w");
    ASSERT_NOT_NULL(fp);
    fputs(k_hostile_ops, fp);
    fclose(fp);
    st_store *s = load_ops(path, 1);
    static const struct { const char *name; uint32_t depth; } want[] = {
        {"step\x1b[31m", 0}, {"aten::outer", 1}, {"aten::inner\x07\xc2\x9b", 2}, {"aten::cross", 2}, {"aten::late", 3}};
    size_t lane = SIZE_MAX, n;
    for (size_t l = 0; l < st_lane_count(s); l++)
        if (st_lane_get(s, l)->kind == ST_LANE_NVTX)
            lane = l;
    ASSERT(lane != SIZE_MAX);
    const st_event *e = st_lane_events(s, lane, &n);
    ASSERT_UEQ(n, 5);
    ASSERT_UEQ(st_lane_depths(s, lane), 4);
    for (size_t i = 0; i < 5; i++) {
        size_t k = 0;
        while (k < n && strcmp(st_str(s, st_ev_name(s, &e[k])), want[i].name) != 0)
            k++;
        ASSERT(k < n);
        ASSERT_UEQ(st_ev_aux(s, &e[k]), want[i].depth);
    }
    fixture f;
    fixture_open(&f, s);
    render(&f, 120, 40);
    /* rows: the thread, its ranges; opened, with the detail pane on the blocking call */
    key(&f, 'j');
    key(&f, 'o');
    ASSERT_STR_CONTAINS(f.v.message, "ranges by depth: 4 rows");
    render(&f, 120, 40);
    assert_cells_safe(&f.g, 0);
    ASSERT(screen_has(&f.g, "   depth 3 "));
    const char *seq = "/cudaStream\r";
    for (const char *k = seq; *k; k++)
        key(&f, *k);
    key(&f, '\n');
    render(&f, 120, 40);
    assert_cells_safe(&f.g, 0);
    ASSERT(screen_has(&f.g, " in aten::inner?? (depth 2 of the thread's ranges; r goes there)"));
    key(&f, 'r');
    ASSERT_STR_CONTAINS(f.v.message, "in aten::inner??, depth 2");
    key(&f, 'r');
    ASSERT_STR_CONTAINS(f.v.message, "in aten::outer, depth 1");
    key(&f, 'r');
    ASSERT_STR_CONTAINS(f.v.message, "in step?[31m, depth 0");
    key(&f, 'r');
    ASSERT_STR_CONTAINS(f.v.message, "no range holds");
    render(&f, 120, 40);
    assert_cells_safe(&f.g, 0);
    fixture_close(&f);
}

static st_store *store_with_ops(const char *trace, int ops) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, trace);
    return load_ops(path, ops);
}

/* The viewer holds the operators as ranges, report does not: the analysis leaves them out, so that
 * both tell the same GPU idle by host range (the innermost annotation, not an operator), the same
 * steps (a range named as an operator is no step: --step aten::add finds none), the same stalls and
 * HTA breakdown. */
TEST(operators_change_nothing_the_analysis_says) {
    static const char *const traces[] = {"resnet_2080ti_two_threads.json.gz", "qwen_h100_with_stack.json.gz"};
    for (size_t t = 0; t < 2; t++) {
        st_store *s[2];
        an_result r[2];
        an_steps st[2], named[2];
        for (int k = 0; k < 2; k++) {
            s[k] = store_with_ops(traces[t], k);
            ASSERT_OK(an_analyze(s[k], NULL, &r[k], NULL));
            ASSERT_OK(an_steps_find(s[k], &r[k], NULL, &st[k], NULL));
            ASSERT_OK(an_steps_find(s[k], &r[k], "aten::add", &named[k], NULL));
        }
        ASSERT(st_store_events(s[1]) > st_store_events(s[0]));
        ASSERT_UEQ(r[1].n_blocks, r[0].n_blocks);
        ASSERT_UEQ(r[1].n_bubbles, r[0].n_bubbles);
        ASSERT_UEQ(r[1].n_sites, r[0].n_sites);
        ASSERT_UEQ(r[1].n_host_ranges, r[0].n_host_ranges);
        for (size_t i = 0; i < r[0].n_host_ranges; i++) {
            ASSERT_STR_EQ(st_str(s[1], r[1].host_ranges[i].name), st_str(s[0], r[0].host_ranges[i].name));
            ASSERT_UEQ(r[1].host_ranges[i].idle_ns, r[0].host_ranges[i].idle_ns);
        }
        ASSERT_EQ(st[1].source, st[0].source);
        ASSERT_UEQ(st[1].n_steps, st[0].n_steps);
        ASSERT_EQ(named[1].source, named[0].source);
        ASSERT_UEQ(named[1].n_steps, named[0].n_steps);
        /* HTA's breakdown (b) too */
        hta_result h[2];
        for (int k = 0; k < 2; k++)
            ASSERT_OK(hta_analyze(s[k], NULL, &h[k], NULL));
        ASSERT_UEQ(h[1].n_ranks, h[0].n_ranks);
        ASSERT_UEQ(h[1].n_streams, h[0].n_streams);
        for (size_t i = 0; i < h[0].n_ranks; i++) {
            ASSERT_EQ(h[1].ranks[i].idle_ns, h[0].ranks[i].idle_ns);
            ASSERT_EQ(h[1].ranks[i].compute_ns, h[0].ranks[i].compute_ns);
            ASSERT_EQ(h[1].ranks[i].filtered, h[0].ranks[i].filtered);
        }
        for (size_t i = 0; i < h[0].n_streams; i++)
            for (int c = 0; c < HTA_IDLE_N_; c++)
                ASSERT_EQ(h[1].streams[i].idle_ns[c], h[0].streams[i].idle_ns[c]);
        for (int k = 0; k < 2; k++) {
            hta_result_free(&h[k]);
            an_steps_free(&st[k]);
            an_steps_free(&named[k]);
            an_result_free(&r[k]);
            st_store_destroy(&s[k]);
        }
    }
}

/* ---- a dragged span ---- */

/* One GPU with two streams whose kernels overlap, two threads with blocking calls, times in units
 * of U ns: stream 1 runs [100, 300) and [600, 700), stream 2 [200, 400); thread 1 blocks in
 * [250, 550) and calls without blocking at [800, 810); thread 2 blocks in [500, 520). */
#define U 10000ull
static st_store *drag_store(void) {
    st_store *s = st_store_new(NULL);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 7});
    tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 7, .rank = -1, .world = -1,
                    .cmdline = tp_enc_intern_cstr(enc, "drag")};
    tp_device d = {.kind = TP_K_DEVICE, .device = 0, .name = tp_enc_intern_cstr(enc, "GPU")};
    tp_stream s1 = {.kind = TP_K_STREAM, .device = 0, .stream = 1}, s2 = {.kind = TP_K_STREAM, .device = 0, .stream = 2};
    tp_thread t1 = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 7, .pid = 7};
    tp_thread t2 = {.kind = TP_K_THREAD, .device = TP_NO_DEVICE, .tid = 8, .pid = 7};
    const void *meta[] = {&p, &d, &s1, &s2, &t1, &t2};
    for (size_t i = 0; i < 6; i++)
        ASSERT_OK(tp_enc_add(enc, meta[i]));
    uint32_t k = tp_enc_intern_cstr(enc, "k"), sync = tp_enc_intern_cstr(enc, "cudaStreamSynchronize"),
             launch = tp_enc_intern_cstr(enc, "cudaLaunchKernel");
    tp_kernel ks[3] = {{.kind = TP_K_KERNEL, .device = 0, .stream = 1, .start = 100 * U, .end = 300 * U, .name = k},
                       {.kind = TP_K_KERNEL, .device = 0, .stream = 2, .start = 200 * U, .end = 400 * U, .name = k},
                       {.kind = TP_K_KERNEL, .device = 0, .stream = 1, .start = 600 * U, .end = 700 * U, .name = k}};
    tp_api as[3] = {{.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 7, .start = 250 * U, .end = 550 * U,
                     .name = sync},
                    {.kind = TP_K_API, .flags = TP_F_BLOCKING, .device = 0, .tid = 8, .start = 500 * U, .end = 520 * U,
                     .name = sync},
                    {.kind = TP_K_API, .device = 0, .tid = 7, .start = 800 * U, .end = 810 * U, .name = launch}};
    for (size_t i = 0; i < 3; i++) {
        ASSERT_OK(tp_enc_add(enc, &ks[i]));
        ASSERT_OK(tp_enc_add(enc, &as[i]));
    }
    add_enc(s, enc);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    return s;
}

/* |[x0, x1) within [a, b)| */
static uint64_t clip(uint64_t x0, uint64_t x1, uint64_t a, uint64_t b) {
    uint64_t lo = x0 > a ? x0 : a, hi = x1 < b ? x1 : b;
    return hi > lo ? hi - lo : 0;
}

static void expect_drag(fixture *f, int w, int h, int c0, int c1) {
    vw_layout L;
    vw_layout_for(&f->v, f->s, w, h, &L);
    vw_mouse(&f->v, f->s, w, h, VW_MOUSE_CLICK, L.timeline.x + c0, L.lanes.y + 1);
    vw_mouse(&f->v, f->s, w, h, VW_MOUSE_RELEASE, L.timeline.x + c1, L.lanes.y + 2);
    ASSERT(f->v.ruler.marked);
    uint64_t a = f->v.ruler.mark0, b = f->v.ruler.mark1;
    ASSERT(a < b);
    /* by hand: the GPU's work is [100, 400) and [600, 700) (its streams' union); thread 1 blocks in
     * [250, 550), thread 2 in [500, 520) */
    uint64_t busy = clip(100 * U, 400 * U, a, b) + clip(600 * U, 700 * U, a, b);
    uint64_t blocked = clip(250 * U, 550 * U, a, b) + clip(500 * U, 520 * U, a, b);
    int kernels = (a < 300 * U && b > 100 * U) + (a < 400 * U && b > 200 * U) + (a < 700 * U && b > 600 * U);
    int calls = (a < 550 * U && b > 250 * U) + (a < 520 * U && b > 500 * U) + (a < 810 * U && b > 800 * U);
    char dl[32], db[32], dh[32], want[256];
    vw_fmt_dur(dl, sizeof dl, b - a, 0);
    vw_fmt_dur(db, sizeof db, busy, 0);
    vw_fmt_dur(dh, sizeof dh, blocked, 0);
    snprintf(want, sizeof want, " selected %s: GPU busy %s (%.1f%%), host blocked %s, %d kernel%s, %d call%s", dl, db,
             100.0 * (double)busy / (double)(b - a), dh, kernels, kernels == 1 ? "" : "s", calls, calls == 1 ? "" : "s");
    ASSERT_STR_CONTAINS(f->v.ruler.what, want);
    render(f, w, h);
    ASSERT(screen_has(&f->g, want));
}

TEST(a_drag_across_the_timeline_measures_what_ran_in_its_span) {
    fixture f;
    fixture_open(&f, drag_store());
    render(&f, 120, 40);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 120, 40, &L);
    /* the whole trace, from right to left; then a span that cuts kernels and calls in two */
    expect_drag(&f, 120, 40, L.timeline.w - 1, 0);
    ASSERT_STR_CONTAINS(f.v.ruler.what, "3 kernels, 3 calls");
    expect_drag(&f, 120, 40, L.timeline.w / 4, L.timeline.w / 2);
    /* esc clears it; a click without a drag marks nothing */
    key(&f, VW_KEY_ESC);
    ASSERT(!f.v.ruler.marked);
    render(&f, 120, 40);
    ASSERT(!screen_has(&f.g, " selected "));
    vw_mouse(&f.v, f.s, 120, 40, VW_MOUSE_CLICK, L.timeline.x + 10, L.lanes.y + 1);
    vw_mouse(&f.v, f.s, 120, 40, VW_MOUSE_RELEASE, L.timeline.x + 11, L.lanes.y + 1);
    ASSERT(!f.v.ruler.marked);
    fixture_close(&f);
}
#undef U

/* ---- the window of a live view, and of a replay that plays ---- */

/* n more of sy's events into a live view's store, and the view told of its new end (as the
 * viewer's loop does). */
static void live_more(st_store *s, synth *sy, tp_enc *enc, vw_state *v, vw_grid *g, size_t n) {
    for (size_t done = 0; done < n; done += 500) {
        synth_fill(sy, enc, n - done < 500 ? n - done : 500);
        add_enc(s, enc);
    }
    st_store_commit(s);
    uint64_t t0, t1;
    st_store_span(s, &t0, &t1);
    v->end = t1;
    vw_render(s, v, g);
}

/* Following live data, the window shows all that arrived while that is shorter than
 * VW_LIVE_SPAN_NS, then the last VW_LIVE_SPAN_NS; a zoom makes the width the user's, and 0 shows
 * everything from then on. */
TEST(live_window_grows_with_the_data_until_the_user_zooms) {
    st_store *s = st_store_new(NULL);
    synth sy;
    synth_init(&sy, 3);
    tp_enc_opts eo = {.producer = 0xabc};
    tp_enc *enc = tp_enc_new(&eo);
    synth_fill(&sy, enc, 20);
    add_enc(s, enc);
    st_store_commit(s);
    vw_state v;
    vw_state_init(&v, VW_LIVE, s);
    vw_grid g = {.w = 120, .h = 40};
    vw_render(s, &v, &g);
    /* the first events span microseconds; as more come the window takes them all in */
    int grew = 0;
    while (v.end - v.origin < VW_LIVE_SPAN_NS / 2) {
        live_more(s, &sy, enc, &v, &g, 2000);
        ASSERT_LE(v.t0, v.origin);
        ASSERT_GE(v.t1, v.end);
        ASSERT(v.follow);
        grew++;
    }
    ASSERT_GT(grew, 1);
    /* past VW_LIVE_SPAN_NS it slides: that much, the newest events at the right edge */
    while (v.end - v.origin < 2 * VW_LIVE_SPAN_NS)
        live_more(s, &sy, enc, &v, &g, 2000);
    ASSERT_UEQ(v.t1 - v.t0, VW_LIVE_SPAN_NS);
    ASSERT_GE(v.t1, v.end);
    ASSERT_GT(v.t0, v.origin);
    /* zoomed out, it follows at the width chosen */
    vw_key(&v, s, g.w, g.h, '-');
    uint64_t chosen = v.t1 - v.t0;
    ASSERT_GT(chosen, VW_LIVE_SPAN_NS);
    live_more(s, &sy, enc, &v, &g, 4000);
    ASSERT_UEQ(v.t1 - v.t0, chosen);
    ASSERT_GE(v.t1, v.end);
    /* 0: all of it, and all of it as more comes */
    vw_key(&v, s, g.w, g.h, '0');
    live_more(s, &sy, enc, &v, &g, 4000);
    ASSERT_LE(v.t0, v.origin);
    ASSERT_GE(v.t1, v.end);
    ASSERT(v.follow);
    tp_enc_destroy(&enc);
    vw_state_free(&v);
    vw_grid_free(&g);
    st_store_destroy(&s);
}

/* A replay that starts playing pages the window after its playhead at any zoom, also after n (or
 * any key that showed a stall, an event or a step), unless F turned that off. */
TEST(playing_pages_after_the_playhead_after_a_stall_was_shown) {
    fixture f;
    fixture_open(&f, kineto_store("resnet_2080ti_two_threads.json.gz"));
    f.v.paused = 1; /* a trace opens whole and paused */
    render(&f, 120, 40);
    key(&f, 'n');
    ASSERT(f.v.stalls.show_site);
    key(&f, '+');
    key(&f, ' ');
    ASSERT(!f.v.paused);
    ASSERT(f.v.follow);
    uint64_t width = f.v.t1 - f.v.t0;
    f.v.now = f.v.t1 + width; /* the playhead past the window */
    render(&f, 120, 40);
    ASSERT_LE(f.v.t0, f.v.now);
    ASSERT_GT(f.v.t1, f.v.now);
    /* F off: the window stays where it is, and playing again leaves it off */
    key(&f, 'F');
    key(&f, ' ');
    key(&f, ' ');
    ASSERT(!f.v.paused);
    ASSERT(!f.v.follow);
    uint64_t t0 = f.v.t0;
    f.v.now = f.v.t1 + width;
    render(&f, 120, 40);
    ASSERT_UEQ(f.v.t0, t0);
    fixture_close(&f);
}

/* Columns the first n bytes of UTF-8 text s take (narrow characters only). */
static size_t utf8_cols(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n && s[i]; i++)
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* Sorted by the GPU idle the stalls caused, the panel shows that column, marked, at any width (in
 * place of %WALL where both do not fit), its figures in red under the mark. */
TEST(stalls_sorted_by_gpu_idle_show_that_column_at_any_width) {
    fixture f;
    fixture_open(&f, kineto_store("resnet_2080ti_two_threads.json.gz"));
    render(&f, 120, 40);
    key(&f, '>');
    key(&f, '>');
    key(&f, '>');
    ASSERT_EQ(f.v.stalls.sort, AN_STALL_BY_IDLE);
    ASSERT_GT(f.v.stalls.n_sites, 2);
    static const int widths[] = {80, 100, 120, 139, 140, 200};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        render(&f, widths[i], 40);
        char *head = row_with(&f.g, "top stalls", NULL);
        ASSERT_NOT_NULL(head);
        ASSERT_STR_CONTAINS(head, "GPU IDLE\xe2\x96\xbc");
        ASSERT_EQ(strstr(head, "%WALL") != NULL, widths[i] >= 140);
        /* the second row (not the selected one): its GPU idle under the column's label, in red */
        char idle[32];
        vw_fmt_dur(idle, sizeof idle, f.v.stalls.sites[1].gpu_idle_ns, 0);
        int y = 0;
        while (y < f.g.h && strstr(row_text(&f.g, y), "top stalls") == NULL)
            y++;
        const char *row = row_text(&f.g, y + 2);
        /* the figures end under the mark, as under every column's last character */
        int label_end = (int)utf8_cols(head, (size_t)(strstr(head, "GPU IDLE\xe2\x96\xbc") - head) + 8) + 1;
        size_t b = 0;
        for (int c = 0; c < label_end; c++) /* the byte where column label_end starts */
            for (b++; ((unsigned char)row[b] & 0xC0) == 0x80; b++)
                ;
        ASSERT_GE(b, strlen(idle));
        if (memcmp(row + b - strlen(idle), idle, strlen(idle)) != 0 || row[b] != ' ')
            TASK_FAIL_("at %d columns GPU idle %s is not under its label:\n%s\n%s", widths[i], idle, head, row);
        ASSERT_EQ(f.g.cells[(y + 2) * f.g.w + label_end - 1].role, ROLE_BLOCKED);
        free(head);
    }
    fixture_close(&f);
}

/* The words of s, one space between them, non-ASCII characters left out. */
static void words_of(const char *s, char *out, size_t n) {
    size_t k = 0;
    for (; *s && k + 1 < n; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80)
            continue;
        if (c == ' ' && (k == 0 || out[k - 1] == ' '))
            continue;
        out[k++] = (char)c;
    }
    while (k > 0 && out[k - 1] == ' ')
        k--;
    out[k] = '\0';
}

/* Every line of the help is whole in its box at any width, 80x24 included: a line longer than
 * the box goes on in the rows under it. */
TEST(help_box_shows_every_line_whole_at_any_width) {
    fixture f;
    fixture_open(&f, synth_store(8, 3000));
    key(&f, '?');
    char keys_[40][96];
    size_t n = vw_help_lines(keys_, 40);
    ASSERT_LE(n, 37);
    static const int sizes[][2] = {{80, 24}, {80, 60}, {100, 60}, {120, 40}, {160, 60}, {200, 60}, {260, 60}};
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        int w = sizes[z][0];
        render(&f, w, sizes[z][1]);
        /* the box's text, row by row between its borders */
        int x0 = -1, x1 = -1, y0 = -1, y1 = -1;
        for (int i = 0; i < f.g.w * f.g.h; i++) {
            if (f.g.cells[i].ch == 0x250C)
                x0 = i % f.g.w, y0 = i / f.g.w;
            else if (f.g.cells[i].ch == 0x2510)
                x1 = i % f.g.w;
            else if (f.g.cells[i].ch == 0x2514)
                y1 = i / f.g.w;
        }
        ASSERT(x0 >= 0 && x1 > x0 && y0 >= 0 && y1 > y0);
        static char text[16384], flat[16384];
        size_t k = 0;
        for (int y = y0 + 1; y < y1; y++) {
            for (int x = x0 + 1; x < x1 && k + 2 < sizeof text; x++) {
                uint32_t c = f.g.cells[y * f.g.w + x].ch;
                text[k++] = c < 0x80 && c != VW_CH_WIDE ? (char)c : '?';
            }
            text[k++] = ' ';
        }
        text[k] = '\0';
        words_of(text, flat, sizeof flat);
        char want[256];
        for (size_t i = 0; i < n; i++) {
            words_of(keys_[i], want, sizeof want);
            if (strstr(flat, want) == NULL)
                TASK_FAIL_("at %d columns the help line \"%s\" is not whole in:\n%s", w, want, flat);
        }
        ASSERT_STR_CONTAINS(flat, "wheel: scroll; ctrl+wheel: zoom");
        ASSERT_STR_CONTAINS(flat, "red host spans: blocked calls");
    }
    fixture_close(&f);
}

/* The screen row whose text starts with label, -1 when none does. */
static int row_labelled(const vw_grid *g, const char *start) {
    for (int y = 0; y < g->h; y++)
        if (strncmp(row_text(g, y), start, strlen(start)) == 0)
            return y;
    return -1;
}

/* A row's cells from column x0 to x1 (exclusive) as ASCII ('?' for any other character). */
static void ascii_cells(const vw_grid *g, int y, int x0, int x1, char *out, size_t n) {
    size_t k = 0;
    for (int x = x0; x < x1 && x < g->w && k + 1 < n; x++) {
        uint32_t c = g->cells[y * g->w + x].ch;
        if (c != VW_CH_WIDE)
            out[k++] = c >= 0x20 && c < 0x7F ? (char)c : '?';
    }
    out[k] = '\0';
}

static size_t occurrences(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Opened by depth, every range of a thread at least a dozen columns wide carries its name, the
 * one that starts in the column where the one before it ends included: sampled_rank-0's second
 * step follows the first, backward follows forward. */
TEST(depth_rows_name_every_wide_range_even_right_after_another) {
    fixture f;
    fixture_open(&f, store_with_ops("sampled_rank-0.json.gz", 1));
    render(&f, 200, 50);
    for (int i = 0; i < 6; i++) /* rows: GPU0, its five streams, thread 4037 */
        key(&f, 'j');
    key(&f, 'o');
    ASSERT_STR_CONTAINS(f.v.message, "ranges by depth");
    render(&f, 200, 50);
    vw_layout L;
    vw_layout_for(&f.v, f.s, 200, 50, &L);
    size_t lane = SIZE_MAX, n;
    for (size_t l = 0; l < st_lane_count(f.s); l++)
        if (st_lane_get(f.s, l)->kind == ST_LANE_NVTX && st_lane_get(f.s, l)->id == 4037)
            lane = l;
    ASSERT(lane != SIZE_MAX);
    const st_event *ev = st_lane_events(f.s, lane, &n);
    uint64_t colw = (f.v.t1 - f.v.t0) / (uint64_t)L.timeline.w;
    size_t checked = 0;
    for (size_t d = 0; d < 3; d++) {
        char depth[32], text[512], needle[8];
        snprintf(depth, sizeof depth, "   depth %zu ", d);
        int y = row_labelled(&f.g, depth);
        ASSERT_GE(y, 0);
        ascii_cells(&f.g, y, L.timeline.x, L.timeline.x + L.timeline.w, text, sizeof text);
        if (d == 0)
            ASSERT_STR_CONTAINS(text, "ProfilerStep#552");
        if (d == 1)
            ASSERT_STR_CONTAINS(text, "## backward ##");
        size_t m;
        const uint32_t *idx = st_lane_at_depth(f.s, lane, d, &m);
        for (size_t k = 0; k < m; k++) {
            const st_event *e = &ev[idx[k]];
            if (e->start < f.v.t0 || st_ev_end(f.s, e) > f.v.t1 || st_ev_dur(f.s, e) < 12 * colw)
                continue;
            snprintf(needle, sizeof needle, "%s", st_str(f.s, st_ev_name(f.s, e)));
            size_t need = 0;
            for (size_t j = 0; j < m; j++) { /* the wide ranges whose names start the same */
                const st_event *o = &ev[idx[j]];
                need += o->start >= f.v.t0 && st_ev_end(f.s, o) <= f.v.t1 && st_ev_dur(f.s, o) >= 12 * colw &&
                        strncmp(st_str(f.s, st_ev_name(f.s, o)), needle, strlen(needle)) == 0;
            }
            if (occurrences(text, needle) < need)
                TASK_FAIL_("depth %zu: %zu wide ranges named \"%s...\", fewer names:\n%s", d, need, needle, text);
            checked++;
        }
    }
    ASSERT_GE(checked, 6);
    fixture_close(&f);
}

/* A profiler trace made by hand: thread 5 makes a CUDA call inside a range, thread 7 only has
 * ranges: its ranges row names it, as no thread row above it does. */
static const char k_ranges_only_thread[] =
    "{\"traceEvents\": ["
    "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"step\", \"pid\": 1, \"tid\": 5, \"ts\": 1000100, \"dur\": 100},"
    "{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaStreamSynchronize\", \"pid\": 1, \"tid\": 5, "
    "\"ts\": 1000110, \"dur\": 5, \"args\": {\"correlation\": 1}},"
    "{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"compile\", \"pid\": 1, \"tid\": 7, \"ts\": 1000120, \"dur\": 50}"
    "]}";

TEST(ranges_of_a_thread_without_calls_are_labelled_with_the_thread) {
    const char *path = task_path("ranges_only.json");
    FILE *fp = fopen(path, "w");
    ASSERT_NOT_NULL(fp);
    fputs(k_ranges_only_thread, fp);
    fclose(fp);
    fixture f;
    fixture_open(&f, load_ops(path, 1));
    render(&f, 120, 40);
    int t5 = row_labelled(&f.g, "T5"), r5 = row_labelled(&f.g, " ranges "), r7 = row_labelled(&f.g, " T7 ranges ");
    if (t5 < 0 || r7 < 0)
        TASK_FAIL_("no row for thread 5 or thread 7's ranges:\n%s", vw_grid_text(&f.g));
    ASSERT_EQ(r5, t5 + 1); /* under its thread's row, the thread goes without saying */
    ASSERT_EQ(row_labelled(&f.g, "T7"), -1);
    /* with idle lanes hidden thread 5's calls are out of the window: its ranges say whose they are */
    f.v.t0 = 1000100000ull + 50000;
    f.v.t1 = f.v.t0 + 40000;
    key(&f, 'e');
    render(&f, 120, 40);
    ASSERT_EQ(row_labelled(&f.g, "T5"), -1);
    ASSERT_GE(row_labelled(&f.g, " T5 ranges "), 0);
    fixture_close(&f);
}

/* The detail pane calls a range a range: the store keeps a profiler's annotations and NVTX ranges
 * alike, so it does not call one NVTX. */
TEST(detail_pane_names_a_range_a_range) {
    fixture f;
    fixture_open(&f, store_with_ops("sampled_rank-0.json.gz", 1));
    render(&f, 200, 50);
    for (int i = 0; i < 7; i++) /* rows: GPU0, its five streams, thread 4037, its ranges */
        key(&f, 'j');
    render(&f, 200, 50);
    if (!screen_has(&f.g, "\n range  ProfilerStep#551"))
        TASK_FAIL_("no range under the cursor in\n%s", vw_grid_text(&f.g));
    ASSERT(!screen_has(&f.g, "nvtx "));
    fixture_close(&f);
}

/* Stall rows whose call sites differ read differently at every width, the part that tells them
 * apart (" (via ...)", " (from ...)") kept when the label is shortened; so does the selected row's
 * line in the detail pane. */
TEST(stall_rows_that_differ_stay_different_when_shortened) {
    fixture f;
    fixture_open(&f, kineto_store("qwen_h100_with_stack.json.gz"));
    ASSERT_GE(f.v.stalls.n_sites, 2);
    static const int widths[] = {80, 100, 120, 160, 200};
    for (size_t z = 0; z < sizeof widths / sizeof widths[0]; z++) {
        render(&f, widths[z], 40);
        vw_layout L;
        vw_layout_for(&f.v, f.s, widths[z], 40, &L);
        char head[512], a[512], b[512];
        ascii_cells(&f.g, L.stalls.y, 0, f.g.w, head, sizeof head);
        const char *at = strstr(head, "CALL SITE");
        ASSERT_NOT_NULL(at);
        int x = (int)(at - head);
        for (int i = 0; i + 1 < L.stalls.h && i < (int)f.v.stalls.n_sites; i++)
            for (int j = i + 1; j + 1 < L.stalls.h && j < (int)f.v.stalls.n_sites; j++) {
                const char *li = f.v.stalls.labels + (size_t)i * VW_STALL_LABEL;
                if (strcmp(li, f.v.stalls.labels + (size_t)j * VW_STALL_LABEL) == 0)
                    continue;
                ascii_cells(&f.g, L.stalls.y + 1 + i, x, f.g.w, a, sizeof a);
                ascii_cells(&f.g, L.stalls.y + 1 + j, x, f.g.w, b, sizeof b);
                if (strcmp(a, b) == 0)
                    TASK_FAIL_("at %d columns stall rows %d and %d read \"%s\"", widths[z], i + 1, j + 1, a);
            }
    }
    render(&f, 120, 40);
    int y = row_labelled(&f.g, " top stall 1: ");
    ASSERT_GE(y, 0);
    ASSERT_STR_CONTAINS(row_text(&f.g, y), "(via torch/cuda/__init__.py:975 synchronize)");
    ASSERT(screen_has(&f.g, "(via torch/profiler/profiler.py:811 step)\n"));
    fixture_close(&f);
}

/* A replay that plays to its end stops there, paused, as a media player does; space plays it
 * again from the start, G goes to the end and stops there too. */
TEST(replay_pauses_when_playback_reaches_the_end) {
    fixture f;
    fixture_open(&f, synth_store(3, 3000));
    render(&f, 120, 40);
    ASSERT_EQ(f.v.paused, 1); /* it opens showing it all */
    ASSERT_STR_CONTAINS(row_text(&f.g, 0), "REPLAY \xe2\x8f\xb8");
    key(&f, ' ');
    ASSERT_EQ(f.v.paused, 0);
    ASSERT(f.v.now == f.v.origin);
    uint64_t span = f.v.end - f.v.origin;
    ASSERT_EQ(vw_replay_advance(&f.v, span / 2, 0), 1);
    ASSERT_EQ(f.v.paused, 0);
    ASSERT(f.v.now == f.v.origin + span / 2);
    render(&f, 120, 40);
    ASSERT_STR_CONTAINS(row_text(&f.g, 0), "REPLAY \xe2\x96\xb6");
    /* a file still loading: the playhead waits for more, playing */
    ASSERT_EQ(vw_replay_advance(&f.v, span, 1), 1);
    ASSERT_EQ(f.v.paused, 0);
    ASSERT(f.v.now == f.v.origin + span / 2);
    ASSERT_EQ(vw_replay_advance(&f.v, span, 0), 1);
    ASSERT_EQ(f.v.paused, 1);
    ASSERT(f.v.now == UINT64_MAX);
    render(&f, 120, 40);
    ASSERT_STR_CONTAINS(row_text(&f.g, 0), "REPLAY \xe2\x8f\xb8");
    ASSERT(strstr(row_text(&f.g, 0), "\xe2\x96\xb6") == NULL);
    ASSERT_EQ(vw_replay_advance(&f.v, span, 0), 0);
    key(&f, ' ');
    ASSERT_EQ(f.v.paused, 0);
    ASSERT(f.v.now == f.v.origin);
    key(&f, 'G');
    ASSERT_EQ(f.v.paused, 1);
    ASSERT(f.v.now == UINT64_MAX);
    fixture_close(&f);
}

/* The breakdown pane's header names one column per figure: as many names as figures, each ending
 * in the column its figures end in. */
TEST(breakdown_pane_header_names_one_column_per_figure) {
    fixture f;
    open_breakdown(&f, kineto_store("sampled_rank-0.json.gz"), "");
    int y = row_labelled(&f.g, " GPU IDLE, VIEW ");
    ASSERT_GE(y, 0);
    char head[512], row[512];
    ascii_cells(&f.g, y, 0, f.g.w, head, sizeof head);
    const char *end = strstr(head, "(b:");
    ASSERT_NOT_NULL(end);
    int x0 = (int)strlen(" GPU IDLE, VIEW"), x1 = (int)(end - head);
    ascii_cells(&f.g, y, x0, x1, head, sizeof head);
    ascii_cells(&f.g, y + 1, x0, x1, row, sizeof row);
    ASSERT_STR_CONTAINS(row_text(&f.g, y + 1), " GPU0 ");
    int names = 0, figures = 0;
    for (int x = 0; head[x]; x++) {
        int head_ends = head[x] != ' ' && (head[x + 1] == ' ' || head[x + 1] == '\0');
        int row_ends = row[x] != ' ' && (row[x + 1] == ' ' || row[x + 1] == '\0');
        names += head_ends;
        figures += row_ends;
        if (head_ends != row_ends)
            TASK_FAIL_("a name and its figure end apart at column %d:\n%s\n%s", x0 + x, head, row);
    }
    ASSERT_EQ(names, 6);
    ASSERT_EQ(figures, 6);
    fixture_close(&f);
}
