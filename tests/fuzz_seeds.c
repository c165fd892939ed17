/* Writes fuzz seeds that reach what random bytes seldom build: big heaps,
 * a primary released by more sites than it keeps pending, a census (its
 * markers, duplicates, older blocks' frees, remainder), trace markers,
 * stand-ins and call stacks (R3S); and, for the control protocol's target,
 * one frame of each request. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ljmp_wire.h"
#include "lm_encoder.h"

/* The fuzz run's -max_len, less the byte that picks the path. */
#define MAX_STREAM 4095

/*
 * First bytes (see fuzz_decoder.c): all at once on the direct path, one
 * and two bytes at a time on the pipelines, two threads on each path (in
 * chunks of 64 to 66 bytes), and 188- and 191-byte chunks on the
 * heap-only pipeline, and 193-byte ones on two threads; the last three
 * with a bound of 8 locations of a site and a stack.
 */
static const unsigned char paths[] = {0x00, 0x01, 0x02, 0x40, 0x41,
                                      0x42, 0xbc, 0xbf, 0xc1};

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
    return (struct lm_loc_ref){.source = LM_SRC_CFUNC, .addr = addr, .line = 0};
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
    struct lm_loc_ref prim = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 1};

    begin(b);
    for (uint64_t k = 0; k < 140; k++) {
        struct lm_loc_ref site = {
            .source = LM_SRC_LFUNC, .addr = 0x100, .line = 10 + k % 9};
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

/*
 * A census (docs/format.md, "Census"): blocks made before it announced
 * again, older blocks freed and reallocated, then the completion with
 * more bytes than known, so that the remainder is placed; after it, the
 * ordinary rules.
 */
static void census(struct lm_buf *b)
{
    struct lm_loc_ref own = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 2},
                      table = {.source = LM_SRC_LFUNC,
                               .addr = LM_CENSUS_TYPE_FIRST,
                               .line = 0};

    begin(b);
    for (uint64_t k = 1; k <= 20; k++)
        lm_enc_alloc(b, LM_REV_R3, &own, k * 16, 8);
    lm_enc_event_lfunc(b, LM_CENSUS_BEGIN, "[census begin]", 100000);
    lm_enc_event_lfunc(b, LM_CENSUS_INTERNALS,
                       "[before profiling] VM internals", 0);
    lm_enc_event_lfunc(b, LM_CENSUS_TYPE_FIRST, "[before profiling] table", 0);
    for (uint64_t k = 1; k <= 40; k++)
        lm_enc_alloc(b, LM_REV_R3, &table, k * 16, 8);
    lm_enc_free(b, LM_REV_R3, &own, 0x9000, 8);
    lm_enc_realloc(b, LM_REV_R3, &own, 0x9100, 8, 0x9200, 16);
    lm_enc_event_lfunc(b, LM_CENSUS_COMPLETE, "[census complete]", 120000);
    lm_enc_alloc(b, LM_REV_R3, &own, 0x9200, 4);
    lm_enc_free(b, LM_REV_R3, &own, 0x9300, 4);
    lm_enc_epilogue(b);
}

/*
 * Trace markers (docs/format.md, "Trace context"): a line allocated at by
 * two traces and the interpreter in turn, one trace announced anew, and
 * a collector's frees of their blocks.
 */
static void trace_markers(struct lm_buf *b)
{
    struct lm_loc_ref at = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 3},
                      gc = {.source = LM_SRC_INTERNAL};

    begin(b);
    lm_enc_event_trace(b, LM_REV_R3, 1, 0, 0x100, 2);
    lm_enc_event_trace(b, LM_REV_R3, 2, 0, 0x100, 3);
    for (uint64_t k = 1; k <= 30; k++) {
        lm_enc_trace_mark(b, k % 3);
        lm_enc_alloc(b, LM_REV_R3, &at, k * 16, 8);
        if (k == 15)
            lm_enc_event_trace(b, LM_REV_R3, 1, 0, 0x100, 4);
    }
    for (uint64_t k = 1; k <= 30; k += 2)
        lm_enc_free(b, LM_REV_R3, &gc, k * 16, 8);
    lm_enc_epilogue(b);
}

