/* C symbols of a profiled process, from the ELF files it has mapped. */
#ifndef LJMPD_CSYMS_H
#define LJMPD_CSYMS_H

#include <sys/types.h>

#include "lm_encoder.h"

struct lm_symtab;

/* Budgets for C symbols, in bytes of memory (roughly): one process's,
 * and all the sessions of one user but root or ljmpd's own (session.c). */
#define CSYMS_PROCESS_BUDGET ((size_t)32 << 20)
#define CSYMS_UID_BUDGET     ((size_t)128 << 20)

struct csyms {
    struct lm_symtab *symtab;
    struct lm_buf entries; /* the same symbols as R3 symtab entries */
    unsigned n;
    size_t cost, budget;   /* the symbols' memory, roughly, and its bound */
    int over_budget;       /* symbols were left out for the budget */
    unsigned entries_read; /* symbol entries looked at, against a bound */
    /* Files left unread on FUSE mounts of users (see csyms.c): how many,
     * the first, and its mount's owner. */
    unsigned fuse_skipped;
    char fuse_file[256];
    long fuse_owner;
};

/*
 * Adds the function symbols of the executable files pid has mapped (its
 * binary, libluajit, libc, ...) to t as C symbols, and encodes them as
 * R3 symbol table entries in out->entries, for recordings.  What cannot be
 * read (a process gone, another user's, a stripped file, anything but a
 * regular file, a file on a FUSE mount that a user other than root made)
 * is skipped, and so is what is over csyms.c's bounds (a name is cut at
 * 1 KiB) or over budget (bytes of memory, roughly).
 */
void csyms_load(pid_t pid, struct lm_symtab *t, size_t budget,
                struct csyms *out);
void csyms_free(struct csyms *c);

#endif
