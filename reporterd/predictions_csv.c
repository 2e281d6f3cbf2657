#include "reporterd/predictions_csv.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/atomic_file.h"
#include "common/errbuf.h"
#include "reporterd/textfmt.h"

#define CSV_K 5

struct predcsv {
    atomic_file_t *file;
    uint64_t next;  /* index of the next entry expected */
    uint64_t total; /* from the first chunk */
    uint32_t epoch;
    uint8_t phase;
    int started;
    uint32_t k, nprob; /* from the first chunk: the header's probability columns */
};

/* The header, once the first chunk says which probabilities come: none,
 * the top-k's (p1..p5, beside top1..top5) or every class's (prob_0..). */
static void s_header(predcsv_t *self, FILE *out)
{
    fputs("index,path,label,top1,top2,top3,top4,top5,loss", out);
    if (self->nprob && self->nprob == self->k)
        fputs(",p1,p2,p3,p4,p5", out);
    else
        for (uint32_t c = 0; c < self->nprob; c++)
            fprintf(out, ",prob_%u", c);
    fputc('\n', out);
}

predcsv_t *predcsv_new(const char *path, char *err, size_t errlen)
{
    predcsv_t *self = calloc(1, sizeof *self);
    if (!self) {
        err_set(err, errlen, "out of memory opening %s", path);
        return NULL;
    }
    self->file = atomic_file_new(path, err, errlen);
    if (!self->file) {
        free(self);
        return NULL;
    }
    return self;
}

void predcsv_destroy(predcsv_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    atomic_file_destroy(&(*self_p)->file);
    free(*self_p);
    *self_p = NULL;
}

uint64_t predcsv_next(const predcsv_t *self) { return self->next; }

static int s_check_chunk(predcsv_t *self, const ev_predictions_t *c, char *err, size_t errlen)
{
    if (!self->started) {
        self->total = c->total;
        self->epoch = c->epoch;
        self->phase = c->phase;
        self->k = c->k;
        self->nprob = c->nprob;
        self->started = 1;
        s_header(self, atomic_file_stream(self->file));
    }
    if (c->first != self->next || c->total != self->total || c->epoch != self->epoch ||
        c->phase != self->phase) {
        err_set(err, errlen,
                "predictions chunk out of order: got epoch %u phase %u entries %llu+%llu of "
                "%llu, expected epoch %u phase %u from %llu of %llu",
                c->epoch, c->phase, (unsigned long long)c->first, (unsigned long long)c->n,
                (unsigned long long)c->total, self->epoch, self->phase,
                (unsigned long long)self->next, (unsigned long long)self->total);
        return -1;
    }
    if (c->nprob != self->nprob || c->k != self->k) {
        err_set(err, errlen, "predictions chunk with k=%u and %u probabilities after k=%u and %u",
                c->k, c->nprob, self->k, self->nprob);
        return -1;
    }
    if (c->n > self->total - self->next || c->k == 0 || c->k > CSV_K) {
        err_set(err, errlen, "predictions chunk of %llu entries (k=%u) past the total %llu",
                (unsigned long long)c->n, c->k, (unsigned long long)self->total);
        return -1;
    }
    return 0;
}

/* The probability columns: exactly the quantized value q / 10^4, printed
 * from the integer so the CSV holds what reducerd counted. */
static void s_probs(FILE *out, const ev_predictions_t *c, uint64_t i, int failed)
{
    uint32_t cols = c->nprob == c->k ? CSV_K : c->nprob;
    for (uint32_t j = 0; j < cols; j++) {
        fputc(',', out);
        if (!failed && j < c->nprob) {
            unsigned q = c->probs[i * c->nprob + j];
            fprintf(out, "%u.%04u", q / 10000u, q % 10000u);
        }
    }
}

static void s_row(FILE *out, const ev_predictions_t *c, uint64_t i)
{
    fprintf(out, "%llu,", (unsigned long long)(c->first + i));
    textfmt_csv_path(out, c->paths ? c->paths[i] : NULL);
    fputc(',', out);
    if (c->labels[i] >= 0)
        fprintf(out, "%d", c->labels[i]);
    if (c->status[i] != 1) { /* failed: no predictions, no loss */
        fputs(",,,,,,", out);
        if (c->nprob)
            s_probs(out, c, i, 1);
        fputc('\n', out);
        return;
    }
    for (uint32_t j = 0; j < CSV_K; j++) {
        fputc(',', out);
        if (j < c->k)
            fprintf(out, "%d", c->topk[i * c->k + j]);
    }
    fprintf(out, ",%.9g", (double)c->loss[i]);
    if (c->nprob)
        s_probs(out, c, i, 0);
    fputc('\n', out);
}

int predcsv_add(predcsv_t *self, const ev_predictions_t *chunk, char *err, size_t errlen)
{
    if (s_check_chunk(self, chunk, err, errlen) != 0)
        return -1;
    FILE *out = atomic_file_stream(self->file);
    for (uint64_t i = 0; i < chunk->n; i++)
        if (chunk->status[i] == 1 || chunk->status[i] == 2)
            s_row(out, chunk, i);
    self->next += chunk->n;
    if (ferror(out)) {
        err_set(err, errlen, "cannot write %s", atomic_file_tmp_path(self->file));
        return -1;
    }
    return 0;
}

int predcsv_commit(predcsv_t **self_p, char *err, size_t errlen)
{
    predcsv_t *self = *self_p;
    if (!self->started || self->next != self->total) {
        err_set(err, errlen, "predictions incomplete: %llu of %llu entries received",
                (unsigned long long)self->next, (unsigned long long)self->total);
        predcsv_destroy(self_p);
        return -1;
    }
    int rc = atomic_file_commit(&self->file, err, errlen);
    predcsv_destroy(self_p);
    return rc;
}
