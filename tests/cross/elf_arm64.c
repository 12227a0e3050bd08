/*
 * Built for this machine by check_arm64.sh: the injector's ELF reader (inject/inject_elf.c) on an
 * aarch64 C library (the cross toolchain's), which is what an aarch64 synctop reads to find
 * dlopen, dlerror and __errno_location in a process.
 */
#include <elf.h>
#include <stdio.h>
#include <string.h>

#include "inject_elf.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: elf_arm64 AARCH64_LIBC\n");
        return 2;
    }
    err_msg err;
    memset(&err, 0, sizeof err);
    ij_elf *e = ij_elf_open(argv[1], &err);
    if (e == NULL) {
        fprintf(stderr, "FAIL: %s\n", err.msg);
        return 1;
    }
    int bad = 0;
    if (ij_elf_machine(e) != EM_AARCH64) {
        fprintf(stderr, "FAIL: %s: machine %u, not EM_AARCH64 (%u)\n", argv[1], ij_elf_machine(e), EM_AARCH64);
        bad = 1;
    }
    static const char *const names[] = {"dlopen", "dlerror", "__errno_location"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        uint64_t v = 0;
        if (ij_elf_symbol(e, names[i], &v) != 0 || v == 0) {
            fprintf(stderr, "FAIL: %s: no %s\n", argv[1], names[i]);
            bad = 1;
        } else {
            printf("ok: %s at 0x%llx\n", names[i], (unsigned long long)v);
        }
    }
    uint64_t vaddr = 1;
    if (ij_elf_load_vaddr(e, 0, 4096, &vaddr) != 0) {
        fprintf(stderr, "FAIL: %s: no loadable segment at offset 0\n", argv[1]);
        bad = 1;
    } else {
        printf("ok: the segment at offset 0 is linked at 0x%llx\n", (unsigned long long)vaddr);
    }
    ij_elf_close(&e);
    return bad;
}
