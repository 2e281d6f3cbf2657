#include "reporterd/present.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t nn;          /* classes of the restricted metric */
    ev_cell_t *cells;     /* its confusion cells, renumbered, sorted */
    uint64_t ncells;
    char **names;         /* nn */
    double *auc, *ap;     /* nn when has_probs */
} small_t;

static void s_small_free(small_t *s)
{
    for (uint32_t c = 0; s->names && c < s->nn; c++)
        free(s->names[c]);
    free(s->names);
    free(s->cells);
    free(s->auc);
    free(s->ap);
}

/* The cells of the present rows, renumbered: a prediction outside the
 * dataset goes to column P, and then nn == P + 1. Other rows are dropped
 * (a present list covers every label the dataset has). */
static int s_cells(const ev_metric_t *m, const int64_t *pos, small_t *s)
{
    uint32_t P = m->npresent;
    s->cells = malloc((m->ncells ? m->ncells : 1) * sizeof *s->cells);
    if (!s->cells)
        return -1;
    bool other = false;
    for (uint64_t i = 0; m->cells && i < m->ncells; i++) {
        const ev_cell_t *c = &m->cells[i];
        if (pos[c->truth] < 0)
            continue;
        other |= pos[c->pred] < 0;
        s->cells[s->ncells++] = (ev_cell_t){(uint32_t)pos[c->truth],
                                            pos[c->pred] >= 0 ? (uint32_t)pos[c->pred] : P,
                                            c->count};
    }
    confusion_normalize(s->cells, &s->ncells);
    s->nn = P + (other ? 1 : 0);
    return 0;
}

static int s_build(const ev_metric_t *m, const int64_t *pos, small_t *s)
{
    uint32_t P = m->npresent, nn;
    if (s_cells(m, pos, s) < 0)
        return -1;
    nn = s->nn;
    s->names = calloc(nn, sizeof *s->names);
    if (m->has_probs) {
        s->auc = malloc(nn * sizeof *s->auc);
        s->ap = malloc(nn * sizeof *s->ap);
    }
    if (!s->names || (m->has_probs && (!s->auc || !s->ap)))
        return -1;
    for (uint32_t i = 0; i < P; i++) {
        uint32_t t = m->present[i];
        const char *name = m->class_names && m->class_names[t] ? m->class_names[t] : "";
        if (!(s->names[i] = strdup(name)))
            return -1;
        if (m->has_probs)
            s->auc[i] = m->auc[t], s->ap[i] = m->ap[t];
    }
    if (nn > P) {
        if (!(s->names[P] = strdup(PRESENT_OTHER_NAME)))
            return -1;
        if (m->has_probs)
            s->auc[P] = s->ap[P] = NAN;
    }
    return 0;
}

/* The worst-AP curves of present classes, renumbered; the others dropped. */
static void s_curves(ev_metric_t *m, const int64_t *pos)
{
    uint32_t kept = 0;
    size_t h = EVENT_PROB_BINS;
    for (uint32_t k = 0; k < m->ncurves; k++) {
        int32_t c = m->curve_class[k];
        if (c < 0 || (uint32_t)c >= m->num_classes || pos[c] < 0)
            continue;
        m->curve_class[kept] = (int32_t)pos[c];
        memmove(m->curve_pos + kept * h, m->curve_pos + k * h, h * sizeof *m->curve_pos);
        memmove(m->curve_neg + kept * h, m->curve_neg + k * h, h * sizeof *m->curve_neg);
        kept++;
    }
    m->ncurves = kept;
}

int present_restrict(ev_metric_t *m)
{
    if (!m->present)
        return 0;
    uint32_t nc = m->num_classes, P = m->npresent;
    int64_t *pos = malloc(nc * sizeof *pos);
    if (!pos)
        return -1;
    for (uint32_t p = 0; p < nc; p++)
        pos[p] = -1;
    for (uint32_t i = 0; i < P; i++)
        pos[m->present[i]] = i;
    small_t s = {0};
    if (s_build(m, pos, &s) < 0) {
        s_small_free(&s);
        free(pos);
        return -1;
    }
    s_curves(m, pos);
    free(pos);
    for (uint32_t c = 0; m->class_names && c < nc; c++)
        free(m->class_names[c]);
    free(m->class_names);
    free(m->cells);
    free(m->auc);
    free(m->ap);
    m->class_names = s.names;
    m->cells = s.cells;
    m->ncells = s.ncells;
    m->auc = s.auc;
    m->ap = s.ap;
    m->num_classes = s.nn;
    m->present = NULL;   /* borrowed from the event; npresent now counts the labelled */
    return 0;
}
