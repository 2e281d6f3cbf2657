/* samples — one valid, fully populated instance of every message and event,
 * shared by the round-trip and rejection tests, the corpus seeds and
 * ddpipe-garbage (which corrupts valid messages). Arrays are malloc'ed so
 * ddp_msg_clear/event_clear free them. */
#ifndef DDP_TEST_SAMPLES_H
#define DDP_TEST_SAMPLES_H

#include "proto/event.h"
#include "proto/messages.h"

#include <msgpack.h>

/* Fills *m with a valid message of type t (BATCH: n=3, c=1, h=2, w=3 with
 * its pixel frame; RESULT: n=2, k=5). Returns 0, -1 on unknown t. */
int sample_msg(ddp_type_t t, ddp_msg_t *m);
/* Fills *ev with a valid event (metric: 3 classes with confusion;
 * predictions: 2 entries with paths, k=5). */
int sample_event(ev_topic_t t, ddp_event_t *ev);
/* Encoded header frame bytes of sample_msg(t) in a new buffer; *pixels gets
 * the BATCH pixel frame (NULL otherwise). Caller frees both. */
unsigned char *sample_msg_bytes(ddp_type_t t, size_t *size, zframe_t **pixels);
unsigned char *sample_event_bytes(ev_topic_t t, size_t *size);

/* Re-packs the msgpack map in[size] into *out with one change: op 'd'
 * drops key, 's' sets its value to the msgpack bytes raw[rawlen], 'a' adds
 * key with that value (even if present). out must be initialised. Returns 0,
 * -1 when in is not a map or the key to drop/set is absent. */
int sample_repack(const void *in, size_t size, char op, const char *key, const void *raw,
                  size_t rawlen, msgpack_sbuffer *out);

#endif
