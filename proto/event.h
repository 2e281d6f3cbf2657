/* event — what reducerd publishes (XPUB) and reporterd re-publishes on the tap.
 *
 * Each event is two frames: a topic string frame ("metric", "predictions",
 * "progress", "log", "worker", "end", "failed", "membership") and a msgpack map with "v" (version)
 * and the fields below (PROTOCOL.md documents each). Numeric arrays in
 * "predictions" travel as bin (little-endian), like proto/messages.h.
 */
#ifndef DDP_EVENT_H
#define DDP_EVENT_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/confusion.h"

typedef enum {
    EV_METRIC = 1,
    EV_PREDICTIONS = 2,
    EV_PROGRESS = 3,
    EV_LOG = 4,
    EV_WORKER = 5,
    EV_END = 6,
    EV_FAILED = 7,
    EV_MEMBERSHIP = 8,
    EV_TOPIC_LAST = 8
} ev_topic_t;

/* reporterd also subscribes to this never-published topic so reducerd's
 * XPUB can tell the reporter's subscription from a monitor's. */
#define EVENT_REPORTER_TOPIC "~reporter"

/* Most ranks a progress event's rank_done may list. */
#define EVENT_MAX_RANKS 4096
/* Probability metrics: see common/scorehist.h (PROB_BINS, CALIB_BINS + 1). */
#define EVENT_PROB_BINS 10001u
#define EVENT_CALIB_SLOTS 16u
#define EVENT_MAX_CURVES 3u

/* Exact counts of one (epoch, phase); everything else derives from them. */
typedef struct {
    uint32_t epoch;
    uint8_t phase;              /* ddp_phase_t */
    bool final;                 /* last metric of the job */
    uint64_t planned;           /* N of the plan */
    uint64_t samples;           /* samples with a result (counted once) */
    uint64_t failed;            /* samples that could not be loaded */
    uint64_t correct_top1;
    uint64_t correct_top5;
    uint64_t duplicates;        /* results ignored because already counted */
    double loss_sum;            /* sum of per-sample CE, in double */
    uint32_t num_classes;
    char **class_names;         /* num_classes */
    uint64_t ncells;            /* the confusion matrix's nonzero cells (common/confusion.h), */
    ev_cell_t *cells;           /* sorted by (truth, pred); key "confusion_cells" */
    int32_t workers;
    double wall_s;              /* seconds since the epoch started */
    double images_per_sec;
    double lr;                  /* 0 in eval */
    /* optional (added within version 1; an absent key decodes as shown) */
    double first_result_s;      /* seconds from the epoch's start to its first counted
                                   result: the workers' start, model load and plans
                                   (key "first_result_s"; absent 0: no result yet) */
    double steady_images_per_sec; /* the samples after the first result / the seconds
                                   after it: the rate without the start-up, as a
                                   PyTorch loop timed after a warm-up batch measures
                                   (key "steady_images_per_sec"; absent 0) */
    uint32_t nranks;            /* entries of rank_images_per_sec; 0 absent */
    double *rank_images_per_sec; /* nranks: images/s of rank r while computing this
                                   (epoch, phase): its samples / its RESULT compute_s
                                   (decode allocates; event_clear frees) */
    bool has_decision;          /* training: the keys below are set; false absent */
    uint8_t decision;           /* ddp_decision_t reducerd took after this epoch */
    uint32_t streak;            /* epochs in a row with val top-1 >= target, after this one */
    uint32_t epochs;            /* the job's --epochs */
    char decision_reason[1024]; /* why it stops / continues */
    uint64_t rejected;          /* messages rejected so far by reducerd and loaderd (key
                                   "rejected"; absent decodes as 0) */
    uint64_t nonfinite_loss;    /* of samples, those whose loss is NaN or inf (a diverged
                                   model; key "nonfinite_loss", absent decodes as 0) */
    double loss_scale;          /* training --precision fp16: the loss scale of the
                                   phase's last step (RESULT loss_scale; key "loss_scale",
                                   absent decodes as 0: no loss scaling) */
    uint64_t skipped_steps;     /* with loss_scale: steps of the job skipped so far for
                                   non-finite gradients (key "skipped_steps") */
    /* Probability metrics (eval with --predictions probs|all; key "ece"
     * present): exact from quantized probabilities (common/scorehist.h). */
    bool has_probs;
    double ece;                 /* TorchMetrics' 15-bin l1 calibration error */
    uint64_t *calib;            /* 3 x EVENT_CALIB_SLOTS: count, correct, qsum per bin */
    double *auc, *ap;           /* num_classes each, one-vs-rest; NaN: undefined */
    uint32_t ncurves;           /* 0..EVENT_MAX_CURVES: the worst classes by AP */
    int32_t *curve_class;       /* ncurves */
    uint32_t *curve_pos, *curve_neg; /* ncurves x EVENT_PROB_BINS score histograms */
    /* The plan's classes present in the dataset (--classes: the model has
     * more outputs than the dataset classes); NULL (key absent): all. */
    uint32_t npresent;
    uint32_t *present;
} ev_metric_t;

