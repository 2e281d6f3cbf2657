/* gpud's option table: the defaults and ranges of every flag, "--NAME:
 * why" for a value out of range, the checks across options, a usage that
 * names every option, and the argv a launcher emits from a filled struct
 * parsing back to the same struct (repeatable --freeze, unset NAN
 * defaults). */
#include "gpud/options.h"

#include "tests/common/adopt_strings.h"
#include "tests/common/argv_words.h"
#include "tests/common/emitted_argv.h"
#include "tests/common/usage_text.h"
#include "tests/proto/check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BASE "--loader ipc://l --reducer ipc://r --model resnet18 "

static int parse_words(const char *words, gpud_options_t *o)
{
    char *argv[96];
    int argc = argv_words("gpud", words, argv, 96);
    memset(o, 0, sizeof *o);
    return gpud_options_parse(o, argc, argv);
}

/* What the parse said on stderr, in text (cap bytes). */
static int parse_stderr(const char *words, char *text, size_t cap)
{
    gpud_options_t o;
    FILE *tmp = tmpfile();
    fflush(stderr);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    int rc = parse_words(words, &o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(text, 1, cap - 1, tmp);
    text[n] = '\0';
    fclose(tmp);
    return rc;
}

static void test_defaults(void)
{
    gpud_options_t o;
    CHECK(parse_words(BASE "--weights w.safetensors", &o) == 0);
    CHECK_STR(o.loader, "ipc://l");
    CHECK_STR(o.reducer, "ipc://r");
    CHECK_STR(o.model, "resnet18");
    CHECK_STR(o.weights, "w.safetensors");
    CHECK_STR(o.backend, "cpu");
    CHECK(o.channels.n == 4 && o.channels.v[0] == 16 && o.channels.v[3] == 640);
    CHECK(o.num_classes == 0 && o.in_channels == 0 && o.threads == 0 && o.micro_batch == 0);
    CHECK(o.mean.n == 0 && o.std.n == 0 && o.normalize == NULL && o.name == NULL);
    CHECK(o.window == 2 && o.rank == -1 && o.join_timeout_s == 60 && o.fault_after == -1);
    CHECK(!o.verbose && !o.train);
    CHECK_STR(o.optimizer, "sgd");
    CHECK_STR(o.lr_schedule, "none");
    CHECK(o.lr == 0.01 && o.gamma == 0.1 && o.eta_min == 0 && o.label_smoothing == 0);
    CHECK(isnan(o.momentum) && isnan(o.weight_decay) && isnan(o.dampening) && isnan(o.eps));
    CHECK(o.betas.n == 0 && o.freeze.n == 0 && o.freeze_bn.n == 0);
    CHECK(o.step_size == 0 && o.t_max == 0 && o.warmup_epochs == 0);
    CHECK(o.warmup_start_factor == 0 && o.seed == 0);
    CHECK_STR(o.ring_bind, "tcp://127.0.0.1:0");
    CHECK(o.ring_timeout_s == 60 && o.checkpoint_every == 1 && o.fault_at_step == -1 &&
          o.fault_hold_epoch == -1);
    CHECK(o.commit_timeout_s == 0);   /* sentinel: 2 x --ring-timeout */
    CHECK(o.global_batch == 0 && !o.checkpoint && !o.save_weights && !o.resume);
    CHECK(parse_words(BASE "--train", &o) == 0); /* --weights optional with --train */
}

static void test_errors(void)
{
    gpud_options_t o;
    char text[4096];
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(parse_stderr(BASE "--weights w --window 65", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "--window: 65 is out of range [1, 64]") != NULL, "%s", text);
    CHECK(parse_stderr(BASE "--weights w --num-classes 0", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "--num-classes: 0 is out of range") != NULL, "%s", text);
    CHECK(parse_words(BASE, &o) == -1); /* --weights is required without --train */
    CHECK(parse_words("--loader a --reducer b --weights w", &o) == -1); /* --model */
    CHECK(parse_words(BASE "--weights w --window 0", &o) == -1);
    CHECK(parse_words(BASE "--weights w --rank 65536", &o) == -1);
    CHECK(parse_words(BASE "--weights w --in-channels 4", &o) == -1);
    CHECK(parse_words(BASE "--weights w --channels 16,160,320", &o) == -1);
    CHECK(parse_words(BASE "--weights w --mean 0.5,0.5,0.5,0.5,0.5", &o) == -1);
    CHECK(parse_words(BASE "--weights w --normalize zscore", &o) == -1);
    CHECK(parse_words(BASE "--weights w --resume ckpt", &o) == -1); /* needs --train */
    CHECK(parse_words(BASE "--train --betas 0.9", &o) == -1);
    CHECK(parse_words(BASE "--train --eps 2", &o) == -1);
    CHECK(parse_words(BASE "--train --warmup-start-factor 0", &o) == -1);
    CHECK(parse_words(BASE "--train --label-smoothing 1.5", &o) == -1);
    CHECK(parse_words(BASE "--train --optimizer lamb", &o) == -1);
    CHECK(parse_words(BASE "--weights w --optimizer lamb", &o) == 0); /* eval ignores it */
    CHECK(parse_words(BASE "--train --lr-schedule step", &o) == -1);
    CHECK(parse_words(BASE "--train --lr-schedule step --step-size 3", &o) == 0);
    CHECK(parse_words(BASE "--train --lr-schedule cosine", &o) == -1);
    CHECK(parse_words(BASE "--train --lr-schedule cosine --t-max 9", &o) == 0);
    CHECK(parse_words(BASE "--train --lr-schedule cyclic", &o) == -1);
    CHECK(parse_words(BASE "--weights w --no-such-flag", &o) == -1);
    CHECK(parse_stderr(BASE "--weights w --precision fp8", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "gpud: --precision fp8: fp32, bf16 or fp16") != NULL, "%s", text);
    CHECK(parse_words(BASE "--train --precision fp16 --backend cuda", &o) == 0);
    CHECK(parse_words(BASE "--train --precision fp16 --loss-scale 1024", &o) == 0 &&
          o.loss_scale == 1024 && o.loss_scale_growth == 2000);
    CHECK(parse_stderr(BASE "--train --precision fp16 --loss-scale 1000", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "gpud: --loss-scale 1000: a power of two") != NULL, "%s", text);
    /* bf16 on cuda: eval (its tensor-core inference plan) and training */
    CHECK(parse_words(BASE "--weights w --precision bf16 --backend cuda", &o) == 0);
    CHECK(parse_words(BASE "--train --precision bf16 --backend cuda", &o) == 0);
    CHECK(parse_words(BASE "--train --precision bf16", &o) == 0);   /* cpu trains in bf16 */
    CHECK(parse_words(BASE "--weights w --precision bf16", &o) == 0 &&
          strcmp(o.precision, "bf16") == 0);
    CHECK(parse_words(BASE "--weights w", &o) == 0 && strcmp(o.precision, "fp32") == 0);
    char many[1024] = BASE "--train";
    for (int i = 0; i < 17; i++)
        strcat(many, " --freeze p");
    CHECK(parse_words(many, &o) == -1); /* at most 16 prefixes */
    CHECK(parse_words("--help", &o) == 1);
    /* --join: a training rank's reducerd endpoint, the same as --reducer */
    CHECK(parse_words("--loader l --join j --model wideresnet --train", &o) == 0);
    CHECK(strcmp(o.reducer, "j") == 0 && strcmp(o.join, "j") == 0);
    CHECK(parse_words(BASE "--train --join ipc://r", &o) == 0);
    CHECK(parse_words(BASE "--train --join other", &o) == -1);
    CHECK(parse_words("--loader l --join j --model wideresnet --weights w", &o) == -1);
    /* the ranks on this host, for --threads' default: a bad count is a usage
     * error, unless both thread counts are given */
    setenv("LOCAL_WORLD_SIZE", "0", 1);
    CHECK(parse_stderr(BASE "--weights w", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "gpud: LOCAL_WORLD_SIZE=0: the number of ranks on this host") != NULL,
              "%s", text);
    CHECK(parse_words(BASE "--weights w --threads 2", &o) == -1);   /* decode threads' default */
    CHECK(parse_words(BASE "--weights w --threads 2 --decode-threads 2", &o) == 0);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    CHECK(parse_words(BASE "--weights w", &o) == 0 && o.threads == 0);   /* settled by gpud_new */
    unsetenv("LOCAL_WORLD_SIZE");
}

/* The settings a joiner must share with the job: job-wide flags only. */
static void test_job_config(void)
{
    gpud_options_t a, b;
    char ca[DDP_MAX_STR], cb[DDP_MAX_STR];
    CHECK(parse_words(BASE "--train --lr 0.1 --sync-bn --threads 2 --name x", &a) == 0);
    CHECK(parse_words(BASE "--train --lr 0.1 --sync-bn --threads 1 --name y --window 4", &b) == 0);
    gpud_options_job_config(&a, ca, sizeof ca);
    gpud_options_job_config(&b, cb, sizeof cb);
    CHECK(strcmp(ca, cb) == 0);   /* threads, names, windows are a rank's own */
    CHECK(strstr(ca, "--model resnet18") && strstr(ca, "--lr 0.1") && strstr(ca, "--sync-bn"));
    CHECK(parse_words(BASE "--train --lr 0.2 --sync-bn", &b) == 0);
    gpud_options_job_config(&b, cb, sizeof cb);
    CHECK(strcmp(ca, cb) != 0);
    /* a joiner computing in another precision is refused */
    CHECK(parse_words(BASE "--train --lr 0.1 --sync-bn --precision bf16", &b) == 0);
    gpud_options_job_config(&b, cb, sizeof cb);
    CHECK(strcmp(ca, cb) != 0 && strstr(cb, "--precision bf16"));
    /* and one with another --chunk (bitwise training: the chunks are the job's) */
    CHECK(parse_words(BASE "--train --lr 0.1 --sync-bn --chunk 8", &b) == 0 && b.chunk == 8);
    gpud_options_job_config(&b, cb, sizeof cb);
    CHECK(strcmp(ca, cb) != 0 && strstr(cb, "--chunk 8"));
}

/* --chunk: training only, a divisor of the global batch; on cuda, not
 * with engines timed per gpud. */
static void test_chunk(void)
{
    gpud_options_t o;
    char text[4096];
    CHECK(parse_words(BASE "--train --chunk 8 --global-batch-size 96", &o) == 0 && o.chunk == 8);
    CHECK(parse_words(BASE "--train --chunk 8", &o) == 0);   /* G unknown here: ddpipe checks */
    CHECK(parse_stderr(BASE "--train --chunk 8 --global-batch-size 100", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "not a multiple") && strstr(text, "96 or 104"), "%s", text);
    CHECK(parse_words(BASE "--train --chunk 8 --backend cuda", &o) == 0 && o.chunk == 8);
    setenv("DDPIPE_CUDNN_TUNE", "1", 1);
    CHECK(parse_stderr(BASE "--train --chunk 8 --backend cuda", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "DDPIPE_CUDNN_TUNE=1 would let each gpud time its own") != NULL,
              "%s", text);
    CHECK(parse_words(BASE "--train --chunk 8 --backend cpu", &o) == 0);   /* cuda's rule */
    unsetenv("DDPIPE_CUDNN_TUNE");
    setenv("DDPIPE_CUDA_ALGO", "find", 1);
    CHECK(parse_stderr(BASE "--train --chunk 8 --backend cuda", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "DDPIPE_CUDA_ALGO=find") != NULL, "%s", text);
    CHECK(parse_words(BASE "--train --backend cuda", &o) == 0);   /* without --chunk */
    unsetenv("DDPIPE_CUDA_ALGO");
    CHECK(parse_stderr(BASE "--weights w --chunk 8", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "--chunk (bitwise training) needs --train") != NULL, "%s", text);
}

/* --decode cpu|gpu: gpu on cuda, not with --chunk */
static void test_decode(void)
{
    gpud_options_t o;
    char text[4096];
    CHECK(parse_words(BASE "--weights w", &o) == 0 && strcmp(o.decode, "cpu") == 0);
    CHECK(parse_words(BASE "--weights w --backend cuda --decode gpu", &o) == 0 &&
          strcmp(o.decode, "gpu") == 0);
    CHECK(parse_stderr(BASE "--weights w --decode gpu", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "--decode gpu decodes on the cuda backend's device: add --backend "
                           "cuda") != NULL, "%s", text);
    CHECK(parse_stderr(BASE "--weights w --backend cuda --decode tpu", text, sizeof text) == -1);
    CHECK_MSG(strstr(text, "--decode tpu: cpu or gpu") != NULL, "%s", text);
    CHECK(parse_words(BASE "--train --backend cuda --decode gpu", &o) == 0);
    CHECK(parse_stderr(BASE "--train --backend cuda --decode gpu --chunk 8", text,
                       sizeof text) == -1);
    CHECK_MSG(strstr(text, "--decode gpu with bitwise training (--chunk)") != NULL, "%s", text);
}

static void test_usage_names_every_option(void)
{
    int options, unnamed;
    char *text = usage_text(&gpud_options_table, &options, &unnamed);
    CHECK(unnamed == 0);
    CHECK(options == 64); /* 62 of gpud's own, --curve-dir and --insecure */
    CHECK(strstr(text, "(default nan)") == NULL); /* an unset default shows none */
    free(text);
}

/* What ddpipe train starts a rank with, emitted and parsed back. */
static void test_emit_round_trip(void)
{
    gpud_options_t o, back;
    CHECK(parse_words(BASE "--train --name w0 --in-channels 1 --channels 8,16,32,64 "
                      "--mean 0.5 --std 0.25,0.5 --optimizer adamw --lr 0.003 "
                      "--weight-decay 0.05 --betas 0.8,0.99 --lr-schedule cosine --t-max 40 "
                      "--warmup-epochs 5 --label-smoothing 0.1 --sync-bn --chunk 4 --freeze layer1. "
                      "--freeze layer2. --freeze-bn features. --seed 7 --checkpoint ck "
                      "--resume ck --ring-timeout 30 --commit-timeout 40 --verbose",
                      &o) == 0);
    emitted_argv_t a = {.argv = {"gpud"}, .argc = 1};
    CHECK(options_emit(&gpud_options_table, &o, NULL, emitted_argv_add, &a) == 28);
    memset(&back, 0, sizeof back);
    CHECK(gpud_options_parse(&back, a.argc, a.argv) == 0);
    CHECK(adopt_strings(&gpud_options_table, &back, &o) == 0);
    CHECK(isnan(back.momentum) && back.weight_decay == 0.05);
    CHECK(memcmp(&back, &o, sizeof o) == 0);
    emitted_argv_free(&a);
    /* defaults and unset NAN values are never emitted */
    CHECK(parse_words(BASE "--weights w", &o) == 0);
    CHECK(options_emit(&gpud_options_table, &o, NULL, emitted_argv_add, &a) == 4);
    emitted_argv_free(&a);
}

int main(void)
{
    test_defaults();
    test_errors();
    test_chunk();
    test_decode();
    test_usage_names_every_option();
    test_job_config();
    test_emit_round_trip();
    return check_exit("test_options");
}
