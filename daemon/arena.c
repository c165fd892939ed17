/* Memory for one message's parts, taken in blocks and freed at once. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"

#define ARENA_BLOCK 65536

struct arena_block {
    struct arena_block *next;
    size_t used, size;
    max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
    struct arena_block *b = a->head;

    n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
    if (b == NULL || b->size - b->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        if ((b = malloc(sizeof(*b) + size)) == NULL)
            return NULL;
        b->used = 0;
        b->size = size;
        b->next = a->head;
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void arena_free(struct arena *a)
{
    while (a->head != NULL) {
        struct arena_block *b = a->head;
        a->head = b->next;
        free(b);
    }
}

char *arena_strdup(struct arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = arena_alloc(a, n);

    if (d != NULL)
        memcpy(d, s, n);
    return d;
}
