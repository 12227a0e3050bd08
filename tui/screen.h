/*
 * The view model: a pure function from a store, an analysis and a viewport (vw_state) to a grid of
 * cells (character, colour role, attributes), plus the pure handling of keys and clicks that moves
 * the viewport. Nothing here talks to a terminal: term.c maps roles to colours and draws the
 * grid, viewer.c runs the loop. So every screen can be rendered and compared in a test, at any
 * size, to the character.
 *
 * Screen, top to bottom (layout in vw_layout_compute):
 *   title bar      the job (command, pid, host), mode (LIVE / REPLAY with play state, speed), time
 *   GPU rows       per GPU: busy %, idle %, host time blocked on it; events/s and drops on the first
 *   ruler          time ticks over the timeline columns, the cursor marked
 *   lanes          per GPU a summary row (union of its streams, idle bubbles), its streams, then
 *                  the host threads (CUDA calls, blocking spans in red) and their NVTX ranges
 *   detail         the event under the cursor: name, where, when, how long, bytes, call site
 *   top stalls     call sites by total time blocked (count, total, max, share of wall time)
 *   key bar        the keys, htop style
 * Below 80x24 the whole screen says "terminal too small".
 *
 * Each panel is a file (screen_header.c, screen_ruler.c, screen_lanes.c, screen_detail.c,
 * screen_stalls.c, screen_help.c) that draws its part and answers its keys over its own part of
 * vw_state (vw_header, vw_ruler, vw_lanes, vw_stalls, vw_search); what they share and nothing else
 * needs is in screen_int.h.
 */
#ifndef SYNCTOP_SCREEN_H
#define SYNCTOP_SCREEN_H

#include <stddef.h>
#include <stdint.h>

#include "analysis.h"
#include "busy.h"
#include "keys.h"
#include "stalls.h"
#include "store.h"

#define VW_MIN_W 80
#define VW_MIN_H 24
/* What a terminal of w x h columns and rows, smaller than VW_MIN_W x VW_MIN_H, is told: the
 * longest of the forms that fits in w, so that the size needed is never cut off. */
void vw_too_small_text(int w, int h, char *out, size_t n);
#define VW_MIN_LANES 4 /* lane rows a layout keeps, whatever the content */

/* Colour roles: what a cell means; term.c's scheme table gives each a colour pair and a
 * monochrome attribute. */
typedef enum vw_role {
    ROLE_DEFAULT = 0,
    ROLE_TITLE,        /* title bar */
    ROLE_LABEL,        /* "busy", "idle": field names */
    ROLE_VALUE,        /* numbers in the header */
    ROLE_WARN,         /* drops, errors */
    ROLE_DIM,          /* secondary text, empty ruler */
    ROLE_RULER,
    ROLE_LANE,         /* lane labels */
    ROLE_DEVICE,       /* GPU summary row label */
    ROLE_KERNEL,
    ROLE_MEMCPY,
    ROLE_MEMSET,
    ROLE_SYNC,
    ROLE_API,
    ROLE_BLOCKED,
    ROLE_NVTX,
    ROLE_BUBBLE,
    ROLE_SELECTION,    /* the selected stall row; its spans on the timeline */
    ROLE_CURSOR,       /* the cursor column */
    ROLE_PANEL,        /* panel titles and column headers */
    ROLE_KEY,          /* key bar: the key */
    ROLE_KEYTEXT,      /* key bar: what it does */
    ROLE_HELP,
    ROLE_N_
} vw_role;

/* The letter of a role in golden files ('.' for ROLE_DEFAULT). */
char vw_role_letter(int role);

enum { VW_A_BOLD = 1, VW_A_REVERSE = 2, VW_A_UNDERLINE = 4, VW_A_DIM = 8 };

/* The scheme table: per role, its colours (VW_C_*: the eight ANSI colours, or the terminal's
 * default) and attributes in colour, and the attributes that stand in for colour on a monochrome
 * terminal. term.c turns it into colour pairs; tests check it without a terminal. */
enum { VW_C_DEFAULT = -1, VW_C_BLACK = 0, VW_C_RED, VW_C_GREEN, VW_C_YELLOW, VW_C_BLUE, VW_C_MAGENTA,
       VW_C_CYAN, VW_C_WHITE };
