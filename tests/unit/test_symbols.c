/*
 * Native call sites to function, file and line (ingest/symbols.c): lookups in this very program, as
 * the tracer publishes its frames (module path + offset of the call), whatever the build (PIE or
 * not, gcc or clang, sanitizers or not); the CUDA runtime's frames; and module paths from hostile
 * traces, which must fail cleanly and never hang.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store.h"
#include "symbols.h"
#include "synctop/codec.h"
#include "task.h"

__attribute__((noinline)) static uintptr_t return_address(void) {
    uintptr_t ra = (uintptr_t)__builtin_return_address(0);
    __asm__ volatile("" ::: "memory");
    return ra;
}

static const char *self_path(void) {
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ASSERT(n > 0);
    exe[n] = '\0';
    return exe;
}

/* The module-relative offset of the call before ra, as the tracer publishes it. */
static uint64_t offset_of(uintptr_t ra) {
    Dl_info info;
    ASSERT(dladdr((void *)ra, &info) != 0);
    return (uint64_t)(ra - 1 - (uintptr_t)info.dli_fbase);
}

__attribute__((noinline)) static void a_caller_of_known_name(uint64_t *off, int *line) {
    uintptr_t ra = return_address(); *line = __LINE__;
    *off = offset_of(ra);
}

TEST(symbols_name_the_function_file_and_line_of_a_call) {
    uint64_t off;
    int line;
    a_caller_of_known_name(&off, &line);
    sy_cache *c = sy_new();
    ASSERT_NOT_NULL(c);
    sy_sym sym;
    ASSERT_EQ(sy_lookup(c, self_path(), NULL, off, &sym), 0);
    ASSERT_NOT_NULL(sym.func);
    ASSERT_STR_EQ(sym.func, "a_caller_of_known_name");
    ASSERT_NOT_NULL(sym.file);
    const char *slash = strrchr(sym.file, '/');
    ASSERT_STR_EQ(slash ? slash + 1 : sym.file, "test_symbols.c");
    ASSERT_EQ((int)sym.line, line);
    /* again: from the cache, the same strings */
    sy_sym again;
    ASSERT_EQ(sy_lookup(c, self_path(), NULL, off, &again), 0);
    ASSERT(again.func == sym.func && again.file == sym.file && again.line == sym.line);
    ASSERT_EQ(sy_missing_modules(c, NULL), 0);
    sy_free(&c);
    ASSERT(c == NULL);
}

TEST(symbols_refuse_what_is_not_a_module_without_hanging) {
    sy_cache *c = sy_new();
    sy_sym sym;
    /* a FIFO nobody writes to: opening it for reading would block without O_NONBLOCK */
    const char *fifo = task_path("fifo");
    ASSERT_OK(mkfifo(fifo, 0600));
    /* text, an empty file, the first bytes of a real ELF file */
    const char *text = task_path("text");
    FILE *f = fopen(text, "w");
    fputs("this is not an ELF file, but it is long enough to be read as one. ....................", f);
    fclose(f);
    const char *empty = task_path("empty");
    fclose(fopen(empty, "w"));
    const char *cut = task_path("cut");
    FILE *in = fopen(self_path(), "rb"), *out = fopen(cut, "wb");
    char head[200];
    ASSERT_EQ(fread(head, 1, sizeof head, in), sizeof head);
    fwrite(head, 1, sizeof head, out);
    fclose(in);
    fclose(out);
    const char *bad[] = {fifo, text, empty, cut, "/dev/zero", "/dev/null", "/", "/nonexistent/libx.so",
                         "relative/libcuda.so", "", "\x1b[31m/evil"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_EQ(sy_lookup(c, bad[i], NULL, 0x1234, &sym), -1);
        ASSERT(sym.func == NULL && sym.file == NULL && sym.line == 0);
        /* asked again: remembered, still refused */
        ASSERT_EQ(sy_lookup(c, bad[i], NULL, 0x1234, &sym), -1);
    }
    ASSERT_EQ(sy_lookup(c, NULL, NULL, 0, &sym), -1);
    const char *example = NULL;
    ASSERT_EQ(sy_missing_modules(c, &example), sizeof bad / sizeof bad[0] - 1); /* "" is not a module */
    ASSERT_NOT_NULL(example);
    /* offsets outside the module find nothing, and say so */
    ASSERT_EQ(sy_lookup(c, self_path(), NULL, UINT64_MAX - 7, &sym), -1);
    ASSERT_EQ(sy_lookup(c, self_path(), NULL, 1ull << 40, &sym), -1);
    sy_free(&c);
}

