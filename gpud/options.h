/* gpud's options: the table every flag is declared in once (usage,
 * parsing, and the argv a launcher emits from it) and the checks across
 * options. The fields hold the flags as given; what the daemon makes of
 * them (the model's options, the normalisation, the trainer's optimizer
 * and schedule) is gpud.c's and train.c's. */
#ifndef DDP_GPUD_OPTIONS_H
#define DDP_GPUD_OPTIONS_H

#include "common/options.h"

typedef struct {
    const char *loader;          /* loaderd's ROUTER: batches in, credits out */
    const char *reducer;         /* reducerd's ROUTER: JOIN, RESULT, STOP */
    const char *model;           /* the architecture */
    const char *weights;         /* NULL: initial weights (--train only) */
    option_ints_t channels;      /* WideResNet widths */
    long num_classes;            /* 0: from the weights */
    long in_channels;            /* 0: the architecture's */
    const char *backend;
    long threads;                /* 0: all cores */
    long micro_batch;            /* 0: the model's default */
    option_doubles_t mean, std;  /* none given: the architecture's normalisation */
    const char *normalize;       /* "none" | "imagenet"; NULL: the architecture's */
    long window;
    long rank;                   /* -1: reducerd chooses */
    const char *name;            /* NULL: gpud-HOST-PID */
    long join_timeout_s;
    long fault_after;            /* test hook: die on the batch after this many; -1 off */
    int verbose;
    /* training (--train) */
    int train;
    const char *optimizer;       /* sgd | adam | adamw | novograd */
    double lr;
    double momentum, weight_decay, dampening, eps;   /* NAN: the optimizer's default */
    option_doubles_t betas;      /* none given: the optimizer's default */
    int nesterov, grad_averaging, amsgrad;
    int no_decay_bn_bias;
    const char *lr_schedule;     /* none | step | cosine */
    long step_size, t_max;       /* 0: not given */
    double gamma, eta_min;
    long warmup_epochs;
    double warmup_start_factor;  /* 0: LinearLR's default 1/3 */
    double label_smoothing;
    int sync_bn;
    option_strings_t freeze, freeze_bn;   /* parameter / BatchNorm name prefixes */
    long seed;
    const char *ring_bind;
    long ring_timeout_s;
    const char *checkpoint;
    long checkpoint_every;
    const char *save_weights;
    const char *resume;
    long fault_at_step;          /* test hook: SIGKILL before this train step; -1 off */
    long global_batch;           /* 0: inferred (checkpoint metadata only) */
} gpud_options_t;

/* Every option of gpud, for its usage and for a launcher's options_emit
 * (with a filled gpud_options_t). */
extern const option_table_t gpud_options_table;

/* Takes the security options (zs_security_args), then the table's, then
 * checks them together. 0; 1 after --help (exit 0); -1 after the error
 * went to stderr (exit 2). */
int gpud_options_parse(gpud_options_t *self, int argc, char **argv);

#endif
