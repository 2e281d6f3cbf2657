/* proto_make_seeds DIR — writes one fuzz seed per message type and event
 * topic, in fuzz_proto's input layout (see fuzz_proto.c). */
#include "common/log.h"
#include "tests/proto/samples.h"

#include <stdio.h>
#include <stdlib.h>

static int write_seed(const char *dir, const char *name, const unsigned char *pre, size_t npre,
                      const unsigned char *body, size_t nbody, zframe_t *px)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "proto_make_seeds: cannot write %s\n", path);
        return -1;
    }
    fwrite(pre, 1, npre, f);
    fwrite(body, 1, nbody, f);
    if (px)
        fwrite(zframe_data(px), 1, zframe_size(px), f);
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: proto_make_seeds DIR\n");
        return 2;
    }
    log_init("proto_make_seeds", -1, 0);
    int rc = 0;
    for (int t = DDP_JOIN; t <= DDP_TYPE_MAX; t++) {
        size_t size;
        zframe_t *px;
        unsigned char *b = sample_msg_bytes((ddp_type_t)t, &size, &px);
        unsigned char pre[2] = {px ? 2 : 0, px ? (unsigned char)zframe_size(px) : 0};
        rc |= !b || write_seed(argv[1], proto_type_name(t), pre, 2, b, size, px);
        zframe_destroy(&px);
        free(b);
    }
    for (int t = EV_METRIC; t <= EV_TOPIC_LAST; t++) {
        size_t size;
        unsigned char *b = sample_event_bytes((ev_topic_t)t, &size);
        unsigned char pre[1] = {(unsigned char)(((t - 1) << 1) | 1)};
        char name[32];
        snprintf(name, sizeof name, "event-%s", event_topic_name((ev_topic_t)t));
        rc |= !b || write_seed(argv[1], name, pre, 1, b, size, NULL);
        free(b);
    }
    return rc ? 1 : 0;
}
