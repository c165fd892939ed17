/* Walks protobuf-c messages by their descriptors: JSON, terminal text. */
#include <math.h>
#include <string.h>

#include "lm_report.h"
#include "pbjson.h"

static const void *field_ptr(const ProtobufCMessage *m,
                             const ProtobufCFieldDescriptor *f)
{
    return (const char *)m + f->offset;
}

static void write_value(FILE *out, const ProtobufCFieldDescriptor *f,
                        const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        fprintf(out, "%d", *(const int32_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        fprintf(out, "%u", *(const uint32_t *)p);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        fprintf(out, "%lld", (long long)*(const int64_t *)p);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        fprintf(out, "%llu", (unsigned long long)*(const uint64_t *)p);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double v = f->type == PROTOBUF_C_TYPE_FLOAT ? *(const float *)p
                                                    : *(const double *)p;
        /* JSON has no infinities or NaNs. */
        if (isfinite(v))
            fprintf(out, "%.6g", v);
        else
            fputs("null", out);
        break;
    }
    case PROTOBUF_C_TYPE_BOOL:
        fputs(*(const protobuf_c_boolean *)p ? "true" : "false", out);
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value(f->descriptor, v);
        if (ev != NULL)
            lm_json_string(out, ev->name, strlen(ev->name));
        else
            fprintf(out, "%d", v);
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        lm_json_string(out, s ? s : "", s ? strlen(s) : 0);
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        lm_json_string(out, (const char *)b->data, b->len);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        pbjson_write(out, *(ProtobufCMessage *const *)p);
        break;
    }
}

static size_t value_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4;
    }
}

/* Whether an optional or oneof field is set. */
static int is_present(const ProtobufCMessage *m,
                      const ProtobufCFieldDescriptor *f)
{
    const char *qp = (const char *)m + f->quantifier_offset;

    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)qp == f->id;
    if (f->type == PROTOBUF_C_TYPE_STRING ||
        f->type == PROTOBUF_C_TYPE_MESSAGE) {
        const void *v = *(void *const *)field_ptr(m, f);
        return v != NULL && v != f->default_value;
    }
    return *(const protobuf_c_boolean *)qp;
}

void pbjson_write(FILE *out, const ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    int first = 1;

    fputc('{', out);
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n =
                *(const size_t *)((const char *)msg + f->quantifier_offset);
            if (n == 0)
                continue;
            const char *arr = *(const char *const *)field_ptr(msg, f);
            fprintf(out, "%s\"%s\":[", first ? "" : ",", f->name);
            for (size_t j = 0; j < n; j++) {
                if (j > 0)
                    fputc(',', out);
                write_value(out, f, arr + j * value_size(f));
            }
            fputc(']', out);
        } else {
            if (f->label == PROTOBUF_C_LABEL_OPTIONAL && !is_present(msg, f))
                continue;
            fprintf(out, "%s\"%s\":", first ? "" : ",", f->name);
            write_value(out, f, field_ptr(msg, f));
        }
        first = 0;
    }
    fputc('}', out);
}

static void mask_string(char *s)
{
    for (; s != NULL && *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

void pb_mask_controls(ProtobufCMessage *msg)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;

    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_STRING &&
            f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        void **v = (void **)((char *)msg + f->offset);
        size_t n = 1;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            n = *(const size_t *)((const char *)msg + f->quantifier_offset);
            v = *(void ***)v;
        }
        for (size_t j = 0; j < n; j++) {
            if (v[j] == NULL || v[j] == f->default_value)
                continue; /* unset, or a shared constant */
            if (f->type == PROTOBUF_C_TYPE_STRING)
                mask_string(v[j]);
            else
                pb_mask_controls(v[j]);
        }
    }
}
