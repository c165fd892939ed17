/* What ljmpctl says of a session's census: the list's line, attach's
 * progress and end. */
#include "census.h"

#include <inttypes.h>

#include "lm_report.h"

/* "12.3 MiB at start, 14.0 MiB at completion, VM internals 40.0 KiB". */
static void put_totals(FILE *out, const Ljmp__Census *c)
{
    lm_report_put_size(out, c->begin_total);
    fputs(" at start, ", out);
    lm_report_put_size(out, c->complete_total);
    fputs(" at completion, VM internals ", out);
    lm_report_put_size(out, c->remainder);
    if (c->over != 0) {
        fputs(" (the blocks known exceed the VM's heap by ", out);
        lm_report_put_size(out, c->over);
        fputs(")", out);
    }
}

void census_put_state(FILE *out, const Ljmp__Census *c)
{
    switch (c->state) {
    case LJMP__CENSUS_STATE__CENSUS_COMPLETE:
        fputs("complete, ", out);
        put_totals(out, c);
        return;
    case LJMP__CENSUS_STATE__CENSUS_RUNNING:
        fprintf(out, "running, %.0f%% of ", c->progress * 100);
        lm_report_put_size(out, c->begin_total);
        fputs(" at start", out);
        return;
    case LJMP__CENSUS_STATE__CENSUS_PARTIAL:
        fputs("partial (the stream ended first), ", out);
        lm_report_put_size(out, c->live_bytes);
        fputs(" known of ", out);
        lm_report_put_size(out, c->begin_total);
        fputs(" at start", out);
        return;
    default:
        fputs("none", out);
    }
}

void census_put_done(FILE *out, const Ljmp__Census *c)
{
    double s = c->complete_ms >= c->begin_ms
                   ? (double)(c->complete_ms - c->begin_ms) / 1000
                   : 0;

    fprintf(out, "census complete in %.2f s: ", s);
    lm_report_put_size(out, c->complete_total);
    fprintf(out, " in %" PRIu64 " blocks, VM internals ", c->complete_blocks);
    lm_report_put_size(out, c->remainder);
    if (c->duplicates != 0 || c->preceding_frees != 0)
        fprintf(out,
                " (%" PRIu64 " blocks announced twice, %" PRIu64
                " older blocks freed meanwhile)",
                c->duplicates, c->preceding_frees);
    fputc('\n', out);
}
