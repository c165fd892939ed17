/* Writes a flame graph of known stacks to a file, for flame_test.sh: Lua
 * frames, builtins, markers, names of any bytes, and many stacks too
 * small to draw.  usage: flame_sample OUT.svg */
#include <stdio.h>

#include "flame.h"

/* Stacks, root first, and their live bytes. */
static const struct {
    const char *frames[6];
    uint64_t bytes;
} stacks[] = {
    {{"@main.lua:40", "@app.lua:12", "string.rep"}, 6 << 20},
    {{"@main.lua:40", "@app.lua:12", "@cache.lua:7"}, 12 << 20},
    {{"@main.lua:40", "@app.lua:30", "table.concat"}, 3 << 20},
    {{"@main.lua:41", "[coroutine]", "@worker.lua:5"}, 2 << 20},
    {{"@main.lua:41", "@deep.lua:1", "@deep.lua:2", "@deep.lua:3",
      "[truncated]"},
     1 << 20},
    {{"=<odd> & \"name\" 'q'", "bad \xff\xfe byte"}, 1 << 19},
    {{"CFUNC 0x55d0c0ffee"}, 1 << 18},
};

/* The number of frames of stack i. */
static size_t depth_of(size_t i)
{
    size_t n = 0;

    while (n < 6 && stacks[i].frames[n] != NULL)
        n++;
    return n;
}

/* Many stacks of a few bytes each: far under a pixel, never drawn. */
static int add_tiny(struct flame *f)
{
    char name[32];
    const char *frames[3] = {"@main.lua:42", name, "@leaf.lua:1"};
    struct flame_figures fig = {.live_bytes = 16,
                                .live_blocks = 1,
                                .alloc_bytes = 16,
                                .alloc_count = 1};

    for (int i = 0; i < 50000; i++) {
        snprintf(name, sizeof(name), "@tiny.lua:%d", i);
        if (flame_add(f, frames, 3, &fig) != 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct flame f;
    struct flame_opts o = {
        .title = "Live heap by call stack (sample)",
        .subtitle = "width: live bytes; pid 1234; stacks sampled every "
                    "512 KiB on average",
    };

    if (argc != 2 || flame_init(&f) != 0)
        return 2;
    f.estimated = 1;
    for (size_t i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
        struct flame_figures fig = {.live_bytes = stacks[i].bytes,
                                    .live_blocks = stacks[i].bytes >> 10,
                                    .alloc_bytes = stacks[i].bytes * 3,
                                    .alloc_count = stacks[i].bytes >> 8};
        if (flame_add(&f, stacks[i].frames, depth_of(i), &fig) != 0)
            return 2;
    }
    if (add_tiny(&f) != 0)
        return 2;
    FILE *out = fopen(argv[1], "w");
    if (out == NULL || flame_write_svg(out, &f, &o) != 0 || fclose(out) != 0) {
        perror(argv[1]);
        return 1;
    }
    flame_free(&f);
    return 0;
}
