/*
 * Dynamic symbols of an ELF file (inject_elf.h). The file is read into memory; every structure is
 * copied out of it through bounds-checked helpers, so nothing is trusted: not the header's offsets,
 * not the section or dynamic table's counts, not a name's terminating NUL. The symbol table is
 * found through the section headers, or, in a file that has none, through PT_DYNAMIC and the
 * hash table's symbol count, as the dynamic loader finds it.
 */
#include "inject_elf.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"

#define ELF_MAX_BYTES (1ull << 31) /* no shared library comes near this */

struct ij_elf {
    uint8_t *data;
    size_t len;
    Elf64_Ehdr eh;
    /* the dynamic symbol table, as file offsets */
    uint64_t sym_off, sym_count, sym_ent;
    uint64_t str_off, str_len;
    uint64_t ver_off; /* 0: no version table */
};

/* Copies n bytes at off into out, or fails when they are not all in the file. */
static int get(const ij_elf *e, uint64_t off, void *out, size_t n) {
    if (off > e->len || n > e->len - off)
        return -1;
    memcpy(out, e->data + off, n);
    return 0;
}

static int get_phdr(const ij_elf *e, unsigned i, Elf64_Phdr *ph) {
    return get(e, e->eh.e_phoff + (uint64_t)i * e->eh.e_phentsize, ph, sizeof *ph);
}

/* The file offset of a virtual address, through the loadable segments. */
static int vaddr_to_off(const ij_elf *e, uint64_t vaddr, uint64_t *off) {
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (get_phdr(e, i, &ph) != 0)
            return -1;
        if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
            *off = ph.p_offset + (vaddr - ph.p_vaddr);
            return 0;
        }
    }
    return -1;
}

/* The symbol table through the section headers: 1 found, 0 none, -1 malformed. */
static int find_dynsym_sections(ij_elf *e) {
    if (e->eh.e_shoff == 0 || e->eh.e_shnum == 0)
        return 0;
    if (e->eh.e_shentsize < sizeof(Elf64_Shdr))
        return -1;
    for (unsigned i = 0; i < e->eh.e_shnum; i++) {
        Elf64_Shdr sh;
        if (get(e, e->eh.e_shoff + (uint64_t)i * e->eh.e_shentsize, &sh, sizeof sh) != 0)
            return -1;
        if (sh.sh_type == SHT_GNU_versym)
            e->ver_off = sh.sh_offset;
        if (sh.sh_type != SHT_DYNSYM)
            continue;
        Elf64_Shdr str;
        if (sh.sh_link >= e->eh.e_shnum || sh.sh_entsize < sizeof(Elf64_Sym) ||
            get(e, e->eh.e_shoff + (uint64_t)sh.sh_link * e->eh.e_shentsize, &str, sizeof str) != 0)
            return -1;
        e->sym_off = sh.sh_offset;
        e->sym_ent = sh.sh_entsize;
        e->sym_count = sh.sh_size / sh.sh_entsize;
        e->str_off = str.sh_offset;
        e->str_len = str.sh_size;
    }
    return e->sym_ent != 0 ? 1 : 0;
}

/* The number of symbols a GNU hash table covers: one past the highest index in any chain. */
static int gnu_hash_count(const ij_elf *e, uint64_t off, uint64_t *count) {
    uint32_t h[4]; /* nbuckets, symoffset, bloom_size, bloom_shift */
    if (get(e, off, h, sizeof h) != 0)
        return -1;
    uint64_t buckets = off + 16 + (uint64_t)h[2] * 8;
    uint64_t chains = buckets + (uint64_t)h[0] * 4;
    uint32_t max = 0;
    for (uint32_t i = 0; i < h[0]; i++) {
        uint32_t b;
        if (get(e, buckets + (uint64_t)i * 4, &b, 4) != 0)
            return -1;
        if (b > max)
            max = b;
    }
    if (max == 0) {
        *count = h[1];
        return 0;
    }
    if (max < h[1])
        return -1;
    for (uint64_t i = max;; i++) {
        uint32_t c;
        if (i - h[1] > e->len / 4 || get(e, chains + (i - h[1]) * 4, &c, 4) != 0)
            return -1;
        if (c & 1) {
            *count = i + 1;
            return 0;
        }
    }
}