/*
 * Stand-ins (docs/format.md, "Trace context"), as the VM writes them: a
 * line allocated at by the interpreter and by two traces at stand-ins of
 * its prototype, one trace made anew with its stand-in at the same
 * address, a stand-in symbol whose prototype comes after events, and a
 * collector's frees of their blocks.
 */
static void standins(struct lm_buf *b)
{
    struct lm_loc_ref at = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 3},
                      gc = {.source = LM_SRC_INTERNAL};

    begin(b);
    lm_enc_event_trace(b, LM_REV_R3, 1, 0, 0x100, 2);
    lm_enc_standin(b, 1);
    lm_enc_event_lfunc(b, 0x7100, "@seed.lua", 1);
    lm_enc_event_trace(b, LM_REV_R3, 2, 0, 0x100, 3);
    lm_enc_standin(b, 2);
    for (uint64_t k = 1; k <= 30; k++) {
        at.addr = k % 3 == 0 ? 0x100 : 0x7000 + (k % 3) * 0x100;
        lm_enc_alloc(b, LM_REV_R3, &at, k * 16, 8);
        if (k == 2)
            lm_enc_event_lfunc(b, 0x7200, "@seed.lua", 1);
        if (k == 15) {
            lm_enc_event_trace(b, LM_REV_R3, 1, 0, 0x100, 4);
            lm_enc_standin(b, 1);
            lm_enc_event_lfunc(b, 0x7100, "@seed.lua", 1);
        }
    }
    for (uint64_t k = 1; k <= 30; k += 2)
        lm_enc_free(b, LM_REV_R3, &gc, k * 16, 8);
    lm_enc_epilogue(b);
}

/* A stack of frames of every kind, defined as id: the site, callers at
 * lines that id picks, a builtin, a C function and a marker. */
static void def_stack(struct lm_buf *b, uint64_t id)
{
    struct lm_stack_frame f[] = {
        {LM_FRAME_LUA, 0x100, 3},
        {LM_FRAME_LUA, 0x100, 10 + id % 4},
        {LM_FRAME_C, 17, 0},
        {LM_FRAME_C, 0x7000 + id, 0},
        {LM_FRAME_MARKER, 0, 1 + id % 3},
    };

    lm_enc_stack_def(b, id, f, 2 + id % 4);
}

/*
 * Call stacks (docs/format.md, "Stacks (R3S)"): a configuration with
 * sampling, stacks with every kind of frame, allocations and reallocations
 * that name them beside others that do not, a reset whose ids come back
 * for other stacks, a prototype announced anew under a stack, and frees
 * (which never name one) by another site.
 */
static void stacks(struct lm_buf *b)
{
    struct lm_loc_ref at = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 3},
                      c = {.source = LM_SRC_CFUNC, .addr = 0x7100},
                      gc = {.source = LM_SRC_INTERNAL};

    lm_enc_begin(b, LM_REV_R3S);
    lm_enc_sym_lfunc(b, 0x100, "@seed.lua", 0);
    lm_enc_sym_cfunc(b, 0x7000, "libseed.so:f");
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3S);
    lm_enc_stack_config(b, 4, 256);
    lm_enc_event_cfunc(b, 17, "string.rep");
    for (uint64_t k = 1; k <= 6; k++)
        def_stack(b, k);
    for (uint64_t k = 1; k <= 40; k++) {
        if (k == 20) {
            lm_enc_stack_reset(b);
            for (uint64_t id = 1; id <= 3; id++)
                def_stack(b, id + 3);
            lm_enc_event_lfunc(b, 0x100, "@seed.lua", 0);
        }
        const struct lm_loc_ref *l = k % 5 == 0 ? &c : &at;
        if (k % 3 == 0)
            lm_enc_alloc(b, LM_REV_R3S, l, k * 16, 8 * k);
        else
            lm_enc_alloc_stack(b, LM_REV_R3S, l, k * 16, 8 * k,
                               1 + k % (k < 20 ? 6 : 3));
        if (k % 4 == 0)
            lm_enc_realloc_stack(b, LM_REV_R3S, &at, k * 16, 8 * k, k * 16, k,
                                 1 + k % 3);
    }
    for (uint64_t k = 1; k <= 40; k += 2)
        lm_enc_free(b, LM_REV_R3S, &gc, k * 16, 8);
    lm_enc_epilogue(b);
}

