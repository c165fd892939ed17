/* Writes fuzz seeds that reach what random bytes seldom build: big heaps
 * and a primary released by more sites than it keeps pending. */
#include <stdio.h>
#include <stdlib.h>

#include "lm_encoder.h"

/* The fuzz run's -max_len, less the byte that picks the path. */
#define MAX_STREAM 4095

/*
 * First bytes (see fuzz_decoder.c): all at once on the direct path, one
 * and two bytes at a time on the pipelines, two threads on each path (in
 * chunks of 64 to 66 bytes), and 188- and 191-byte chunks on the
 * heap-only pipeline.
 */
static const unsigned char paths[] = {0x00, 0x01, 0x02, 0x40,
                                      0x41, 0x42, 0xbc, 0xbf};

static int write_seed(const char *dir, const char *name, const struct lm_buf *b)
{
    if (b->oom || b->len > MAX_STREAM) {
        fprintf(stderr, "fuzz_seeds: %s: %zu bytes, more than %d\n", name,
                b->len, MAX_STREAM);
        return -1;
    }
    for (size_t i = 0; i < sizeof(paths); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s-%02x", dir, name, paths[i]);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fputc(paths[i], f) == EOF ||
            fwrite(b->data, 1, b->len, f) != b->len || fclose(f) != 0) {
            perror(path);
            return -1;
        }
    }
    return 0;
}

static void begin(struct lm_buf *b)
{
    lm_enc_begin(b, LM_REV_R3);
    lm_enc_sym_lfunc(b, 0x100, "@seed.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3);
}

static struct lm_loc_ref cfunc(uint64_t addr)
{
    return (struct lm_loc_ref){LM_SRC_CFUNC, {addr}, {0}};
}

/*
 * Hundreds of live blocks at three sites: shards grow, blocks overflow
 * their groups, and the frees (in reverse, by other sites) take blocks
 * that overflowed.
 */
static void big_heap(struct lm_buf *b)
{
    enum { BLOCKS = 540 };

    begin(b);
    for (uint64_t k = 1; k <= BLOCKS; k++) {
        struct lm_loc_ref l = cfunc(1 + k % 3);
        lm_enc_alloc(b, LM_REV_R3, &l, k * 16, 1 + k % 7);
    }
    for (uint64_t k = BLOCKS; k >= 3; k -= 3) {
        struct lm_loc_ref l = cfunc(4 + k % 5);
        lm_enc_free(b, LM_REV_R3, &l, k * 16, 1 + k % 7);
    }
    lm_enc_epilogue(b);
}

/*
 * One primary's blocks released in turns by nine sites, more than the
 * three it keeps pending, some of them near 4 GiB so that the 32-bit
 * pending counts overflow.
 */
static void many_releasers(struct lm_buf *b)
{
    struct lm_loc_ref prim = {LM_SRC_LFUNC, {0x100}, {1}};

    begin(b);
    for (uint64_t k = 0; k < 140; k++) {
        struct lm_loc_ref site = {LM_SRC_LFUNC, {0x100}, {10 + k % 9}};
        uint64_t size = k % 4 == 0 ? 0xFFFFFFF0u : 24;
        lm_enc_alloc(b, LM_REV_R3, &prim, 0x1000, size);
        if (k % 3 == 0) {
            lm_enc_realloc(b, LM_REV_R3, &site, 0x1000, size, 0x2000,
                           0xFFFFFFFFu);
            lm_enc_free(b, LM_REV_R3, &site, 0x2000, 0xFFFFFFFFu);
        } else {
            lm_enc_free(b, LM_REV_R3, &site, 0x1000, size);
        }
    }
    lm_enc_epilogue(b);
}

int main(int argc, char **argv)
{
    struct lm_buf heap = {0}, releasers = {0};
    int rc;

    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    big_heap(&heap);
    many_releasers(&releasers);
    rc = write_seed(argv[1], "big-heap", &heap) != 0 ||
         write_seed(argv[1], "many-releasers", &releasers) != 0;
    lm_buf_free(&heap);
    lm_buf_free(&releasers);
    return rc;
}
