/* The memprof stream format (every revision) as constants: see docs. */
#ifndef LM_FORMAT_H
#define LM_FORMAT_H

/*
 * stream   := symtab memprof
 * symtab   := 'l' 'j' 's' version reserved[3] sym* sym-final
 * memprof  := 'l' 'j' 'm' version reserved[3] event* epilogue
 *
 * Symbol header [F UUUUU TT]: TT is the type, F (0x80) ends the table.
 * Event header  [F UU SSS EE]: EE the event, SSS the source (R1: SS, two
 * bits), F (0x80) the epilogue.  The layouts of each revision are described
 * in lm_decoder.c next to the code that reads them.
 */

enum {
    LM_PROLOGUE_SIZE = 7, /* magic[3] version reserved[3] */
    LM_HDR_FINAL = 0x80,
    LM_SYM_TYPE_MASK = 0x03,
    LM_EV_EVENT_MASK = 0x03,
    LM_EV_SOURCE_SHIFT = 2,
    LM_EV_SOURCE_MASK = 0x07, /* after the shift; R1 uses 0x03 */
    LM_EV_R1_SOURCE_MASK = 0x03,
    LM_ULEB_MAX_BYTES = 10,
};

/* Symbol types by ljs version. */
enum {
    LM_SYM_LFUNC = 0,    /* every version */
    LM_SYM_V2_TRACE = 1, /* ljs 2: traceno trace-addr proto line */
    LM_SYM_V3_CFUNC = 1, /* ljs 3: addr name */
    LM_SYM_V3_TRACE = 2, /* ljs 3: traceno proto line */
};

/* Event kinds (EE bits). */
enum lm_event {
    LM_EV_SYMTAB = 0,
    LM_EV_ALLOC = 1,
    LM_EV_FREE = 2,
    LM_EV_REALLOC = 3,
};

/* Allocation sources (SSS bits). */
enum lm_source {
    LM_SRC_INTERNAL = 1,
    LM_SRC_LFUNC = 2,
    LM_SRC_CFUNC = 3,
    LM_SRC_TRACE = 4,
};

/*
 * The census (docs/format.md, "Census"): a VM that starts a stream while
 * its heap already holds objects announces them as allocations.  Its
 * records are ordinary R3 records at prototype addresses below
 * LM_CENSUS_ADDR_LIMIT, which no GC object can have: symbol events name
 * them (chunk name, first line), allocation events use them as Lua
 * locations at line 0.
 */
enum {
    LM_CENSUS_ADDR_LIMIT = 4096,
    /* first line: the VM's heap bytes (gc.total) when the census began */
    LM_CENSUS_BEGIN = 1,
    /* first line: the VM's heap bytes when the census completed */
    LM_CENSUS_COMPLETE = 2,
    /* the name of what no walk placed (the remainder a reader computes) */
    LM_CENSUS_INTERNALS = 3,
    /* names by type ("[before profiling] table") start here */
    LM_CENSUS_TYPE_FIRST = 16,
};

/*
 * The trace context (docs/format.md, "Trace context"): a symbol event
 * (lfunc-sym) at this reserved address with this chunk name is a marker,
 * not a prototype.  Its first line is the trace in effect for the Lua
 * located events that follow it (0: none), i.e. the trace whose compiled
 * code made them.  Earlier patched VMs wrote markers; they write
 * stand-ins now (below).
 */
enum { LM_TRACE_MARK_ADDR = 4 };
#define LM_TRACE_MARK_NAME "[trace]"

/*
 * Stand-ins (docs/format.md, "Trace context"): a symbol event (lfunc-sym) at
 * this reserved address with this chunk name says that the prototype
 * symbol right after it is a stand-in, an address of its own standing for a
 * prototype on one trace: its first line is that trace's number.  Lua
 * located events at the stand-in are that trace's compiled code's, at the
 * lines of the prototype whose chunk name and first line the stand-in has.
 */
enum { LM_STANDIN_ADDR = 5 };
#define LM_STANDIN_NAME "[stand-in]"

/* The stream revisions ljmp reads (docs/format.md). */
enum lm_revision {
    LM_REV_UNKNOWN = 0,
    LM_REV_R1,      /* ljs 1, ljm 1 */
    LM_REV_R2,      /* ljs 2, ljm 2 */
    LM_REV_R3_SEED, /* ljs 2, ljm 3 */
    LM_REV_R3,      /* ljs 3, ljm 3 */
    LM_REV_R3S,     /* ljs 3, ljm 0x53: R3 with call stacks */
};

/*
 * Call stacks (docs/format.md, "Stacks (R3S)"): R3S's events prologue has
 * version LM_LJM_STACKS and the extension's version in its first reserved
 * byte.  An alloc or realloc header with LM_EV_STACK set is followed, after
 * the event's body, by a stack id.  Stacks are defined by symbol events of
 * source LM_SRC_STACK (header 0x14), whose first byte is the kind.
 */
enum {
    LM_LJM_STACKS = 0x53,
    LM_STACKS_EXT_VERSION = 1,
    LM_EV_STACK = 0x20,
    LM_SRC_STACK = 5,
    LM_STACK_DEF = 0,    /* id:uleb nframes:uleb frame* */
    LM_STACK_CONFIG = 1, /* depth:uleb sample-bytes:uleb */
    LM_STACK_RESET = 2,  /* every id forgotten */
    LM_STACK_MAX_DEPTH = 64,
    /* frame = tag:uleb [addr:uleb], tag = value << 2 | kind */
    LM_FRAME_LUA = 0,    /* value: line; addr: prototype */
    LM_FRAME_C = 1,      /* value: 0; addr: function, a builtin's number */
    LM_FRAME_MARKER = 2, /* value: the marker; no addr */
    LM_FRAME_KIND_MASK = 3,
    LM_MARK_TRUNCATED = 1,
    LM_MARK_TAILCALL = 2,
    LM_MARK_COROUTINE = 3,
    /* a C frame below this is a builtin, named by the C symbol there */
    LM_BUILTIN_ADDR_LIMIT = 4096,
};

const char *lm_revision_name(enum lm_revision rev);

#endif
