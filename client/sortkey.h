/* The keys live views sort by: their names, titles, top's keys, wire values. */
#ifndef LJMPCTL_SORTKEY_H
#define LJMPCTL_SORTKEY_H

#include "ljmp_wire.h"

struct sort_key {
    const char *name, *title;
    int key;
    Ljmp__SortKey value;
};

#define SORTKEY_COUNT 8
extern const struct sort_key sortkey_table[SORTKEY_COUNT];

/* Index of the sort key called name, or -1 after a message on stderr. */
int sortkey_named(const char *cmd, const char *name);

#endif
