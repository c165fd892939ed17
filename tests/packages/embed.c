/* A host program built with a patched VM's .pc file: profiles its Lua. */
#include <stdio.h>
#include <string.h>

#include "lauxlib.h"
#include "lmemprof.h"
#include "lua.h"
#include "lualib.h"

struct sink {
    unsigned char head[16];
    size_t len;
    int ended;
    int err;
};

static int sink_write(void *ctx, const void *buf, size_t len)
{
    struct sink *s = ctx;
    if (s->len < sizeof(s->head)) {
        size_t n = sizeof(s->head) - s->len;
        memcpy(s->head + s->len, buf, n < len ? n : len);
    }
    s->len += len;
    return 0;
}

static void sink_done(void *ctx, int err)
{
    struct sink *s = ctx;
    s->ended++;
    s->err = err;
}

/* The file the VM's library was loaded from, as the dynamic linker chose. */
static int print_library(void)
{
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return -1;
    while (fgets(line, sizeof(line), maps)) {
        char *path = strchr(line, '/');
        if (path && strstr(path, "libluajit")) {
            printf("library %s", path);
            fclose(maps);
            return 0;
        }
    }
    fclose(maps);
    return -1;
}

int main(void)
{
    struct sink s = {{0}, 0, 0, 0};
    lua_State *L = luaL_newstate();
    if (!L || print_library() != 0) {
        fprintf(stderr, "embed: no VM, or not from a shared library\n");
        return 1;
    }
    luaL_openlibs(L);
    if (ljmp_memprof_start(L, sink_write, sink_done, &s) != LJMP_MEMPROF_OK) {
        fprintf(stderr, "embed: ljmp_memprof_start failed\n");
        return 1;
    }
    if (luaL_dostring(L, "local t = {} for i = 1, 1000 do t[i] = {i} end")) {
        fprintf(stderr, "embed: %s\n", lua_tostring(L, -1));
        return 1;
    }
    if (ljmp_memprof_stop(L) != LJMP_MEMPROF_OK || s.ended != 1 || s.err) {
        fprintf(stderr, "embed: the profile did not end cleanly\n");
        return 1;
    }
    /* A memprof stream starts with its symbol table's prologue. */
    if (s.len < 3 || memcmp(s.head, "ljs", 3) != 0) {
        fprintf(stderr, "embed: %zu bytes, not a memprof stream\n", s.len);
        return 1;
    }
    printf("stream %zu bytes\n", s.len);
    lua_close(L);
    return 0;
}
