/* reducerd's options: the table every flag is declared in once (usage,
 * parsing, and the argv a launcher emits from it) and the checks across
 * options. */
#ifndef DDP_REDUCERD_OPTIONS_H
#define DDP_REDUCERD_OPTIONS_H

#include "common/options.h"

typedef struct {
    const char *bind;          /* ROUTER: joins, plans, results */
    const char *pub;           /* XPUB: events */
    long workers;              /* gpud ranks: the world size */
    long reporters;            /* reporterd DONE replies to wait for */
    const char *job;
    int predictions;
    const char *probs;         /* NULL, "topk" or "all": probability metrics (eval) */
    const char *model_config;  /* eval: the JOIN config every gpud must send (NULL: the first's) */
    long worker_timeout_s;
    long stall_timeout_s;      /* 0: off */
    long done_timeout_s;
    long start_workers;        /* eval: no gpud is welcomed before this many joined (1: at once) */
    long start_timeout_s;      /* eval: ... or this long after the first gpud's JOIN */
    /* training (--train) */
    int train;
    long epochs;
    double target_accuracy;    /* a fraction; 0: off */
    long patience;
    int no_val;                /* no validation plan comes: decide on train alone */
    long start_epoch;
    long streak;               /* the streak a resumed run continues */
    const char *resume_dir;    /* named in a failure's "resume with" hint */
    long min_workers;          /* elastic: fewer ranks than this fail the job */
    long max_workers;          /* elastic: joiners are admitted up to this world (0: --workers) */
    long rejoin_timeout_s;     /* elastic: how long a job below --min-workers waits for joiners */
    long pause_at_step;        /* test hook: pause before this step until a rank joins; -1 off */
    long start_step;           /* the run's first optimizer step (a resume's ckpt.step) */
    int verbose;
} reducer_options_t;

/* Every option of reducerd, for its usage and for a launcher's
 * options_emit (with a filled reducer_options_t). */
extern const option_table_t reducer_options_table;

/* Takes the security options (zs_security_args), then the table's, then
 * checks them together. 0; 1 after --help (exit 0); -1 after the error
 * went to stderr (exit 2). */
int reducer_options_parse(reducer_options_t *self, int argc, char **argv);

#endif
