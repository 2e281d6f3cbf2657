/* codec — a ddp_msg_t to and from the msgpack frames of proto/PROTOCOL.md:
 * encode (encode.c), decode (decode.c) and the semantic rules both enforce
 * (validate.c). No sockets here: wire.h sends and receives. */
#ifndef DDP_PROTO_CODEC_H
#define DDP_PROTO_CODEC_H

#include "proto/messages.h"

/* Encode: returns a new zmsg_t (caller owns) or NULL on a bad struct. */
zmsg_t *proto_encode(const ddp_msg_t *msg);
/* For BATCH the pixel frame is moved into the message: *pixels becomes NULL. */
zmsg_t *proto_encode_batch(ddp_batch_t *batch);

/* Decode + validate the payload frames of *zmsg (identity frames already
 * popped). Returns 0 and fills *out, or -1 with a reason in why.
 * Never trusts the input: any byte string is safe to pass. */
int proto_decode(zmsg_t *zmsg, ddp_msg_t *out, char *err, size_t errlen);
/* Same from raw bytes of the first frame (used by the fuzzer). */
int proto_decode_bytes(const void *data, size_t size, zframe_t *pixels, ddp_msg_t *out,
                       char *err, size_t errlen);

/* The semantic rules (ranges, sizes, NUL-terminated fixed strings, pixel
 * frame size) that both encode and decode enforce. 0 or -1 with why. */
int proto_validate(const ddp_msg_t *msg, char *err, size_t errlen);
/* PLAN's and METRIC's optional class list: NULL (n 0), or 1..num_classes
 * strictly increasing ids below num_classes. 0, or -1 with "WHAT: why". */
int ddp_check_present(const uint32_t *present, uint32_t n, uint32_t num_classes, char *err,
                      size_t errlen, const char *what);

#endif
