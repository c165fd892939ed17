/* Any protobuf-c message as JSON, from its descriptor: one mechanism for
 * every --json output of ljmpctl. */
#ifndef LJMPCTL_PBJSON_H
#define LJMPCTL_PBJSON_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

/* Writes msg as one JSON object (no newline); fields that are absent are
 * left out, enums are written by name, bytes as strings. */
void pbjson_write(FILE *out, const ProtobufCMessage *msg);

#endif