TEST(symbols_know_the_cuda_runtime_frames) {
    /* the names a statically linked libcudart 13 leaves in a program (nm of a sample) */
    ASSERT(st_is_runtime_function("cudaMemcpy"));
    ASSERT(st_is_runtime_function("cudaStreamSynchronize_ptsz"));
    ASSERT(st_is_runtime_function("__cudaPushCallConfiguration"));
    ASSERT(st_is_runtime_function("libcudart_static_fff5db4de8afb04f893374d0840e43d8d209e8"));
    ASSERT(st_is_runtime_function("cudart::cudaApiStreamSynchronize(CUstream_st*)"));
    ASSERT(st_is_runtime_function("_ZN6cudart24cudaApiStreamSynchronizeEP11CUstream_st"));
    ASSERT(st_is_runtime_function("__device_stub__Z4spinxPf(long long, float*)"));
    ASSERT(!st_is_runtime_function("main"));
    ASSERT(!st_is_runtime_function("cuda"));
    ASSERT(!st_is_runtime_function("cudaish_helper"));
    ASSERT(!st_is_runtime_function("train_step(float*, int)"));
    ASSERT(!st_is_runtime_function(NULL));
    ASSERT(!st_is_runtime_function(""));
}

/* A store whose call site has native frames published by "the tracer": a frame in this program
 * (a real call), one in a module that does not exist here, and a CUDA runtime frame in front. */
TEST(symbols_fill_a_store_and_name_the_site_after_the_program_frame) {
    uint64_t off;
    int line;
    a_caller_of_known_name(&off, &line);
    tp_enc *enc = tp_enc_new(&(tp_enc_opts){.producer = 7});
    ASSERT_NOT_NULL(enc);
    uint32_t exe = tp_enc_intern_cstr(enc, self_path());
    uint32_t gone = tp_enc_intern_cstr(enc, "/nonexistent/libgone.so");
    uint32_t rt = tp_enc_intern_cstr(enc, "cudaStreamSynchronize");
    tp_callsite cs = {.kind = TP_K_CALLSITE, .device = TP_NO_DEVICE, .id = 1, .n_frames = 3};
    tp_enc_add(enc, &cs);
    tp_frame f0 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 0, .callsite = 1, .func = rt,
                   .module = gone, .pc = 0x40};
    tp_frame f1 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 1, .callsite = 1, .module = exe,
                   .pc = off};
    tp_frame f2 = {.kind = TP_K_FRAME, .flags = TP_FRAME_NATIVE, .index = 2, .callsite = 1, .module = gone,
                   .pc = 0x80};
    tp_enc_add(enc, &f0);
    tp_enc_add(enc, &f1);
    tp_enc_add(enc, &f2);
    tp_buf b = {0};
    err_msg err = {{0}};
    ASSERT_OK(tp_enc_finish(enc, &b));
    st_store *s = st_store_new(NULL);
    ASSERT_OK(st_store_add_batch(s, b.data, b.len, &err));
    ASSERT_EQ(st_callsite_count(s), 1);
    /* before: the tracer named nothing in the program */
    const st_frame *named = st_site_frame(s, 1);
    ASSERT_NOT_NULL(named);
    ASSERT_EQ(named->symbolized, 0);
    ASSERT_EQ(named->line, 0);

    sy_cache *c = sy_new();
    sy_fixes fx = {0};
    /* a budget of one frame looks at one frame */
    ASSERT_EQ(sy_collect(c, s, 1, &fx), 1);
    ASSERT_EQ(fx.n, 1);
    sy_apply(s, &fx);
    ASSERT_EQ(fx.n, 0);
    ASSERT_EQ(sy_collect(c, s, 0, &fx), 2);
    sy_apply(s, &fx);
    ASSERT_EQ(sy_collect(c, s, 0, &fx), 0); /* all looked at */

    size_t n;
    const st_frame *fr = st_callsite_frames(s, 1, &n);
    ASSERT_EQ(n, 3);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(fr[i].symbolized, 1);
    /* the runtime frame keeps the tracer's name; the missing module's frame stays unnamed */
    ASSERT_STR_EQ(st_str(s, fr[0].func), "cudaStreamSynchronize");
    ASSERT_EQ(fr[2].line, 0);
    ASSERT_STR_EQ(st_str(s, fr[2].func), "");
    named = st_site_frame(s, 1);
    ASSERT(named == &fr[1]);
    ASSERT_STR_EQ(st_str(s, named->func), "a_caller_of_known_name");
    ASSERT_EQ((int)named->line, line);
    ASSERT_STR_CONTAINS(st_str(s, named->file), "test_symbols.c");

    /* a fix collected before the call site was re-sent with other frames is not applied */
    st_frame_set_symbol(s, 1, 2, fr[2].module, fr[2].pc + 1, "wrong", "wrong.c", 9);
    ASSERT_STR_EQ(st_str(s, fr[2].func), "");
    st_frame_set_symbol(s, 1, 99, fr[2].module, fr[2].pc, "wrong", "wrong.c", 9);
    st_frame_set_symbol(s, 2, 0, fr[2].module, fr[2].pc, "wrong", "wrong.c", 9);

    sy_fixes_free(&fx);
    sy_free(&c);
    st_store_destroy(&s);
    tp_buf_free(&b);
    tp_enc_destroy(&enc);
}

