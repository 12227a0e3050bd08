/* What the view's tests share: stores built from synthetic and real traces, a fixture that renders a
 * store's view into a grid, reading that grid back, and golden screens. */
#ifndef SYNCTOP_VIEW_FIXTURE_H
#define SYNCTOP_VIEW_FIXTURE_H

#include "analysis.h"
#include "screen.h"
#include "store.h"

typedef struct fixture {
    st_store *s;
    an_result an;
    vw_state v;
    vw_grid g;
} fixture;

void add_enc(st_store *s, tp_enc *enc);
st_store *synth_store(uint64_t seed, size_t events);
st_store *kineto_store(const char *name);
void fixture_open(fixture *f, st_store *s);
void fixture_close(fixture *f);
void render(fixture *f, int w, int h);
void key(fixture *f, int k);
char *row_text(const vw_grid *g, int y);
int screen_has(const vw_grid *g, const char *needle);
int count_role(const vw_grid *g, int role);
void assert_cells_safe(const vw_grid *g, int ascii);
char *read_all(const char *path);
/* A golden screen: the text, the roles, and for monochrome screens the attributes each cell is
 * drawn with (the only thing that tells roles apart there besides the glyphs). */
void golden_mode(const vw_grid *g, const char *name, int mono);
void golden_fixture_mode(st_store *s, const char *name, int mono);
void golden_fixture(st_store *s, const char *name);
/* A job of `ranks` processes, each its own producer, rank, pid and lanes (synth.h's loop, seed = rank). */
st_store *ranks_store(int ranks, size_t events);

#endif