/* Per-sample results of an epoch, sorted by id; sent in chunks (first..). */
typedef struct {
    uint32_t epoch;
    uint8_t phase;
    uint64_t first;             /* id of entry 0 of this chunk */
    uint64_t n;                 /* entries in this chunk */
    uint64_t total;             /* entries in all chunks */
    uint32_t k;
    uint8_t *status;            /* n: 1 result, 2 failed */
    int32_t *labels;            /* n */
    int32_t *topk;              /* n*k */
    float *loss;                /* n */
    char **paths;               /* n, or NULL */
    uint32_t nprob;             /* probabilities per entry: 0 none, k (top-k) or num_classes */
    uint16_t *probs;            /* n*nprob, quantized: p = q / 10^4 (key "probs") */
} ev_predictions_t;

typedef struct {
    uint32_t epoch;
    uint8_t phase;
    uint64_t done;              /* samples accounted for (result or failed) */
    uint64_t total;
    double images_per_sec;
    double eta_s;
    int32_t workers;
    /* optional (added within version 1; an absent key decodes as shown) */
    double elapsed_s;           /* s since the epoch's plan arrived; -1 absent */
    uint64_t failed;            /* of done, samples that could not be loaded; 0 */
    uint64_t rejected;          /* malformed messages reducerd rejected so far; 0 */
    uint32_t nranks;            /* entries of rank_done; 0 absent */
    uint64_t *rank_done;        /* nranks: samples with a result from rank r
                                   (decode allocates; event_clear frees) */
} ev_progress_t;

typedef struct {
    char level[8];              /* "error" | "warn" | "info" */
    char daemon[32];
    int32_t rank;
    char msg[1024];
} ev_log_t;

typedef struct {
    int32_t rank;
    char name[64];
    char host[64];
    char state[16];             /* "joined" | "dead" | "left" */
    double images_per_sec;
} ev_worker_t;

typedef struct {
    int32_t code;               /* 0: job completed */
    char reason[1024];
} ev_end_t;

/* A sample that could not be loaded (summary.json "failed_files"). */
typedef struct {
    uint32_t epoch;
    uint8_t phase;
    uint64_t id;
    char path[4096];
    char reason[1024];
} ev_failed_t;

/* A training job's membership changed (docs/ELASTIC.md): published by
 * reducerd when the gang forms (gen 0) and at every new generation. */
typedef struct {
    uint32_t gen;               /* the generation now in force */
    int32_t world;              /* its members, 1..EVENT_MAX_RANKS */
    char change[16];            /* "formed" | "lost" | "joined" */
    uint32_t n;                 /* ranks that changed (formed: every member) */
    int32_t *ranks;             /* n: lost: their rank in the previous generation; else the new one */
    char **names;               /* n worker names, each < 64 */
    uint64_t step;              /* the first step of the generation (lost: the one redone) */
    uint32_t epoch;             /* the epoch of that step */
    bool redone;                /* a step was in flight and is redone by the new generation */
    char reason[1024];
} ev_membership_t;

typedef struct {
    ev_topic_t topic;
    union {
        ev_metric_t metric;
        ev_predictions_t predictions;
        ev_progress_t progress;
        ev_log_t log;
        ev_worker_t worker;
        ev_end_t end;
        ev_failed_t failed;
        ev_membership_t membership;
    } u;
} ddp_event_t;

const char *event_topic_name(ev_topic_t topic);
zmsg_t *event_encode(const ddp_event_t *ev);
int event_decode(zmsg_t *zmsg, ddp_event_t *out, char *err, size_t errlen);
/* Same from the raw map bytes of a known topic (used by the fuzzer and by
 * tools that already split the frames). Never trusts the input. */
int event_decode_bytes(ev_topic_t topic, const void *data, size_t size, ddp_event_t *out,
                       char *err, size_t errlen);
/* Free what decode allocated; safe on a zeroed or already-cleared event. */
void event_clear(ddp_event_t *ev);
/* The rules encode and decode enforce (phase, k, chunk bounds, status
 * values, enumerated strings, NUL-terminated fields). 0 or -1 with why. */
int event_validate(const ddp_event_t *ev, char *err, size_t errlen);
/* JSON text of an event (for the tap's --json mirror); caller frees.
 * NULL when ev fails event_validate or memory runs out. */
char *event_to_json(const ddp_event_t *ev);

#endif
