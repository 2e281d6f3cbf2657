/* reducerd's option table and the checks across its options. */
#include "reducerd/options.h"

#include "common/jobid.h"
#include "common/zsecurity.h"
#include "proto/messages.h"

#include <stdio.h>
#include <string.h>

#define T reducer_options_t
static const option_t s_rows[] = {
    OPTION_STRING(T, bind, "bind", "EP", NULL,
                  "ROUTER for joins, plans, results (e.g. tcp://127.0.0.1:5560)"),
    OPTION_STRING(T, pub, "pub", "EP", NULL,
                  "XPUB for events (metric, predictions, progress, log, worker, end)"),
    OPTION_LONG(T, workers, "workers", "N", 1, 1, 4096, "gpud ranks expected: the world size"),
    OPTION_LONG(T, reporters, "reporters", "N", 1, 0, 16,
                "reporterd DONE replies to wait for before exiting"),
    OPTION_STRING(T, job, "job", "ID", NULL,
                  "the job's identity, handed to joiners; a JOIN or message naming another job "
                  "is refused (default: $DDPIPE_JOB, else 32 random hex digits; docs/SECURITY.md)"),
    OPTION_FLAG(T, predictions, "predictions",
                "publish per-sample predictions (for predictions.csv; training: of the last "
                "validation)"),
    OPTION_STRING(T, probs, "probs", "MODE", NULL,
                  "eval: every RESULT must carry the quantized softmax (gpud --probs); compute "
                  "ECE, per-class ROC-AUC and average precision exactly, and keep the "
                  "probabilities of the top-k (topk) or of every class (all) for the predictions"),
    OPTION_STRING(T, model_config, "model-config", "CONFIG", NULL,
                  "eval: the settings and weights digest every gpud's JOIN must carry (ddpipe "
                  "eval passes its gpuds'; default: the first gpud's; docs/SECURITY.md)"),
    OPTION_LONG(T, worker_timeout_s, "worker-timeout", "S", 10, 1, 86400,
                "a gpud silent this long is reported dead"),
    OPTION_LONG(T, stall_timeout_s, "stall-timeout", "S", 600, 0, 86400 * 7,
                "fail the job after S seconds without progress: no accepted result, failure, plan "
                "or new worker (heartbeats and rejected messages do not count); 0 off"),
    OPTION_LONG(T, done_timeout_s, "done-timeout", "S", 60, 1, 86400,
                "how long to wait for reporterd at the end (training: also for rank 0's final "
                "checkpoint and weights)"),
    OPTION_LONG(T, start_workers, "start-workers", "N", 1, 1, 4096,
                "eval: welcome no gpud until N have joined, so all N share the batches from the "
                "first (ddpipe eval passes --workers); 1: each starts as soon as it is ready"),
    OPTION_LONG(T, start_timeout_s, "start-timeout", "S", 30, 1, 86400,
                "eval: with --start-workers N, start with the gpuds that joined S s after the "
                "first one did, should fewer than N come; a gpud that says it could not start "
                "(JOIN failed) is not waited for"),
    OPTION_SECTION("training (docs/TRAINING.md):"),
    OPTION_FLAG(T, train, "train",
                "coordinate a training job: WELCOME the gpuds once all --workers ranks joined, "
                "tally each epoch's train and validation, decide early stopping and send EPOCH; "
                "commit each step, and re-form the ring without a lost rank (docs/ELASTIC.md)"),
    OPTION_LONG(T, epochs, "epochs", "E", 1, 1, 1000000, "epochs of the run"),
    OPTION_DOUBLE(T, target_accuracy, "target-accuracy", "A", 0, 0, 1,
                  "stop once val top-1 >= A (a fraction) for --patience epochs in a row; 0 off"),
    OPTION_LONG(T, patience, "patience", "P", 1, 1, 1000000,
                "epochs in a row at the target before stopping"),
    OPTION_FLAG(T, no_val, "no-val",
                "no validation plan comes (loaderd without --val): decide after each epoch's "
                "train tally, by --epochs only"),
    OPTION_LONG(T, start_epoch, "start-epoch", "E", 0, 0, 1000000,
                "the epoch a resumed run continues with"),
    OPTION_LONG(T, streak, "streak", "K", 0, 0, 1000000,
                "the streak a resumed run continues (checkpoint ckpt.streak)"),
    OPTION_STRING(T, resume_dir, "resume-dir", "DIR", NULL,
                  "run directory named in a failure's \"resume with\" hint"),
    OPTION_LONG(T, min_workers, "min-workers", "N", 1, 1, 4096,
                "a lost rank costs its step, not the job, while at least N ranks are left; "
                "below N the job fails with a resumable checkpoint"),
    OPTION_LONG(T, max_workers, "max-workers", "N", 0, 1, DDP_MAX_WORLD,
                "gpuds that join the running job are admitted while fewer than N ranks train "
                "(default: --workers, so a replacement can fill a lost rank's place)"),
    OPTION_LONG(T, rejoin_timeout_s, "rejoin-timeout", "S", 60, 0, 86400,
                "below --min-workers the job pauses up to S s for ranks to join (gpud --join); "
                "then it stops with a resumable checkpoint (0: at once)"),
    OPTION_LONG(T, pause_at_step, "pause-at-step", "S", -1, 0, (long)1 << 40,
                "test hook: pause before step S until a rank joins (default: off)"),
    OPTION_LONG(T, start_step, "start-step", "S", 0, 0, (long)1 << 40,
                "the run's first optimizer step (a resumed run's ckpt.step)"),
    ZS_SECURITY_OPTIONS,
    OPTION_FLAG(T, verbose, "verbose", NULL),
    OPTION_END};
