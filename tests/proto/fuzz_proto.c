/* fuzz_proto — libFuzzer target over every decoder (and corpus replay body).
 *
 * Input layout, so one corpus covers messages and events:
 *   byte 0, bit 0 = 0: a message. bit 1 = 1: the last data[1] bytes are a
 *                      separate pixel frame. The header frame is the rest
 *                      (from byte 2).
 *   byte 0, bit 0 = 1: an event of topic ((byte0 >> 1) % EV_TOPIC_LAST) + 1; the map is
 *                      data[1..].
 * Beyond "no crash, no leak, no UB", a decoded value must re-encode (the
 * encoder enforces the same rules) and decode again to the same type. */
#include "common/log.h"
#include "proto/event.h"
#include "proto/codec.h"

#include <stdint.h>
#include <stdlib.h>

static void check_message(const ddp_msg_t *m)
{
    zmsg_t *z = proto_encode(m);
    if (!z)
        abort(); /* decode accepted what encode refuses */
    ddp_msg_t again;
    char err[256];
    if (proto_decode(z, &again, err, sizeof err) != 0 || again.type != m->type)
        abort();
    ddp_msg_clear(&again);
    zmsg_destroy(&z);
}

static void check_event(const ddp_event_t *ev)
{
    zmsg_t *z = event_encode(ev);
    char *json = event_to_json(ev);
    if (!z || !json)
        abort();
    free(json);
    ddp_event_t again;
    char err[256];
    if (event_decode(z, &again, err, sizeof err) != 0 || again.topic != ev->topic)
        abort();
    event_clear(&again);
    zmsg_destroy(&z);
}

/* Inputs that decoded successfully (tests/fuzz_replay.c checks seeds do). */
unsigned long fuzz_accepted;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int quiet;
    if (!quiet) {
        log_init("fuzz_proto", -1, 0);
        quiet = 1;
    }
    if (size < 1)
        return 0;
    char err[256];
    if (data[0] & 1) {
        ddp_event_t ev;
        ev_topic_t topic = (ev_topic_t)((data[0] >> 1) % EV_TOPIC_LAST + 1);
        if (event_decode_bytes(topic, data + 1, size - 1, &ev, err, sizeof err) == 0) {
            check_event(&ev);
            event_clear(&ev);
            fuzz_accepted++;
        }
        return 0;
    }
    if (size < 2)
        return 0;
    size_t head = size - 2, npx = 0;
    zframe_t *px = NULL;
    if (data[0] & 2) {
        npx = data[1] <= head ? data[1] : head;
        head -= npx;
        px = zframe_new(data + 2 + head, npx);
    }
    ddp_msg_t m;
    if (proto_decode_bytes(data + 2, head, px, &m, err, sizeof err) == 0) {
        check_message(&m);
        ddp_msg_clear(&m);
        fuzz_accepted++;
    }
    zframe_destroy(&px);
    return 0;
}
