/* Memory for tables: zeroed, aligned, mapped pages grown in place. */
#ifndef LM_TABLE_H
#define LM_TABLE_H

#include <stddef.h>

/*
 * Zeroed memory for a table, aligned to 128 bytes (a pair of cache
 * lines).  Large tables are mapped directly so that freeing one returns
 * its pages to the system at once:
 * the heap map's memory bound is measured as resident size, and malloc's
 * dynamic mmap threshold would otherwise keep retired tables resident.
 */
void *lm_table_alloc(size_t size);
void lm_table_free(void *p, size_t size);

/*
 * Grows a table (NULL at first, *room 0) to size bytes or more, keeping
 * its first `used`: the same table, or its pages moved, or a copy, or
 * NULL when out of memory (p unchanged).  *room is what it can hold;
 * lm_table_free(p, *room) frees it.  Small tables come from malloc; from
 * LM_TABLE_GROW_MAPPED bytes a table is mapped pages with
 * address space reserved ahead (resident once touched; under strict
 * overcommit, committed), and moved with its pages when that runs out:
 * growing costs no copy, no page faults for what it held and no
 * unmapping (a TLB shootdown, an interrupt between the CPUs on a
 * virtual machine) but once in several growths.  Bytes never written
 * read zero.
 */
void *lm_table_grow(void *p, size_t *room, size_t used, size_t size);

/* Grown tables under this size come from malloc: mapped, every shard of
 * a small heap map would take a whole page, which adds up over the many
 * small sessions that ljmpd keeps. */
#define LM_TABLE_GROW_MAPPED 4096

/* The resident bytes of a grown table whose first `size` are written. */
size_t lm_table_resident(size_t size, size_t room);

#endif