#undef T

const option_table_t reducer_options_table = {
    "reducerd", "--bind ENDPOINT --pub ENDPOINT [options]", s_rows};

static int check_training(const reducer_options_t *self)
{
    if (!self->train)
        return 0;
    if (self->start_epoch >= self->epochs) {
        fprintf(stderr, "reducerd: --start-epoch %ld is not below --epochs %ld: nothing to train\n",
                self->start_epoch, self->epochs);
        return -1;
    }
    if (self->min_workers > self->workers) {
        fprintf(stderr, "reducerd: --min-workers %ld is more than --workers %ld\n",
                self->min_workers, self->workers);
        return -1;
    }
    if (self->max_workers && self->max_workers < self->workers) {
        fprintf(stderr, "reducerd: --max-workers %ld is less than --workers %ld\n",
                self->max_workers, self->workers);
        return -1;
    }
    if (self->no_val && self->target_accuracy > 0) {
        fprintf(stderr, "reducerd: --target-accuracy needs validation: drop --no-val (and give "
                        "loaderd --val) or drop --target-accuracy\n");
        return -1;
    }
    return 0;
}

int reducer_options_parse(reducer_options_t *self, int argc, char **argv)
{
    if (zs_security_args(&argc, argv) < 0)
        return -1;
    int rc = options_parse(&reducer_options_table, argc, argv, self, NULL);
    if (rc != 0)
        return rc;
    if (!self->bind || !self->pub) {
        fprintf(stderr, "reducerd: --bind and --pub are required\n");
        options_usage(&reducer_options_table, stderr);
        return -1;
    }
    if (self->job && !jobid_valid(self->job)) {
        fprintf(stderr, "reducerd: --job '%s': give 1..%d characters of A-Z a-z 0-9 . _ : -\n",
                self->job, JOBID_MAX - 1);
        return -1;
    }
    if (self->probs && strcmp(self->probs, "topk") != 0 && strcmp(self->probs, "all") != 0) {
        fprintf(stderr, "reducerd: --probs %s: want topk or all\n", self->probs);
        return -1;
    }
    if (self->start_workers > self->workers) {
        fprintf(stderr, "reducerd: --start-workers %ld is more than --workers %ld\n",
                self->start_workers, self->workers);
        return -1;
    }
    return check_training(self);
}
