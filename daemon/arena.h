/* Memory for one message's parts, taken in blocks and freed at once. */
#ifndef LJMPD_ARENA_H
#define LJMPD_ARENA_H

#include <stddef.h>

/* Messages are built in an arena and freed at once after packing; a
 * zeroed struct arena is empty. */
struct arena {
    struct arena_block *head;
};

/* n bytes, zeroed and aligned for any type; NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t n);
/* A copy of the string s; NULL when out of memory. */
char *arena_strdup(struct arena *a, const char *s);
/* Frees everything taken from a; a is empty again. */
void arena_free(struct arena *a);

#endif