/* More stacks than a small bound (the fuzz target's, 8, on some paths)
 * keeps: some stacks dropped, others' locations past it. */
static void many_stacks(struct lm_buf *b)
{
    struct lm_loc_ref at = {.source = LM_SRC_LFUNC, .addr = 0x100, .line = 3};

    lm_enc_begin(b, LM_REV_R3S);
    lm_enc_sym_lfunc(b, 0x100, "@seed.lua", 0);
    lm_enc_symtab_end(b);
    lm_enc_begin_events(b, LM_REV_R3S);
    lm_enc_stack_config(b, 2, 0);
    for (uint64_t k = 1; k <= 24; k++) {
        struct lm_stack_frame f[] = {{LM_FRAME_LUA, 0x100, 3},
                                     {LM_FRAME_LUA, 0x100, 100 + k}};
        lm_enc_stack_def(b, k, f, 2);
    }
    for (uint64_t k = 1; k <= 72; k++) {
        at.line = 3 + k % 3;
        lm_enc_alloc_stack(b, LM_REV_R3S, &at, k * 16, 8, 1 + k % 24);
    }
    lm_enc_epilogue(b);
}

/* One control request, framed as a client sends it, into dir/name. */
static int write_request(const char *dir, const char *name, Ljmp__Request *req)
{
    char path[4096];
    size_t len;
    uint8_t *frame;

    req->has_version = 1;
    req->version = LJMP_WIRE_VERSION;
    req->has_id = 1;
    req->id = 7;
    if ((frame = ljmp_wire_pack(&req->base, &len)) == NULL)
        return -1;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int rc = f == NULL || fwrite(frame, 1, len, f) != len;
    if (f != NULL && fclose(f) != 0)
        rc = 1;
    free(frame);
    if (rc != 0)
        perror(path);
    return rc ? -1 : 0;
}

/* Every request, with the fields that steer ljmpd's answer to it. */
static int control_seeds(const char *dir)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__ListRequest list = LJMP__LIST_REQUEST__INIT;
    Ljmp__SnapshotRequest snap = LJMP__SNAPSHOT_REQUEST__INIT;
    Ljmp__SubscribeRequest sub = LJMP__SUBSCRIBE_REQUEST__INIT;
    Ljmp__ReportRequest rep = LJMP__REPORT_REQUEST__INIT;
    Ljmp__RecordRequest rec = LJMP__RECORD_REQUEST__INIT;
    Ljmp__AttachRequest att = LJMP__ATTACH_REQUEST__INIT;
    Ljmp__DetachRequest det = LJMP__DETACH_REQUEST__INIT;
    Ljmp__LeaksRequest leaks = LJMP__LEAKS_REQUEST__INIT;
    Ljmp__HistoryRequest hist = LJMP__HISTORY_REQUEST__INIT;
    Ljmp__Selector one = LJMP__SELECTOR__INIT;
    Ljmp__SnapshotOptions o = LJMP__SNAPSHOT_OPTIONS__INIT;
    Ljmp__Selector tree = LJMP__SELECTOR__INIT;
    int rc = 0;

    list.has_all = list.all = 1;
    req.body_case = LJMP__REQUEST__BODY_LIST;
    req.list = &list;
    rc |= write_request(dir, "list", &req);
    tree.has_pid = tree.has_tree = tree.tree = 1;
    tree.pid = 1;
    o.sessions = &tree;
    o.has_merge = o.merge = o.has_by_process = o.by_process = 1;
    snap.options = &o;
    req.body_case = LJMP__REQUEST__BODY_SNAPSHOT;
    req.snapshot = &snap;
    rc |= write_request(dir, "snapshot-tree", &req);
    sub.options = &o;
    sub.has_interval_ms = 1;
    sub.interval_ms = 50;
    req.body_case = LJMP__REQUEST__BODY_SUBSCRIBE;
    req.subscribe = &sub;
    rc |= write_request(dir, "subscribe", &req);
    rep.session = &tree;
    rep.has_json = rep.json = 1;
    req.body_case = LJMP__REQUEST__BODY_REPORT;
    req.report = &rep;
    rc |= write_request(dir, "report-tree", &req);
    rec.has_pid = rec.has_wait_ms = 1;
    rec.pid = 1;
    rec.wait_ms = 10;
    req.body_case = LJMP__REQUEST__BODY_RECORD;
    req.record = &rec;
    rc |= write_request(dir, "record", &req);
    att.has_pid = att.has_timeout_ms = 1;
    att.pid = 1;
    att.timeout_ms = 10;
    req.body_case = LJMP__REQUEST__BODY_ATTACH;
    req.attach = &att;
    rc |= write_request(dir, "attach", &req);
    att.unit = "nginx";
    att.has_pid = 0;
    att.has_no_census = att.no_census = 1;
    rc |= write_request(dir, "attach-unit", &req);
    det.has_pid = det.has_tree = det.tree = 1;
    det.pid = 1;
    req.body_case = LJMP__REQUEST__BODY_DETACH;
    req.detach = &det;
    rc |= write_request(dir, "detach-tree", &req);
    one.has_pid = 1;
    one.pid = 1;
    leaks.session = &one;
    leaks.has_window_s = leaks.has_limit = 1;
    leaks.window_s = 60;
    leaks.limit = 5;
    req.body_case = LJMP__REQUEST__BODY_LEAKS;
    req.leaks = &leaks;
    rc |= write_request(dir, "leaks", &req);
    hist.session = &one;
    hist.has_window_s = hist.has_peak_sites = 1;
    hist.window_s = 30;
    hist.peak_sites = 3;
    req.body_case = LJMP__REQUEST__BODY_HISTORY;
    req.history = &hist;
    rc |= write_request(dir, "history", &req);
    return rc;
}

