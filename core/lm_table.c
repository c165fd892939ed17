/* Memory for tables: malloc'd while small, mapped pages grown in place. */
#define _GNU_SOURCE /* mremap */
#include "lm_table.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum {
    TABLE_MMAP_MIN = LM_TABLE_GROW_MAPPED,
    /* A grown table's address space is reserved for this many times its
     * size (its pages are resident only once touched). */
    TABLE_HEADROOM = 4,
};

void *lm_table_alloc(size_t size)
{
    if (size < TABLE_MMAP_MIN) {
        /* Aligned to a pair of cache lines (see struct lm_loc), as
         * mapped pages are. */
        size_t rounded = (size + 127) & ~(size_t)127;
        void *p = aligned_alloc(128, rounded);
        if (p != NULL)
            memset(p, 0, rounded);
        return p;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void lm_table_free(void *p, size_t size)
{
    if (p == NULL)
        return;
    if (size < TABLE_MMAP_MIN)
        free(p);
    else
        munmap(p, size);
}

static size_t page_round(size_t n)
{
    static size_t page;

    if (page == 0) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return (n + page - 1) & ~(page - 1);
}

/* Mapped pages for a table, not backed by huge pages: a huge page would
 * make the untouched room resident. */
static void *map_table(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

    if (p == MAP_FAILED)
        return NULL;
    (void)madvise(p, size, MADV_NOHUGEPAGE);
    return p;
}

/* A new mapping for a table of size bytes, with room ahead if it can:
 * the room in *room. */
static void *map_with_room(size_t size, size_t *room)
{
    void *p = map_table(*room = page_round(size) * TABLE_HEADROOM);

    if (p == NULL)
        p = map_table(*room = page_round(size));
    return p;
}

/* p, mapped, moved with its pages (no copy) to a mapping with room for
 * size bytes (a TLB shootdown, but once in several growths). */
static void *remap_with_room(void *p, size_t old, size_t size, size_t *room)
{
    void *q = mremap(p, old, *room = page_round(size) * TABLE_HEADROOM,
                     MREMAP_MAYMOVE);

    if (q == MAP_FAILED)
        q = mremap(p, old, *room = page_round(size), MREMAP_MAYMOVE);
    return q == MAP_FAILED ? NULL : q;
}

void *lm_table_grow(void *p, size_t *room, size_t used, size_t size)
{
    size_t want;
    void *q;

    if (size <= *room)
        return p;
    if (*room >= LM_TABLE_GROW_MAPPED) {
        q = remap_with_room(p, *room, size, &want);
    } else {
        /* malloc's rooms stay under LM_TABLE_GROW_MAPPED: their size
         * tells them from mappings (see lm_table_free). */
        want = (size + 63) & ~(size_t)63;
        if (want < LM_TABLE_GROW_MAPPED) {
            if ((q = aligned_alloc(64, want)) != NULL)
                memset(q, 0, want);
        } else {
            q = map_with_room(size, &want);
        }
        if (q != NULL && p != NULL) {
            memcpy(q, p, used);
            free(p);
        }
    }
    if (q == NULL)
        return NULL;
    *room = want;
    return q;
}

size_t lm_table_resident(size_t size, size_t room)
{
    return room < LM_TABLE_GROW_MAPPED ? room : page_round(size);
}
