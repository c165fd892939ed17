/* Text for ljmpctl's SVG documents: any bytes made into well-formed XML
 * character data, cut to a number of characters; sizes in binary units. */
#include "svgtext.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* -- Text ---------------------------------------------------------------- */

#define REPLACEMENT 0xFFFDu

/* Whether byte c continues a UTF-8 sequence, within [lo, hi] for the
 * first continuation of some leads. */
static int cont(unsigned char c, unsigned char lo, unsigned char hi)
{
    return c >= lo && c <= hi;
}

/* The character at s: its bytes (at least 1) and, in *cp, its code point,
 * or U+FFFD for a byte that begins no well-formed UTF-8 sequence. */
static size_t decode(const unsigned char *s, uint32_t *cp)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        *cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        *cp = c & 0x0F;
        lo = c == 0xE0 ? 0xA0 : 0x80; /* no overlong forms */
        hi = c == 0xED ? 0x9F : 0xBF; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        *cp = c & 0x07;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF; /* up to U+10FFFF */
    } else {
        *cp = REPLACEMENT;
        return 1;
    }
    for (size_t i = 1; i < n; i++) {
        if (!(i == 1 ? cont(s[i], lo, hi) : cont(s[i], 0x80, 0xBF))) {
            *cp = REPLACEMENT;
            return 1;
        }
        *cp = *cp << 6 | (s[i] & 0x3F);
    }
    return n;
}

/* The character XML 1.0 shows for code point cp. */
static uint32_t xml_char(uint32_t cp)
{
    if (cp == '\t' || cp == '\n' || cp == '\r')
        return ' ';
    if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF)
        return REPLACEMENT;
    return cp;
}

static void put_char(FILE *out, uint32_t cp)
{
    switch (cp) {
    case '&':
        fputs("&amp;", out);
        return;
    case '<':
        fputs("&lt;", out);
        return;
    case '>':
        fputs("&gt;", out);
        return;
    case '"':
        fputs("&quot;", out);
        return;
    case '\'':
        fputs("&apos;", out);
        return;
    }
    if (cp < 0x80) {
        putc((int)cp, out);
    } else if (cp < 0x800) {
        putc((int)(0xC0 | cp >> 6), out);
        putc((int)(0x80 | (cp & 0x3F)), out);
    } else if (cp < 0x10000) {
        putc((int)(0xE0 | cp >> 12), out);
        putc((int)(0x80 | (cp >> 6 & 0x3F)), out);
        putc((int)(0x80 | (cp & 0x3F)), out);
    } else {
        putc((int)(0xF0 | cp >> 18), out);
        putc((int)(0x80 | (cp >> 12 & 0x3F)), out);
        putc((int)(0x80 | (cp >> 6 & 0x3F)), out);
        putc((int)(0x80 | (cp & 0x3F)), out);
    }
}

#define ELLIPSIS 0x2026u

void svg_put_text(FILE *out, const char *s, size_t max, enum svg_keep keep)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t chars = 0, skip = 0, shown;
    uint32_t cp;

    if (max == 0)
        return;
    for (size_t i = 0; p[i] != '\0'; i += decode(p + i, &cp))
        chars++;
    shown = chars;
    if (chars > max) {
        shown = max - 1; /* and the ellipsis */
        if (keep == SVG_KEEP_TAIL) {
            skip = chars - shown;
            put_char(out, ELLIPSIS);
        }
    }
    for (size_t i = 0; p[i] != '\0' && shown > 0;) {
        i += decode(p + i, &cp);
        if (skip > 0) {
            skip--;
            continue;
        }
        put_char(out, xml_char(cp));
        shown--;
    }
    if (chars > max && keep == SVG_KEEP_HEAD)
        put_char(out, ELLIPSIS);
}

/* -- Sizes --------------------------------------------------------------- */

void svg_format_size(char *out, size_t len, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;

    while (bytes >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        bytes /= 1024;
        u++;
    }
    snprintf(out, len, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
}

/* -- Files --------------------------------------------------------------- */

int svg_write_file(const char *cmd, const char *path,
                   int (*write)(FILE *out, const void *ctx), const void *ctx)
{
    int to_stdout = path == NULL || strcmp(path, "-") == 0;
    int fd =
        to_stdout
            ? -1
            : open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                   0644);
    FILE *out = to_stdout ? stdout : fd >= 0 ? fdopen(fd, "w") : NULL;

    if (out == NULL) {
        fprintf(stderr, "ljmpctl %s: cannot write %s: %s\n", cmd, path,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    int failed = write(out, ctx) != 0;
    failed |= to_stdout ? fflush(out) != 0 : fclose(out) != 0;
    if (!failed)
        return 0;
    fprintf(stderr, "ljmpctl %s: writing %s: %s\n", cmd,
            to_stdout ? "standard output" : path, strerror(errno));
    if (!to_stdout)
        unlink(path);
    return -1;
}
