#include "reporterd/tfevents.h"

#include "common/clock.h"
#include "common/errbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct tfevents {
    FILE *f;
    char path[4096];
};

/* ---- CRC32C, bitwise-reflected table (polynomial 0x82F63B78) ---- */

uint32_t tfevents_crc32c(const void *data, size_t len)
{
    static uint32_t table[256];
    static int ready;   /* reporterd writes from one thread */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

uint32_t tfevents_masked_crc(const void *data, size_t len)
{
    uint32_t crc = tfevents_crc32c(data, len);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

/* ---- protocol buffer pieces: varints, tags, fixed-width little endian ---- */

typedef struct {
    uint8_t b[1024];
    size_t n;
} pb_t;

static void pb_byte(pb_t *p, uint8_t v)
{
    if (p->n < sizeof p->b)
        p->b[p->n] = v;
    p->n++;
}

static void pb_varint(pb_t *p, uint64_t v)
{
    do {
        pb_byte(p, (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}

static void pb_fixed(pb_t *p, const void *le, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pb_byte(p, ((const uint8_t *)le)[i]);   /* x86/arm64: little endian already */
}

static void pb_bytes(pb_t *p, uint32_t field, const void *data, size_t n)
{
    pb_varint(p, (uint64_t)field << 3 | 2);
    pb_varint(p, n);
    pb_fixed(p, data, n);
}

/* Event{wall_time = 1 (double), step = 2 (int64), file_version = 3 |
 * summary = 5}. body: the file_version string or the Summary message. */
static void event(pb_t *e, double wall_time, int64_t step, uint32_t field, const pb_t *body)
{
    pb_varint(e, 1 << 3 | 1);
    pb_fixed(e, &wall_time, sizeof wall_time);
    if (step) {
        pb_varint(e, 2 << 3 | 0);
        pb_varint(e, (uint64_t)step);
    }
    pb_bytes(e, field, body->b, body->n);
}

static int record(tfevents_t *self, const pb_t *e, char *err, size_t errlen)
{
    if (e->n > sizeof e->b) {
        err_set(err, errlen, "a TensorBoard event of %zu bytes: the tag is too long", e->n);
        return -1;
    }
    uint64_t len = e->n;
    uint32_t len_crc = tfevents_masked_crc(&len, sizeof len);
    uint32_t data_crc = tfevents_masked_crc(e->b, e->n);
    if (fwrite(&len, sizeof len, 1, self->f) != 1 || fwrite(&len_crc, 4, 1, self->f) != 1 ||
        fwrite(e->b, 1, e->n, self->f) != e->n || fwrite(&data_crc, 4, 1, self->f) != 1 ||
        fflush(self->f) != 0) {
        err_set(err, errlen, "writing %s: %s", self->path, strerror(errno));
        return -1;
    }
    return 0;
}

tfevents_t *tfevents_new(const char *dir, char *err, size_t errlen)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        err_set(err, errlen, "cannot create the TensorBoard folder %s: %s", dir, strerror(errno));
        return NULL;
    }
    tfevents_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "out of memory");
        return NULL;
    }
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(self->path, sizeof self->path, "%s/events.out.tfevents.%lld.%s.%d", dir,
             (long long)time(NULL), host, (int)getpid());
    self->f = fopen(self->path, "wb");
    pb_t version = {0}, e = {0};
    pb_fixed(&version, "brain.Event:2", 13);
    event(&e, clock_wall_s(), 0, 3, &version);
    if (!self->f || record(self, &e, err, errlen) < 0) {
        if (!self->f)
            err_set(err, errlen, "cannot create %s: %s", self->path, strerror(errno));
        tfevents_destroy(&self);
        return NULL;
    }
    return self;
}

void tfevents_destroy(tfevents_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    if ((*self_p)->f)
        fclose((*self_p)->f);
    free(*self_p);
    *self_p = NULL;
}

int tfevents_scalar(tfevents_t *self, const char *tag, int64_t step, double wall_time,
                    float value, char *err, size_t errlen)
{
    /* Summary{value = 1: Value{tag = 1, simple_value = 2 (float)}} */
    pb_t v = {0}, summary = {0}, e = {0};
    pb_bytes(&v, 1, tag, strlen(tag));
    pb_varint(&v, 2 << 3 | 5);
    pb_fixed(&v, &value, sizeof value);
    if (v.n > sizeof v.b) {
        err_set(err, errlen, "TensorBoard tag '%.40s...' is too long", tag);
        return -1;
    }
    pb_bytes(&summary, 1, v.b, v.n);
    event(&e, wall_time, step, 5, &summary);
    return record(self, &e, err, errlen);
}

const char *tfevents_path(const tfevents_t *self)
{
    return self->path;
}