typedef struct vw_scheme {
    const char *name; /* the role's name (NULL: the role has no entry, a bug) */
    int fg, bg;       /* VW_C_* */
    int attr;         /* VW_A_* added in colour */
    int mono;         /* VW_A_* in monochrome */
} vw_scheme;
const vw_scheme *vw_scheme_get(int role); /* NULL outside 0..ROLE_N_-1 */

/* A cell's ch is a code point; a wide (two-column) character takes its cell and the next, whose
 * ch is VW_CH_WIDE: the terminal and the text dump skip that one. */
#define VW_CH_WIDE 0u

typedef struct vw_cell {
    uint32_t ch; /* a Unicode code point (ASCII only when the view is in ASCII mode), or VW_CH_WIDE */
    uint8_t role;
    uint8_t attr; /* VW_A_*, on top of the role's own */
} vw_cell;

typedef struct vw_grid {
    int w, h;       /* set these, then vw_render draws a frame of that size */
    vw_cell *cells; /* h rows of w */
    size_t cap;     /* cells allocated */
} vw_grid;

int vw_grid_resize(vw_grid *g, int w, int h);
void vw_grid_free(vw_grid *g);
/* The grid as UTF-8 text, one line per row (trailing spaces kept), and the role letters. */
char *vw_grid_text(const vw_grid *g);
char *vw_grid_roles(const vw_grid *g);
/* The attributes each cell is drawn with (its role's, colour or mono, plus its own), one hex
 * digit per cell ('.' for none): for golden screens of the monochrome rendering. */
char *vw_grid_attrs(const vw_grid *g, int mono);
/* Columns a code point takes on a terminal: 0, 1 or 2 (wcwidth; its own table when the locale
 * does not say). */
int vw_char_width(uint32_t c);

/* ---- layout ---- */

typedef struct vw_rect {
    int x, y, w, h;
} vw_rect;

typedef struct vw_layout {
    int too_small;
    vw_rect title, gpus, ruler, steps, lanes, detail, stalls, keys; /* steps: 0 rows when none */
    int label_w; /* lane labels inside lanes (and the ruler's left margin) */
    vw_rect timeline; /* the lanes' time columns */
} vw_layout;

/* gpu_rows: how many GPU rows the header wants (clamped). The stalls panel gets its usual
 * height (none when the detail pane is expanded). */
void vw_layout_compute(int w, int h, int gpu_rows, int detail_expanded, vw_layout *out);
/* Fits a computed layout to its content: the stalls panel shrinks to its rows and gives the rest
 * to the lanes; rows the lanes would leave empty go to more stall rows, then to the detail pane
 * (which shows the frames of the event under the cursor and a legend there). The lanes keep at
 * least VW_MIN_LANES rows. */
void vw_layout_fit(vw_layout *L, int lane_rows, int site_rows);

/* ---- the model's state: everything a frame depends on besides the store ---- */

typedef enum vw_mode { VW_LIVE = 1, VW_REPLAY = 2 } vw_mode;
#define VW_LIVE_SPAN_NS 5000000000ull /* live: the widest window shown until the user zooms */
typedef enum vw_focus { VW_FOCUS_TIMELINE = 0, VW_FOCUS_STALLS = 1 } vw_focus;


/* The parts of a frame, in the order vw_render draws them: with vw_state.timing set, it adds the
 * seconds each took there (benchmarks say where a frame's time goes). */
enum { VW_PART_SETUP, VW_PART_TITLE, VW_PART_GPUS, VW_PART_RULER, VW_PART_STEPS, VW_PART_LANES,
       VW_PART_DETAIL, VW_PART_STALLS, VW_PART_KEYS, VW_PART_N_ };
extern const char *const vw_part_names[VW_PART_N_];

/* Each panel's own state (the files that draw it and answer its keys say so in their names). */

/* The header's GPU figures (screen_header.c): the whole run so far (replay: up to now), or with
 * scope_window what the window shows (key v). figs holds them for [figs_a, figs_b) once
 * vw_figs_update has finished a sweep; until then the header uses an's whole-trace figures when
 * they apply. */
