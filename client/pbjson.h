/* Any protobuf-c message walked by its descriptor: as JSON, for every
 * --json output of ljmpctl, and made safe to print on a terminal. */
#ifndef LJMPCTL_PBJSON_H
#define LJMPCTL_PBJSON_H

#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

/* Writes msg as one JSON object (no newline); fields that are absent are
 * left out, enums are written by name, bytes as strings. */
void pbjson_write(FILE *out, const ProtobufCMessage *msg);

/*
 * Replaces, in place, the control characters of msg's strings (nested
 * messages' too) with '?'.  Peers choose some of them (a process's
 * command line, a chunk's name): printed as they are, a newline would
 * split a line that scripts read, and an escape sequence would drive the
 * terminal.  Bytes fields (a report's text) are left alone.
 */
void pb_mask_controls(ProtobufCMessage *msg);

#endif
