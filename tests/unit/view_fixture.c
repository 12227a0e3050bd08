/* The view's tests' fixture (view_fixture.h). */
#include "view_fixture.h"

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

void add_enc(st_store *s, tp_enc *enc) {
    tp_buf out = {0};
    ASSERT_OK(tp_enc_finish(enc, &out));
    tp_enc_delivered(enc, 1);
    err_msg err = {{0}};
    if (st_store_add_batch(s, out.data, out.len, &err) != 0)
        TASK_FAIL_("batch refused: %s", err.msg);
    tp_buf_free(&out);
}

/* events of sy's loop into s, through enc, 500 to a batch. */
static void fill(st_store *s, synth *sy, tp_enc *enc, size_t events) {
    for (size_t done = 0; done < events; done += 500) {
        synth_fill(sy, enc, events - done < 500 ? events - done : 500);
        add_enc(s, enc);
    }
}

st_store *synth_store(uint64_t seed, size_t events) {
    st_store *s = st_store_new(NULL);
    synth sy;
    synth_init(&sy, seed);
    tp_enc_opts eo = {.producer = 0xabc};
    tp_enc *enc = tp_enc_new(&eo);
    fill(s, &sy, enc, events);
    tp_enc_destroy(&enc);
    st_store_commit(s);
    return s;
}

st_store *kineto_store(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", KINETO_TRACE_DIR, name);
    st_store *s = st_store_new(NULL);
    err_msg err = {{0}};
    if (ingest_file(s, path, NULL, NULL, &err) != 0)
        TASK_FAIL_("%s: %s", name, err.msg);
    return s;
}


void fixture_open(fixture *f, st_store *s) {
    memset(f, 0, sizeof *f);
    f->s = s;
    err_msg err = {{0}};
    ASSERT_OK(an_analyze(s, NULL, &f->an, &err));
    vw_state_init(&f->v, VW_REPLAY, s);
    f->v.an = &f->an;
    vw_sites_update(&f->v);
}

void fixture_close(fixture *f) {
    vw_state_free(&f->v);
    vw_grid_free(&f->g);
    an_result_free(&f->an);
    st_store_destroy(&f->s);
}

void render(fixture *f, int w, int h) {
    f->g.w = w;
    f->g.h = h;
    vw_render(f->s, &f->v, &f->g);
    ASSERT_EQ(f->g.w, w);
    ASSERT_EQ(f->g.h, h);
}

void key(fixture *f, int k) { vw_key(&f->v, f->s, f->g.w, f->g.h, k); }

char *row_text(const vw_grid *g, int y) {
    static char buf[4096];
    char *all = vw_grid_text(g);
    const char *p = all;
    for (int i = 0; i < y; i++)
        p = strchr(p, '\n') + 1;
    size_t n = (size_t)(strchr(p, '\n') - p);
    if (n >= sizeof buf)
        n = sizeof buf - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    free(all);
    return buf;
}

int screen_has(const vw_grid *g, const char *needle) {
    char *t = vw_grid_text(g);
    int r = strstr(t, needle) != NULL;
    free(t);
    return r;
}

int count_role(const vw_grid *g, int role) {
    int n = 0;
    for (int i = 0; i < g->w * g->h; i++)
        n += g->cells[i].role == role;
    return n;
}

void assert_cells_safe(const vw_grid *g, int ascii) {
    for (int i = 0; i < g->w * g->h; i++) {
        uint32_t c = g->cells[i].ch;
        if (c == VW_CH_WIDE && i % g->w > 0 && vw_char_width(g->cells[i - 1].ch) == 2 && !ascii)
            continue; /* the second half of a wide character */
        if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || c > 0x10FFFF)
            TASK_FAIL_("cell %d,%d holds U+%04X", i % g->w, i / g->w, c);
        if (ascii && c >= 0x80)
            TASK_FAIL_("ASCII mode, cell %d,%d holds U+%04X", i % g->w, i / g->w, c);
        ASSERT(g->cells[i].role < ROLE_N_);
    }
}

