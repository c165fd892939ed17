/* What ljmpctl's SVG writers share: names as XML text, sizes for people. */
#ifndef LJMPCTL_SVGTEXT_H
#define LJMPCTL_SVGTEXT_H

#include <stddef.h>
#include <stdio.h>

/* Which part of a text too long for its place is kept. */
enum svg_keep {
    SVG_KEEP_HEAD, /* a title: its start says the most */
    SVG_KEEP_TAIL, /* a site's name: its file and line at the end do */
};

/*
 * s as XML character data: & < > " ' escaped; bytes that are not UTF-8,
 * and characters XML does not allow, as U+FFFD; tabs and line breaks as
 * spaces.  At most max characters: a longer s loses the part keep does
 * not keep to "…".
 */
void svg_put_text(FILE *out, const char *s, size_t max, enum svg_keep keep);

/* A size for people, in units of 1024 as the rest of ljmpctl writes
 * them: "512 B", "12.3 MiB". */
void svg_format_size(char *out, size_t len, double bytes);

/* Writes a document by write(out, ctx) to path (created or truncated,
 * not through a symbolic link), or to standard output for NULL or "-"; a
 * file not written whole is removed.  0, or -1 after a message naming
 * cmd ("ljmpctl CMD: ..."). */
int svg_write_file(const char *cmd, const char *path,
                   int (*write)(FILE *out, const void *ctx), const void *ctx);

#endif