/* The symbol table through PT_DYNAMIC (a file without section headers): 1, 0 or -1. */
static int find_dynsym_dynamic(ij_elf *e) {
    uint64_t symtab = 0, strtab = 0, strsz = 0, syment = sizeof(Elf64_Sym), hash = 0, gnu_hash = 0,
             versym = 0;
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (get_phdr(e, i, &ph) != 0)
            return -1;
        if (ph.p_type != PT_DYNAMIC)
            continue;
        for (uint64_t k = 0; k < ph.p_filesz / sizeof(Elf64_Dyn); k++) {
            Elf64_Dyn d;
            if (get(e, ph.p_offset + k * sizeof d, &d, sizeof d) != 0)
                return -1;
            if (d.d_tag == DT_NULL)
                break;
            switch (d.d_tag) {
            case DT_SYMTAB: symtab = d.d_un.d_ptr; break;
            case DT_STRTAB: strtab = d.d_un.d_ptr; break;
            case DT_STRSZ: strsz = d.d_un.d_val; break;
            case DT_SYMENT: syment = d.d_un.d_val; break;
            case DT_HASH: hash = d.d_un.d_ptr; break;
            case DT_GNU_HASH: gnu_hash = d.d_un.d_ptr; break;
            case DT_VERSYM: versym = d.d_un.d_ptr; break;
            default: break;
            }
        }
    }
    if (symtab == 0 || strtab == 0)
        return 0;
    uint64_t count = 0, off;
    if (hash != 0) {
        uint32_t nb[2];
        if (vaddr_to_off(e, hash, &off) != 0 || get(e, off, nb, sizeof nb) != 0)
            return -1;
        count = nb[1];
    } else if (gnu_hash != 0) {
        if (vaddr_to_off(e, gnu_hash, &off) != 0 || gnu_hash_count(e, off, &count) != 0)
            return -1;
    } else {
        return 0;
    }
    if (syment < sizeof(Elf64_Sym) || vaddr_to_off(e, symtab, &e->sym_off) != 0 ||
        vaddr_to_off(e, strtab, &e->str_off) != 0)
        return -1;
    if (versym != 0 && vaddr_to_off(e, versym, &e->ver_off) != 0)
        e->ver_off = 0;
    e->sym_ent = syment;
    e->sym_count = count;
    e->str_len = strsz;
    return 1;
}

