/*
 * The dynamic symbols of an ELF file, read from the file itself: where a function such as dlopen
 * lies in a library that another process has mapped, without assuming that process maps it where
 * we do. Only 64-bit little-endian files (x86-64, aarch64). Every offset and count read from the
 * file is checked against its size: a damaged or hostile file gives an error, never a crash.
 */
#ifndef SYNCTOP_INJECT_ELF_H
#define SYNCTOP_INJECT_ELF_H

#include <stddef.h>
#include <stdint.h>

#include "synctop/error.h"

typedef struct ij_elf ij_elf;

/* Opens and checks a file; NULL with the reason in err. */
ij_elf *ij_elf_open(const char *path, err_msg *err);
/* The same over bytes in memory (copied), for tests and fuzzing. */
ij_elf *ij_elf_open_mem(const void *data, size_t len, err_msg *err);
void ij_elf_close(ij_elf **e);

/* e_machine (EM_X86_64, EM_AARCH64, ...) and e_type (ET_DYN, ET_EXEC). */
unsigned ij_elf_machine(const ij_elf *e);
unsigned ij_elf_type(const ij_elf *e);

/* The value (offset from the load bias) of the defined function or object NAME among the dynamic
 * symbols; of several versions, the default one. 0, or ERR_NOENT. */
int ij_elf_symbol(const ij_elf *e, const char *name, uint64_t *value);

/* The virtual address, rounded down to a page of page_size bytes, of the loadable segment whose
 * file offset rounds down to file_offset: with the start of the mapping of that file offset in a
 * process, it gives the load bias (start - vaddr). 0, or ERR_NOENT. */
int ij_elf_load_vaddr(const ij_elf *e, uint64_t file_offset, uint64_t page_size, uint64_t *vaddr);

/* The ELF header of a program: its class (1: 32-bit, 2: 64-bit) and machine, for telling what
 * architecture a process runs, and whether it names a dynamic loader (PT_INTERP; 64-bit
 * little-endian files only, else 0). 0, or a negative code with err. */
int ij_elf_ident(const char *path, unsigned *elf_class, unsigned *machine, int *dynamic, err_msg *err);

#endif
