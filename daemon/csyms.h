/* C symbols of a profiled process, from the ELF files it has mapped. */
#ifndef LJMPD_CSYMS_H
#define LJMPD_CSYMS_H

#include <sys/types.h>

#include "lm_encoder.h"

struct lm_symtab;

struct csyms {
    struct lm_symtab *symtab;
    struct lm_buf entries; /* the same symbols as R3 symtab entries */
    unsigned n;
    size_t name_bytes; /* of the names taken, against a bound */
};

/*
 * Adds the function symbols of the executable files pid has mapped (its
 * binary, libluajit, libc, ...) to t as C symbols, and encodes them as
 * R3 symbol table entries in out->entries, for recordings.  What cannot be
 * read (a process gone, another user's, a stripped file) is skipped, and
 * so is what is over csyms.c's bounds (a name is cut at 1 KiB).
 */
void csyms_load(pid_t pid, struct lm_symtab *t, struct csyms *out);
void csyms_free(struct csyms *c);

#endif