static ij_elf *parse(uint8_t *data, size_t len, err_msg *err) {
    ij_elf *e = calloc(1, sizeof *e);
    if (e == NULL) {
        free(data);
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    e->data = data;
    e->len = len;
    const char *why = NULL;
    if (get(e, 0, &e->eh, sizeof e->eh) != 0 || memcmp(e->eh.e_ident, ELFMAG, SELFMAG) != 0)
        why = "not an ELF file";
    else if (e->eh.e_ident[EI_CLASS] != ELFCLASS64 || e->eh.e_ident[EI_DATA] != ELFDATA2LSB)
        why = "not a 64-bit little-endian ELF file";
    else if (e->eh.e_phentsize < sizeof(Elf64_Phdr))
        why = "malformed program headers";
    if (why == NULL) {
        int found = find_dynsym_sections(e);
        if (found == 0)
            found = find_dynsym_dynamic(e);
        if (found < 0)
            why = "malformed dynamic symbol table";
        else if (found == 0)
            why = "no dynamic symbol table";
        else if (e->sym_count > len / sizeof(Elf64_Sym) || e->str_off > len || e->str_len > len - e->str_off)
            why = "dynamic symbol table out of the file";
    }
    if (why != NULL) {
        err_set(err, ERR_MALFORMED, "%s", why);
        ij_elf_close(&e);
        return NULL;
    }
    return e;
}

ij_elf *ij_elf_open_mem(const void *data, size_t len, err_msg *err) {
    uint8_t *copy = malloc(len ? len : 1);
    if (copy == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(copy, data, len);
    return parse(copy, len, err);
}

ij_elf *ij_elf_open(const char *path, err_msg *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_set(err, errno == ENOENT ? ERR_NOENT : errno == EACCES ? ERR_PERM : ERR_IO, "%s: %s", path,
                strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > ELF_MAX_BYTES) {
        close(fd);
        err_set(err, ERR_IO, "%s: not a readable regular file", path);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *data = malloc(len ? len : 1);
    ssize_t got = data != NULL ? cm_read_full(fd, data, len, -1) : -1;
    close(fd);
    if (data == NULL || got != (ssize_t)len) {
        free(data);
        err_set(err, ERR_IO, "%s: cannot read it", path);
        return NULL;
    }
    ij_elf *e = parse(data, len, err);
    if (e == NULL) {
        char why[sizeof err->msg];
        snprintf(why, sizeof why, "%s", err->msg);
        err_set(err, ERR_MALFORMED, "%s: %s", path, why);
    }
    return e;
}

void ij_elf_close(ij_elf **e) {
    if (e == NULL || *e == NULL)
        return;
    free((*e)->data);
    free(*e);
    *e = NULL;
}

unsigned ij_elf_machine(const ij_elf *e) { return e->eh.e_machine; }
unsigned ij_elf_type(const ij_elf *e) { return e->eh.e_type; }

int ij_elf_symbol(const ij_elf *e, const char *name, uint64_t *value) {
    size_t name_len = strlen(name);
    int found = 0;
    for (uint64_t i = 1; i < e->sym_count; i++) {
        Elf64_Sym s;
        if (get(e, e->sym_off + i * e->sym_ent, &s, sizeof s) != 0)
            break;
        unsigned type = ELF64_ST_TYPE(s.st_info), bind = ELF64_ST_BIND(s.st_info);
        if (s.st_shndx == SHN_UNDEF || (type != STT_FUNC && type != STT_OBJECT) ||
            (bind != STB_GLOBAL && bind != STB_WEAK))
            continue;
        if (s.st_name >= e->str_len || e->str_len - s.st_name <= name_len ||
            memcmp(e->data + e->str_off + s.st_name, name, name_len + 1) != 0)
            continue;
        uint16_t ver = 0;
        if (e->ver_off != 0 && get(e, e->ver_off + i * 2, &ver, 2) != 0)
            ver = 0;
        *value = s.st_value;
        found = 1;
        if (!(ver & 0x8000)) /* not hidden: the default version */
            return 0;
    }
    return found ? 0 : ERR_NOENT;
}

int ij_elf_load_vaddr(const ij_elf *e, uint64_t file_offset, uint64_t page_size, uint64_t *vaddr) {
    uint64_t mask = ~(page_size - 1);
    for (unsigned i = 0; i < e->eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (get_phdr(e, i, &ph) != 0)
            return ERR_MALFORMED;
        if (ph.p_type == PT_LOAD && (ph.p_offset & mask) == file_offset) {
            *vaddr = ph.p_vaddr & mask;
            return 0;
        }
    }
    return ERR_NOENT;
}

int ij_elf_ident(const char *path, unsigned *elf_class, unsigned *machine, int *dynamic, err_msg *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno == EACCES || errno == EPERM ? ERR_PERM : ERR_IO, "%s: %s", path, strerror(errno));
    unsigned char h[sizeof(Elf64_Ehdr)];
    ssize_t n = cm_read_full(fd, h, sizeof h, 0);
    if (n < 20 || memcmp(h, ELFMAG, SELFMAG) != 0) {
        close(fd);
        return err_set(err, ERR_MALFORMED, "%s: not an ELF file", path);
    }
    *elf_class = h[EI_CLASS];
    *machine = h[EI_DATA] == ELFDATA2LSB ? (unsigned)(h[18] | h[19] << 8) : (unsigned)(h[18] << 8 | h[19]);
    *dynamic = 0;
    if (n == (ssize_t)sizeof h && h[EI_CLASS] == ELFCLASS64 && h[EI_DATA] == ELFDATA2LSB) {
        Elf64_Ehdr eh;
        memcpy(&eh, h, sizeof eh);
        for (unsigned i = 0; i < eh.e_phnum && i < 256 && eh.e_phentsize >= sizeof(Elf64_Phdr); i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph)
                break;
            if (ph.p_type == PT_INTERP)
                *dynamic = 1;
        }
    }
    close(fd);
    return 0;
}