typedef struct vw_header {
    int scope_window;
    an_gpu_fig *figs;
    size_t n_figs;
    uint64_t figs_a, figs_b;
    int figs_ready;
    an_sweep *sweep;
} vw_header;

/* The ruler's mark (screen_ruler.c): m marks a span on it, and so does a drag of the mouse across
 * the timeline, which also measures what ran in it (what, shown in the detail pane; esc clears). */
typedef struct vw_ruler {
    int marked;
    uint64_t mark0, mark1;
    int pressing;   /* the button went down on the timeline, at press */
    uint64_t press;
    int press_x;
    char what[256]; /* a dragged span: its length, GPU busy, host blocked, kernels and calls in it */
} vw_ruler;

/* The lanes' groups (screen_lanes.c). */
typedef struct vw_lanes {
    uint64_t *folds;     /* c: folded groups (a process, a GPU's streams, a thread's ranges), sorted */
    size_t n_folds;
    int hide_idle;       /* e: lanes with nothing in the window are left out */
    size_t procs_folded; /* processes looked at for folding: a job of more than VW_FOLD_ABOVE opens
                            with every process folded into its row, and new ones come folded */
} vw_lanes;

/* The stalls panel, and the idle breakdown pane that takes its place (screen_stalls.c). */
#define VW_STALL_LABEL 512

typedef struct vw_stalls {
    an_stall_site *sites; /* over blocks ending before now, by the sort column */
    size_t n_sites;
    char *labels;        /* n_sites labels of VW_STALL_LABEL bytes, in the rows' order, told apart
                            where two would read the same (an_labels_distinguish) */
    size_t *heads;       /* per label, its bytes that name the call site: what follows tells it
                            apart from another, and is kept when the label is shortened */
    int sel, scroll;     /* the selected row, the first row shown */
    int show_site;       /* the selected call site's spans are marked (after n, N, i; esc clears) */
    an_stall_order sort; /* < and >: the column the rows are sorted by */
    int step;            /* t: only the step at the cursor (of each process) counts */
    int64_t step_no;     /* that step's number, -1 when the cursor is in none (set by vw_sites_update) */
    int worst_pos;       /* i/I: which of the selected site's stalls, worst first */
    int breakdown;       /* b: the idle breakdown pane in place of the stalls */
    struct hta_result *hta; /* HTA's breakdown of the whole trace (replay), made when first shown */
    int hta_async;       /* set by the loop: b only asks for HTA's breakdown (vw_hta_wanted), which
                            the loop makes on its analysis thread (vw_hta_take); unset, b makes it */
    int hta_pending;     /* asked for, not made yet */
    char hta_note[96];   /* why there is none */
} vw_stalls;

/* The search prompt in the key bar (screen_help.c). */
typedef struct vw_search {
    char term[64];       /* the search term being typed, or the last one */
    char last[64];       /* the last term searched for: "/" and enter repeat it */
    int typing;          /* typing a search term */
    int active;          /* a search found a match: n and N go to the next and previous one, as in
                            less, until esc gives them back to the stalls */
} vw_search;

typedef struct vw_state {
    /* the viewport, which every panel reads */
    vw_mode mode;
    int ascii, mono;    /* glyphs and colours */
    uint64_t origin;    /* time 0 of the ruler: the trace's first event */
    uint64_t t0, t1;    /* visible window */
    uint64_t now;       /* replay: events after now are not shown yet; live: UINT64_MAX */
    uint64_t end;       /* latest time known (span end, or the file index's end while loading) */
    uint64_t cursor;    /* cursor time */
    int cursor_row;     /* index in the visible rows (the lanes' rows) */
    int row_scroll;     /* first row shown */
    int follow;         /* keep the window's right edge at the latest time */
    int follow_off;     /* F turned follow off: starting a replay's playback leaves it off */
    uint64_t live_span; /* live, following: the window shows the last live_span ns, or all that
                           arrived while that is less (VW_LIVE_SPAN_NS at first, UINT64_MAX after
                           0); 0 once the user sets the width (zoom, f, a stall, a match, a step) */
    int paused;
    double speed;       /* replay speed */
    vw_focus focus;
    int help, detail;   /* overlays: help screen, detail pane expanded */
    char message[160];  /* one-line status, shown in the key bar */
    /* what the loop gives */
    const an_result *an; /* may be NULL */
    const struct an_steps *steps; /* the loop's steps (may be NULL): the strip under the ruler */
    const st_store *store; /* the store the state was made for (vw_state_init) */
    uint64_t gap_ns;     /* bubbles below this are not drawn (0: all of an's bubbles) */
    double load_progress; /* < 1 while a file is still loading */
    uint64_t damaged;     /* replay: damaged batches of the files skipped (the title says so) */
    double events_per_s;  /* live */
    int recording;       /* live: every batch also goes to a trace file (the title says REC) */
    char notice[160];    /* live: why nothing shows (no data from an endpoint), in the lanes area */
    int live_over;       /* live: what the view waited for ended with nothing traced */
    double *timing;      /* NULL, or VW_PART_N_ sums of seconds that vw_render adds to */
    /* the panels' own */
    vw_header header;
    vw_ruler ruler;
    vw_lanes lanes;
    vw_stalls stalls;
    vw_search search;
} vw_state;

