/* The keys live views sort by: their names, titles, top's keys, wire values. */
#include <stdio.h>
#include <string.h>

#include "sortkey.h"

const struct sort_key sortkey_table[SORTKEY_COUNT] = {
    {"live-bytes", "live bytes", 'l', LJMP__SORT_KEY__SORT_LIVE_BYTES},
    {"live-blocks", "live blocks", 'b', LJMP__SORT_KEY__SORT_LIVE_BLOCKS},
    {"alloc-bytes", "allocated bytes", 'a', LJMP__SORT_KEY__SORT_ALLOC_BYTES},
    {"alloc-rate", "alloc rate", 'r', LJMP__SORT_KEY__SORT_ALLOC_RATE},
    {"event-rate", "event rate", 'e', LJMP__SORT_KEY__SORT_EVENT_RATE},
    {"free-bytes", "freed bytes", 'f', LJMP__SORT_KEY__SORT_FREE_BYTES},
    {"growth", "growth", 'g', LJMP__SORT_KEY__SORT_GROWTH},
    {"free-events", "free events here", 'F', LJMP__SORT_KEY__SORT_FREE_EVENTS},
};

int sortkey_named(const char *cmd, const char *name)
{
    for (int i = 0; i < SORTKEY_COUNT; i++)
        if (strcmp(sortkey_table[i].name, name) == 0)
            return i;
    fprintf(stderr,
            "ljmpctl %s: unknown sort key '%s' (live-bytes, live-blocks, "
            "alloc-bytes, alloc-rate, event-rate, free-bytes, growth, "
            "free-events)\n",
            cmd, name);
    return -1;
}
