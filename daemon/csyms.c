/* C symbols of a profiled process, read from the ELF files it has mapped:
 * the VM writes C function addresses only, ljmpd names them. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csyms.h"
#include "log.h"
#include "mounts.h"
#include "lm_encoder.h"
#include "lm_symtab.h"

/*
 * Bounds on what one process costs, since any local user may map files
 * made to cost much: one name is cut beyond MAX_NAME_LEN (C++'s longest
 * are shorter), and symbol entries looked at, kept or not, bound the work,
 * which the loop does while every peer waits (sections may all claim one
 * huge table, so the bound is per process).  What the symbols kept cost
 * in memory is bounded by the caller's budget (see csyms_cost).
 */
#define MAX_NAME_LEN     1024
#define MAX_ENTRIES_READ 2000000u

/* A symbol's memory, roughly: its name twice (in the symbol table, and
 * encoded for recordings) and the two entries around them. */
static size_t csyms_cost(size_t name_len)
{
    return 2 * name_len + 64;
}

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

/* Entries of a symbol section that may be read: what its data holds, in
 * entries of the file's own size, within what is left of the budget. */
static size_t entries_to_read(Elf *elf, const Elf_Data *data,
                              const GElf_Shdr *sh, const struct csyms *out)
{
    size_t entsize = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
    size_t left = MAX_ENTRIES_READ - out->entries_read;

    if (data == NULL || entsize == 0 || sh->sh_entsize != entsize)
        return 0;
    return data->d_size / entsize < left ? data->d_size / entsize : left;
}

/* The function symbols of one section (SHT_SYMTAB or SHT_DYNSYM). */
static unsigned add_section(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                            int64_t bias, struct csyms *out)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    size_t count = entries_to_read(elf, data, sh, out);
    unsigned added = 0;

    out->entries_read += (unsigned)count;
    for (size_t i = 0; i < count; i++) {
        GElf_Sym sym;
        if (gelf_getsym(data, (int)i, &sym) == NULL)
            break;
        if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_value == 0 ||
            sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (name == NULL || *name == '\0')
            continue;
        size_t len = strnlen(name, MAX_NAME_LEN);
        if (out->cost + csyms_cost(len) > out->budget) {
            out->over_budget = 1;
            break;
        }
        uint64_t addr = (uint64_t)((int64_t)sym.st_value + bias);
        if (lm_symtab_add_cfunc(out->symtab, addr, name, len) != 0)
            continue;
        lm_buf_byte(&out->entries, LM_SYM_V3_CFUNC);
        lm_buf_uleb(&out->entries, addr);
        lm_buf_string(&out->entries, name, len);
        out->cost += csyms_cost(len);
        out->n++;
        added++;
    }
    return added;
}

/*
 * A mapped file opened for reading, or -1: a regular file only.  The path
 * is the process's to choose (a file it mapped, deleted and replaced), and
 * the loop opens it: a FIFO would block the open until a writer came, and
 * a device may do anything.  O_NONBLOCK keeps the open itself from
 * waiting; reads of a regular file ignore it.
 */
static int open_mapped(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
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
    if ((fd = open_mapped(full)) < 0 && (fd = open_mapped(path)) < 0)
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

/* The device a mapped file is on, and the owner of its FUSE mount if a
 * user other than root made it (-1 if not). */
struct file_dev {
    unsigned major, minor;
    long user_fuse;
};

/*
 * Whether a file on device d of pid's mounts may be read.  Not on a FUSE
 * mount that a user other than root made: its daemon is theirs, and may
 * never answer, even the open; a request it has taken holds the reading
 * thread, and with it ljmpd's exit, until it answers or the mount goes.
 * Devices with a major number are block devices, never FUSE's.  *last is
 * the device asked before, kept: a process's other files nearly all share
 * one (a container's overlay), whose mountinfo is then read once.
 */
static int mount_readable(pid_t pid, struct file_dev d, struct file_dev *last,
                          const char *file, struct csyms *out)
{
    char path[64];
    struct mount_desc m;

    if (d.major != 0)
        return 1;
    if (d.major != last->major || d.minor != last->minor) {
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        d.user_fuse =
            mounts_by_dev(path, d.major, d.minor, &m) && m.fuse && m.owner != 0
                ? m.owner
                : -1;
        *last = d;
    }
    if (last->user_fuse < 0)
        return 1;
    if (out->fuse_skipped++ == 0) {
        snprintf(out->fuse_file, sizeof(out->fuse_file), "%s", file);
        out->fuse_owner = last->user_fuse;
    }
    return 0;
}

void csyms_load(pid_t pid, struct lm_symtab *t, size_t budget,
                struct csyms *out)
{
    char path[64], line[4200];
    char seen[64][256];
    int nseen = 0;
    /* No device has major 0 and this minor (anonymous devices take
     * minors from 1 up to 2^20). */
    struct file_dev last = {0, UINT32_MAX, -1};
    FILE *maps;

    memset(out, 0, sizeof(*out));
    out->symtab = t;
    out->budget = budget;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    if ((maps = fopen(path, "re")) == NULL)
        return;
    while (fgets(line, sizeof(line), maps) != NULL) {
        unsigned long long start, end, offset;
        struct file_dev dev;
        char perms[8], file[4096];
        file[0] = '\0';
        if (sscanf(line, "%llx-%llx %7s %llx %x:%x %*s %4095[^\n]", &start,
                   &end, perms, &offset, &dev.major, &dev.minor, file) < 6 ||
            perms[2] != 'x' || file[0] != '/')
            continue;
        int dup = 0;
        for (int i = 0; i < nseen && !dup; i++)
            dup = strncmp(seen[i], file, sizeof(seen[i])) == 0;
        if (dup || nseen == 64)
            continue;
        snprintf(seen[nseen++], sizeof(seen[0]), "%.255s", file);
        if (mount_readable(pid, dev, &last, file, out))
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
    c->cost = 0;
}
