/* C symbols of a profiled process, read from the ELF files it has mapped:
 * the VM writes C function addresses only, ljmpd names them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csyms.h"
#include "log.h"
#include "lm_encoder.h"
#include "lm_symtab.h"

/*
 * Enough for a VM with its libraries; bounds on what one process costs,
 * since any local user may map a file made to cost much (its symbols all
 * naming one long string): symbols, bytes of names in all (each stored
 * twice: in the symbol table, and encoded for recordings), and one name,
 * cut beyond MAX_NAME_LEN (C++'s longest are shorter).
 */
#define MAX_SYMBOLS    500000
#define MAX_NAME_BYTES (16u << 20)
#define MAX_NAME_LEN   1024

/* What a mapped file adds to a symbol's value: its load bias, from the
 * executable mapping (start, file offset) and the segment holding it. */
static int load_bias(Elf *elf, uint64_t start, uint64_t offset, int64_t *bias)
{
    GElf_Ehdr eh;
    size_t n;

    if (gelf_getehdr(elf, &eh) == NULL)
        return -1;
    if (eh.e_type == ET_EXEC) {
        *bias = 0;
        return 0;
    }
    if (elf_getphdrnum(elf, &n) != 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) == NULL || ph.p_type != PT_LOAD)
            continue;
        if (offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz) {
            *bias =
                (int64_t)(start - offset) - (int64_t)(ph.p_vaddr - ph.p_offset);
            return 0;
        }
    }
    return -1;
}

/* The function symbols of one section (SHT_SYMTAB or SHT_DYNSYM). */
static unsigned add_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                            int64_t bias, struct csyms *out)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t count = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
    unsigned added = 0;

    for (size_t i = 0; data != NULL && i < count; i++) {
        GElf_Sym sym;
        if (gelf_getsym(data, (int)i, &sym) == NULL ||
            GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0 ||
            sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (name == NULL || *name == '\0' || out->n >= MAX_SYMBOLS)
            continue;
        size_t len = strnlen(name, MAX_NAME_LEN);
        if (out->name_bytes + len > MAX_NAME_BYTES)
            continue;
        uint64_t addr = (uint64_t)((int64_t)sym.st_value + bias);
        if (lm_symtab_add_cfunc(out->symtab, addr, name, len) != 0)
            continue;
        lm_buf_byte(&out->entries, LM_SYM_V3_CFUNC);
        lm_buf_uleb(&out->entries, addr);
        lm_buf_string(&out->entries, name, len);
        out->name_bytes += len;
        out->n++;
        added++;
    }
    return added;
}

/* The symbols of one mapped file: its full table if it has one, else the
 * dynamic one. */
static void add_file(pid_t pid, const char *path, uint64_t start,
                     uint64_t offset, struct csyms *out)
{
    char full[4200];
    int fd;

    /* Through the process's root: right in another mount namespace. */
    snprintf(full, sizeof(full), "/proc/%d/root%s", (int)pid, path);
    if ((fd = open(full, O_RDONLY | O_CLOEXEC)) < 0 &&
        (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int64_t bias;
    if (elf != NULL && load_bias(elf, start, offset, &bias) == 0) {
        Elf_Scn *scn = NULL, *dyn = NULL;
        GElf_Shdr sh, dynsh;
        unsigned added = 0;
        while ((scn = elf_nextscn(elf, scn)) != NULL) {
            if (gelf_getshdr(scn, &sh) == NULL)
                continue;
            if (sh.sh_type == SHT_SYMTAB)
                added += add_section(elf, scn, &sh, bias, out);
            else if (sh.sh_type == SHT_DYNSYM) {
                dyn = scn;
                dynsh = sh;
            }
        }
        if (added == 0 && dyn != NULL)
            add_section(elf, dyn, &dynsh, bias, out);
    }
    if (elf != NULL)
        elf_end(elf);
    close(fd);
}

void csyms_load(pid_t pid, struct lm_symtab *t, struct csyms *out)
{
    char path[64], line[4200];
    char seen[64][256];
    int nseen = 0;
    FILE *maps;

    memset(out, 0, sizeof(*out));
    out->symtab = t;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    if ((maps = fopen(path, "re")) == NULL)
        return;
    while (fgets(line, sizeof(line), maps) != NULL) {
        unsigned long long start, end, offset;
        char perms[8], file[4096];
        file[0] = '\0';
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &start, &end,
                   perms, &offset, file) < 4 ||
            perms[2] != 'x' || file[0] != '/')
            continue;
        int dup = 0;
        for (int i = 0; i < nseen && !dup; i++)
            dup = strncmp(seen[i], file, sizeof(seen[i])) == 0;
        if (dup || nseen == 64)
            continue;
        snprintf(seen[nseen++], sizeof(seen[0]), "%s", file);
        add_file(pid, file, start, offset, out);
    }
    fclose(maps);
    if (out->entries.oom)
        lm_buf_free(&out->entries);
}

void csyms_free(struct csyms *c)
{
    lm_buf_free(&c->entries);
    c->n = 0;
    c->name_bytes = 0;
}