/* The layout of a frame of this state and store (vw_layout_compute, then vw_layout_fit). */
void vw_layout_for(const vw_state *v, const st_store *s, int w, int h, vw_layout *L);

/* Starts a state over a committed store: whole span visible, cursor at its start. */
void vw_state_init(vw_state *v, vw_mode mode, const st_store *s);
void vw_state_free(vw_state *v);
/* Recomputes the stall sites from v->an's blocks that end by v->now; with stall_step, only those
 * that start in the step at the cursor of their process. */
void vw_sites_update(vw_state *v);
/* Keeps the window valid after the store grew or the screen changed (clamps, follow). */
void vw_state_settle(vw_state *v, const st_store *s, int w, int h);

/* Brings the header's GPU figures up to date for the current "now", window and scope, doing at most
 * about budget events of work (0: no limit). Returns 1 when they are current, 0 when more work is
 * left (call again). Cheap when nothing changed; a replay's advancing "now" only extends the sweep. */
int vw_figs_update(vw_state *v, const st_store *s, size_t budget);
/* The range the header's figures should cover now (a == b: an's whole-trace figures do). */
void vw_figs_range(const vw_state *v, uint64_t *a, uint64_t *b);

/* HTA's breakdown when the loop makes it (hta_async): whether b asked for it and it is not made
 * yet; then the loop hands over what hta_analyze made (rc 0: *h, the state's to free) or why it
 * could not (rc < 0: err). */
int vw_hta_wanted(const vw_state *v);
void vw_hta_take(vw_state *v, struct hta_result *h, int rc, const err_msg *err);

/* Draws one frame of w x h into g (resized as needed). */
void vw_render(const st_store *s, vw_state *v, vw_grid *g);
/* The screen while a profiler trace or an export is read whole, before anything can be shown: the
 * title, the file's name (sanitized), how far its reading has come (done of total bytes; total 0:
 * unknown) and how to leave. */
void vw_render_loading(const vw_state *v, vw_grid *g, const char *name, uint64_t done, uint64_t total);

/* ---- input ---- */

enum { VW_MOUSE_CLICK = 1, VW_MOUSE_WHEEL_UP = 2, VW_MOUSE_WHEEL_DOWN = 3, VW_MOUSE_RELEASE = 4 };
#define VW_MOUSE_CTRL 0x100 /* or'ed into a kind: ctrl was held */
enum { VW_ACT_NONE = 0, VW_ACT_REDRAW = 1, VW_ACT_QUIT = 2 };

/* Replay: moves the playhead (now) on by ns while playing. Once it passes the end, with nothing
 * more to load, everything is shown and playback pauses there, as a media player stops at the end
 * (space plays it again from the start). Returns 1 when the state changed. */
int vw_replay_advance(vw_state *v, uint64_t ns, int loading);

/* Applies a key (a code point or VW_KEY_*) to the state for a w x h screen. */
int vw_key(vw_state *v, const st_store *s, int w, int h, int key);
int vw_mouse(vw_state *v, const st_store *s, int w, int h, int kind, int x, int y);

/* Text helpers (exposed for the tests). */
void vw_fmt_dur(char *out, size_t n, uint64_t ns, int ascii);

#endif
