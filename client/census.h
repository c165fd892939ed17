/* What ljmpctl says of a session's census (docs/format.md, "Census"). */
#ifndef LJMPCTL_CENSUS_H
#define LJMPCTL_CENSUS_H

#include <stdio.h>

#include "ljmp_wire.h"

/* One line's text (no newline) of where a census stands: "running, 45%
 * of 12.3 MiB at start", "complete, 12.3 MiB at start, 14.0 MiB at
 * completion, VM internals 40.0 KiB", "partial, ...". */
void census_put_state(FILE *out, const Ljmp__Census *c);

/* The end of a census as attach prints it: "census complete in 1.23 s:
 * 14.0 MiB in 12345 blocks, VM internals 40.0 KiB", with its newline. */
void census_put_done(FILE *out, const Ljmp__Census *c);

#endif
