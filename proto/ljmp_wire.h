/* The control wire's constants and framing (ljmp.proto says the rest). */
#ifndef LJMP_WIRE_H
#define LJMP_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ljmp.pb-c.h"

/* Bumped on an incompatible change; new fields do not need it. */
#define LJMP_WIRE_VERSION 1

/* Largest frame payload either side accepts (a report of a large session
 * is the biggest message). */
#define LJMP_WIRE_MAX_FRAME (32u << 20)
#define LJMP_WIRE_HEADER    4
/* Requests are small: the daemon refuses larger request frames. */
#define LJMP_WIRE_MAX_REQUEST (64u << 10)

/* Default socket names, under /run/ljmp/ for root and $XDG_RUNTIME_DIR/ljmp/
 * otherwise; ljmp_wire_default_path() builds the full path. */
#define LJMP_INGEST_SOCKET  "ingest.sock"
#define LJMP_CONTROL_SOCKET "control.sock"

/* Writes the default path of socket name into out; -1 if it does not fit. */
int ljmp_wire_default_path(char *out, size_t len, const char *name);

static inline uint32_t ljmp_wire_get_len(const uint8_t *hdr)
{
    return (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
           (uint32_t)hdr[3] << 24;
}

static inline void ljmp_wire_put_len(uint8_t *hdr, uint32_t len)
{
    hdr[0] = (uint8_t)len;
    hdr[1] = (uint8_t)(len >> 8);
    hdr[2] = (uint8_t)(len >> 16);
    hdr[3] = (uint8_t)(len >> 24);
}

/* The frame of msg (header + payload) in a malloc'd buffer, or NULL when
 * out of memory or larger than LJMP_WIRE_MAX_FRAME. */
uint8_t *ljmp_wire_pack(const ProtobufCMessage *msg, size_t *frame_len);

/* Alloc, realloc and free events of a snapshot's totals (or of its
 * delta): what a VM's trailer counts. */
uint64_t ljmp_wire_totals_events(const Ljmp__Totals *t);

/* Names of enum values, for logs and printing. */
const char *ljmp_wire_state_name(Ljmp__SessionState state);
const char *ljmp_wire_error_name(Ljmp__ErrorCode code);

#endif