#ifdef SAMPLE_ITEM
#include <elfutils/libdwfl.h>

/* The sample built by nvcc (host code by gcc, libcudart linked statically, as nvcc does by
 * default): the line tagged @item, looked up as the tracer would publish a call made there, is
 * main at that line; the runtime's cudaMemcpy and its internal functions, in the same program, are
 * known as the runtime's. No GPU needed: only the program file is read. */
TEST(symbols_name_the_line_of_a_cuda_sample_and_know_its_static_runtime) {
    char *src = NULL;
    size_t len = 0;
    FILE *f = fopen(SAMPLE_ITEM_SRC, "r");
    ASSERT_NOT_NULL(f);
    ASSERT(getdelim(&src, &len, '\0', f) > 0);
    fclose(f);
    const char *at = strstr(src, "// @item\n");
    ASSERT_NOT_NULL(at);
    int line = 1;
    for (const char *p = src; p < at; p++)
        line += *p == '\n';
    free(src);

    /* the sample as libdwfl sees it at base 0: addresses to the tracer's offsets */
    static const Dwfl_Callbacks cb = {.find_elf = dwfl_build_id_find_elf,
                                      .find_debuginfo = dwfl_standard_find_debuginfo,
                                      .section_address = dwfl_offline_section_address};
    Dwfl *d = dwfl_begin(&cb);
    ASSERT_NOT_NULL(d);
    dwfl_report_begin(d);
    Dwfl_Module *mod = dwfl_report_elf(d, "sample", SAMPLE_ITEM, -1, 0, false);
    dwfl_report_end(d, NULL, NULL);
    ASSERT_NOT_NULL(mod);
    Dwarf_Addr start = 0;
    dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);

    Dwfl_Line **lines = NULL;
    size_t n_lines = 0;
    ASSERT_EQ(dwfl_module_getsrc_file(mod, "sample_item.cu", line, 0, &lines, &n_lines), 0);
    ASSERT(n_lines > 0);
    sy_cache *c = sy_new();
    /* Optimised code may give one address rows of several lines (the loop's and the call's): each
     * address is main's, in the sample, and the line is the tagged one at least once. */
    int hits = 0;
    for (size_t i = 0; i < n_lines; i++) {
        Dwarf_Addr addr = 0;
        dwfl_lineinfo(lines[i], &addr, NULL, NULL, NULL, NULL);
        sy_sym sym;
        ASSERT_EQ(sy_lookup(c, SAMPLE_ITEM, NULL, addr - start, &sym), 0);
        ASSERT_STR_EQ(sym.func, "main");
        ASSERT_STR_CONTAINS(sym.file, "sample_item.cu");
        hits += (int)sym.line == line;
        ASSERT(!st_is_runtime_function(sym.func));
    }
    ASSERT(hits > 0);
    free(lines);

    /* every function the static runtime brought in is the runtime's */
    int n = dwfl_module_getsymtab(mod), memcpy_seen = 0, internal_seen = 0;
    ASSERT(n > 0);
    for (int i = 1; i < n; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
        if (name == NULL || GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size == 0)
            continue;
        int is_memcpy = strcmp(name, "cudaMemcpy") == 0;
        int is_internal = strncmp(name, "libcudart_static_", 17) == 0;
        if (!is_memcpy && !(is_internal && internal_seen < 50))
            continue;
        sy_sym s;
        ASSERT_EQ(sy_lookup(c, SAMPLE_ITEM, NULL, addr - start, &s), 0);
        ASSERT_NOT_NULL(s.func);
        ASSERT(st_is_runtime_function(s.func));
        memcpy_seen += is_memcpy;
        internal_seen += is_internal;
    }
    ASSERT_EQ(memcpy_seen, 1);
    ASSERT(internal_seen > 0);
    sy_free(&c);
    dwfl_end(d);
}
#endif
