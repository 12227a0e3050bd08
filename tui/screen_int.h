/*
 * What the view's files share, and no one else: the rows of the lanes, the context of a frame, and
 * the functions one file calls in another's (named vw__*). screen_cells.c holds what every panel writes
 * with (cells, text, glyphs, the viewport in columns); each panel is a file that draws its part of
 * the layout and answers its keys over its own state (screen.h: vw_header, vw_ruler, vw_lanes,
 * vw_stalls, vw_search): screen_header.c, screen_ruler.c, screen_lanes.c, screen_detail.c,
 * screen_stalls.c, screen_help.c; screen_frame.c keeps the state and draws a frame panel by
 * panel, and screen_input.c sends each key and click to its panel.
 */
#ifndef SYNCTOP_SCREEN_INT_H
#define SYNCTOP_SCREEN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "screen.h"
static inline int clampi(int x, int lo, int hi) { return x < lo ? lo : x > hi ? hi : x; }
static inline int mini(int a, int b) { return a < b ? a : b; }

enum { ROW_DEVICE = 1, ROW_LANE = 2, ROW_PROCESS = 3 };
typedef struct vw_row {
    int type;
    size_t lane; /* ROW_LANE */
    uint32_t producer;
    uint16_t device;
    uint32_t depth1; /* a ranges lane opened by depth: its depth + 1 (0: the lane's own row) */
} vw_row;

/* Rows a thread's ranges open into, at most: deeper ranges are left to the detail pane. */
#define VW_DEPTH_ROWS 32

/* The rows whose bubbles a frame shows, and their bubbles' overlap with each column (see
 * bubble_columns). */
typedef struct bubble_rows {
    int *lane_slot;      /* per stream lane: its row's slot, -1 none */
    size_t n_lanes;
    uint64_t *dev_key;   /* device rows: producer << 16 | device, sorted */
    int *dev_slot;
    size_t n_dev;
    uint64_t *sum;       /* per slot, cols of them */
} bubble_rows;

typedef struct frame_ctx {
    const st_store *s;
    vw_state *v;
    vw_grid *g;
    const vw_layout *L;
    vw_row *rows;
    size_t n_rows;
    uint64_t bmax;
    st_bucket *buf; /* timeline.w buckets */
    st_bucket *dev; /* device sums */
    bubble_rows br; /* the shown rows' bubbles per column */
    uint8_t *bubble_col;
} frame_ctx;

/* screen_cells.c: cells, text and glyphs; the viewport in columns */
void vw__put_cell(vw_grid *g, int x, int y, uint32_t ch, int role, int attr);
int vw__put_str(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, int role, int attr);
/* As vw__put_str, but text that does not fit is shortened before byte tail of s, so that what
 * follows (what tells two labels apart) stays in sight; when even that does not fit, the text
 * before it keeps a few columns and the tail is shortened in its middle, keeping both its ends. */
int vw__put_str_tail(vw_grid *g, const vw_state *v, int x, int y, int maxw, const char *s, size_t tail, int role,
                     int attr);
void vw__fill(vw_grid *g, int x, int y, int w, int role, int attr);
void vw__sanitized(char *out, size_t n, const char *s);
void vw__producer_tag(const st_store *s, uint32_t producer, char *out, size_t n);
void vw__fmt_tick(char *out, size_t n, uint64_t t, uint64_t step, int ascii);
void vw__fmt_count(char *out, size_t n, double x);
void vw__fmt_bytes(char *out, size_t n, uint64_t b);
int vw__cat_role(int cat);
uint32_t vw__cell_glyph(const vw_state *v, int cat, double frac);
int vw__col_of(const vw_state *v, const vw_layout *L, uint64_t t);
void vw__reveal(vw_state *v, uint64_t a, uint64_t b, int cols);

/* the panels; each vw__*_free frees what its panel's state holds */

/* screen_header.c */
void vw__render_title(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L);
void vw__render_gpus(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L);
void vw__header_free(vw_state *v);

/* screen_ruler.c */
void vw__render_ruler(const vw_state *v, vw_grid *g, const vw_layout *L);
/* Marks [a, b) on the ruler and says in v->ruler.what what ran in it: GPU busy (the union of each
 * GPU's work), host blocked (the union of each thread's blocking calls), kernels and calls. */
void vw__mark_measure(vw_state *v, const st_store *s, uint64_t a, uint64_t b);
void vw__render_steps(const st_store *s, const vw_state *v, vw_grid *g, const vw_layout *L, uint32_t producer);
void vw__slow_step_cmd(vw_state *v, const vw_layout *L, vw_cmd c);

/* screen_lanes.c */
size_t vw__rows_walk(const st_store *s, const vw_state *v, vw_row *r, size_t *devices);
vw_row *vw__rows_build(const st_store *s, const vw_state *v, size_t *n_out);
size_t vw__bubble_from(const an_result *an, uint64_t maxlen, uint64_t a);
void vw__fold_new_processes(vw_state *v, const st_store *s);
void vw__bubble_rows_free(bubble_rows *br);
void vw__render_lanes(frame_ctx *f);
int vw__row_of_lane(vw_state *v, const st_store *s, size_t lane);
int vw__row_of_range(vw_state *v, const st_store *s, size_t lane, uint32_t depth);
void vw__fold_cmd(vw_state *v, const st_store *s, vw_cmd c);
void vw__lanes_free(vw_state *v);

/* screen_detail.c */
void vw__render_detail(frame_ctx *f);
void vw__select_cmd(vw_state *v, const st_store *s, const vw_layout *L, vw_cmd c);

/* screen_stalls.c */
size_t vw__breakdown_rows(const vw_state *v);
void vw__render_stalls(frame_ctx *f);
void vw__stalls_free(vw_state *v);
void vw__stall_cmd(vw_state *v, const st_store *s, vw_cmd c, int cols);
/* Row k's label into out; returns its bytes that name the call site (the rest tells it apart). */
size_t vw__stall_label(const vw_state *v, int k, char out[VW_STALL_LABEL]);
/* Enter on the stalls panel: the selected call site's longest stall under the cursor, its detail
 * pane open. */
void vw__stalls_enter(vw_state *v, const st_store *s, int cols);
/* b: the breakdown pane in place of the stalls, or back; HTA's breakdown asked for when first shown. */
void vw__breakdown_cmd(vw_state *v, const st_store *s);
/* The selection d rows down (up when negative), the worst-first walk starting again. */
void vw__stalls_move(vw_state *v, int d);

/* screen_help.c */
void vw__render_keys(const vw_state *v, vw_grid *g, const vw_layout *L);
void vw__render_help(const vw_state *v, vw_grid *g);
void vw__search_key(vw_state *v, const st_store *s, int cols, int key);
/* /: the prompt opens on an empty term. */
void vw__search_open(vw_state *v);
/* n and N after a search: the next (dir > 0) or previous match, wrapping round. */
void vw__search_again(vw_state *v, const st_store *s, int cols, int dir);

#endif
