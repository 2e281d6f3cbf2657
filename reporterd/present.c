#include "reporterd/present.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t nn;          /* classes of the restricted metric */
    uint64_t *confusion;  /* nn*nn */
    char **names;         /* nn */
    double *auc, *ap;     /* nn when has_probs */
} small_t;

static void s_small_free(small_t *s)
{
    for (uint32_t c = 0; s->names && c < s->nn; c++)
        free(s->names[c]);
    free(s->names);
    free(s->confusion);
    free(s->auc);
    free(s->ap);
}

/* Any sample predicted as a class outside the dataset (pos -1)? */
static bool s_other(const ev_metric_t *m, const int64_t *pos)
{
    uint32_t nc = m->num_classes;
    for (uint32_t i = 0; i < m->npresent; i++)
        for (uint32_t p = 0; p < nc; p++)
            if (pos[p] < 0 && m->confusion[(uint64_t)m->present[i] * nc + p])
                return true;
    return false;
}

static int s_build(const ev_metric_t *m, const int64_t *pos, small_t *s)
{
    uint32_t P = m->npresent, nc = m->num_classes, nn = s->nn;
    s->confusion = calloc((size_t)nn * nn, sizeof *s->confusion);
    s->names = calloc(nn, sizeof *s->names);
    if (m->has_probs) {
        s->auc = malloc(nn * sizeof *s->auc);
        s->ap = malloc(nn * sizeof *s->ap);
    }
    if (!s->confusion || !s->names || (m->has_probs && (!s->auc || !s->ap)))
        return -1;
    for (uint32_t i = 0; i < P; i++) {
        uint32_t t = m->present[i];
        for (uint32_t p = 0; p < nc; p++) {
            uint64_t v = m->confusion[(uint64_t)t * nc + p];
            if (v)   /* a prediction outside the dataset: then nn == P + 1 (s_other) */
                s->confusion[(uint64_t)i * nn + (pos[p] >= 0 ? (uint64_t)pos[p] : P)] += v;
        }
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
    small_t s = {.nn = P + (m->confusion && s_other(m, pos) ? 1 : 0)};
    if (!m->confusion || s_build(m, pos, &s) < 0) {
        s_small_free(&s);
        free(pos);
        return -1;
    }
    s_curves(m, pos);
    free(pos);
    for (uint32_t c = 0; m->class_names && c < nc; c++)
        free(m->class_names[c]);
    free(m->class_names);
    free(m->confusion);
    free(m->auc);
    free(m->ap);
    m->class_names = s.names;
    m->confusion = s.confusion;
    m->auc = s.auc;
    m->ap = s.ap;
    m->num_classes = s.nn;
    m->present = NULL;   /* borrowed from the event; npresent now counts the labelled */
    return 0;
}