/* A mark, a mark's removal, and diffs between marks and the peak. */
static int marks_seeds(const char *dir)
{
    Ljmp__Request req = LJMP__REQUEST__INIT;
    Ljmp__MarkRequest mark = LJMP__MARK_REQUEST__INIT;
    Ljmp__DiffRequest diff = LJMP__DIFF_REQUEST__INIT;
    Ljmp__Selector one = LJMP__SELECTOR__INIT;
    int rc = 0;

    one.has_pid = 1;
    one.pid = 1;
    mark.session = &one;
    mark.name = "before";
    req.body_case = LJMP__REQUEST__BODY_MARK;
    req.mark = &mark;
    rc |= write_request(dir, "mark", &req);
    mark.has_remove = mark.remove = 1;
    rc |= write_request(dir, "mark-remove", &req);
    diff.session = &one;
    diff.from = "before";
    diff.has_sort = diff.has_limit = 1;
    diff.sort = LJMP__DIFF_KEY__DIFF_CHANGE;
    diff.limit = 5;
    req.body_case = LJMP__REQUEST__BODY_DIFF;
    req.diff = &diff;
    rc |= write_request(dir, "diff", &req);
    diff.from = "start";
    diff.to = "peak";
    rc |= write_request(dir, "diff-peak", &req);
    return rc;
}

int main(int argc, char **argv)
{
    struct lm_buf heap = {0}, releasers = {0}, taken = {0}, marked = {0},
                  standing = {0}, stacked = {0}, folded = {0};
    int rc;

    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: fuzz_seeds DIR [CONTROL_DIR]\n");
        return 2;
    }
    if (argc == 3 && (control_seeds(argv[2]) != 0 || marks_seeds(argv[2]) != 0))
        return 1;
    big_heap(&heap);
    many_releasers(&releasers);
    census(&taken);
    trace_markers(&marked);
    standins(&standing);
    stacks(&stacked);
    many_stacks(&folded);
    rc = write_seed(argv[1], "big-heap", &heap) != 0 ||
         write_seed(argv[1], "stacks", &stacked) != 0 ||
         write_seed(argv[1], "many-stacks", &folded) != 0 ||
         write_seed(argv[1], "many-releasers", &releasers) != 0 ||
         write_seed(argv[1], "census", &taken) != 0 ||
         write_seed(argv[1], "trace-markers", &marked) != 0 ||
         write_seed(argv[1], "stand-ins", &standing) != 0;
    lm_buf_free(&heap);
    lm_buf_free(&releasers);
    lm_buf_free(&taken);
    lm_buf_free(&marked);
    lm_buf_free(&standing);
    lm_buf_free(&stacked);
    lm_buf_free(&folded);
    return rc;
}