/* ---- golden screens ---- */

char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = '\0';
    fclose(f);
    return b;
}

/* A golden screen: the text, the roles, and for monochrome screens the attributes each cell is
 * drawn with (the only thing that tells roles apart there besides the glyphs). */
void golden_mode(const vw_grid *g, const char *name, int mono) {
    char *text = vw_grid_text(g), *roles = vw_grid_roles(g), *attrs = mono ? vw_grid_attrs(g, 1) : NULL;
    size_t n = strlen(text) + strlen(roles) + (attrs ? strlen(attrs) : 0) + 64;
    char *both = malloc(n);
    snprintf(both, n, "%s--- roles\n%s%s%s", text, roles, attrs ? "--- attributes (mono)\n" : "", attrs ? attrs : "");
    free(attrs);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s-%dx%d.txt", GOLDEN_DIR, name, g->w, g->h);
    const char *upd = getenv("SYNCTOP_UPDATE_GOLDEN");
    if (upd && *upd == '1') {
        FILE *f = fopen(path, "wb");
        ASSERT_NOT_NULL(f);
        fputs(both, f);
        fclose(f);
    } else {
        char *want = read_all(path);
        if (want == NULL)
            TASK_FAIL_("%s is missing (SYNCTOP_UPDATE_GOLDEN=1 writes it)", path);
        if (strcmp(want, both) != 0) {
            const char *out = task_path("got.txt");
            FILE *f = fopen(out, "wb");
            fputs(both, f);
            fclose(f);
            TASK_FAIL_("screen differs from %s; got: %s (diff them; SYNCTOP_UPDATE_GOLDEN=1 rewrites)", path, out);
        }
        free(want);
    }
    free(text);
    free(roles);
    free(both);
}

void golden_fixture_mode(st_store *s, const char *name, int mono) {
    static const int sizes[2][2] = {{80, 24}, {200, 60}};
    for (int i = 0; i < 2; i++) {
        fixture f;
        fixture_open(&f, s);
        f.v.mono = mono;
        render(&f, sizes[i][0], sizes[i][1]);
        assert_cells_safe(&f.g, 0);
        golden_mode(&f.g, name, mono);
        /* the same with the first stall selected (n), the way a person would look for it */
        key(&f, 'n');
        render(&f, sizes[i][0], sizes[i][1]);
        char sel[128];
        snprintf(sel, sizeof sel, "%s-stall", name);
        golden_mode(&f.g, sel, mono);
        f.s = NULL; /* owned by the caller for the second size */
        vw_state_free(&f.v);
        vw_grid_free(&f.g);
        an_result_free(&f.an);
    }
    st_store_destroy(&s);
}

void golden_fixture(st_store *s, const char *name) { golden_fixture_mode(s, name, 0); }

/* A job of `ranks` processes, each its own producer, rank, pid and lanes (synth.h's loop, seed = rank). */
st_store *ranks_store(int ranks, size_t events) {
    st_store *s = st_store_new(NULL);
    for (int r = 0; r < ranks; r++) {
        synth sy;
        synth_init(&sy, (uint64_t)r + 1);
        tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 0x1000 + (uint64_t)r});
        synth_meta(&sy, enc);
        sy.meta_done = 1;
        tp_process p = {.kind = TP_K_PROCESS, .device = TP_NO_DEVICE, .pid = 7000 + (uint32_t)r,
                        .host = tp_enc_intern_cstr(enc, r < 8 ? "node1" : "node2"),
                        .cmdline = tp_enc_intern_cstr(enc, "python train.py"), .rank = r, .world = ranks};
        ASSERT_OK(tp_enc_add(enc, &p));
        fill(s, &sy, enc, events);
        tp_enc_destroy(&enc);
    }
    st_store_commit(s);
    return s;
}
