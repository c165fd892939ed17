/* Framing and small helpers of the control wire, shared by ljmpd and
 * ljmpctl. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ljmp_wire.h"

int ljmp_wire_default_path(char *out, size_t len, const char *name)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;

    if (getuid() != 0 && xdg != NULL && *xdg != '\0')
        n = snprintf(out, len, "%s/ljmp/%s", xdg, name);
    else
        n = snprintf(out, len, "/run/ljmp/%s", name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

uint8_t *ljmp_wire_pack(const ProtobufCMessage *msg, size_t *frame_len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *frame;

    if (n > LJMP_WIRE_MAX_FRAME)
        return NULL;
    if ((frame = malloc(LJMP_WIRE_HEADER + n)) == NULL)
        return NULL;
    ljmp_wire_put_len(frame, (uint32_t)n);
    protobuf_c_message_pack(msg, frame + LJMP_WIRE_HEADER);
    *frame_len = LJMP_WIRE_HEADER + n;
    return frame;
}

uint64_t ljmp_wire_totals_events(const Ljmp__Totals *t)
{
    return t->alloc_events + t->realloc_events + t->free_events;
}

const char *ljmp_wire_state_name(Ljmp__SessionState state)
{
    switch (state) {
    case LJMP__SESSION_STATE__STREAMING:
        return "streaming";
    case LJMP__SESSION_STATE__COMPLETE:
        return "complete";
    case LJMP__SESSION_STATE__TRUNCATED:
        return "truncated";
    case LJMP__SESSION_STATE__FAILED:
        return "failed";
    default:
        return "unknown";
    }
}

const char *ljmp_wire_error_name(Ljmp__ErrorCode code)
{
    const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
        &ljmp__error_code__descriptor, (int)code);

    return v != NULL ? v->name : "unknown error";
}
