/* gpud_cuda_tune (GPU; gpud_cuda_tune_emu on the kernel emulator): cuDNN
 * engines chosen by timing and kept in a plans file (gpud/cuda/cuda_tune.c,
 * cuda_fused.c; docs/CUDA.md "Tuned engines"), on the seed WideResNet's
 * inference plan (8,16,24,32 golden), fp32 and bf16 NHWC:
 *   1. DDPIPE_CUDNN_TUNE=1 with DDPIPE_CUDNN_PLANS=F: every plan built is
 *      timed, F is written (its device and cuDNN lines, one plan a shape,
 *      each an admissible engine: on the emulator engine 1 or 2 at its own
 *      rank, never 0, the nondeterministic one); the logits are those of
 *      heuristics' engines within 1e-5 (fp32; bf16 5e-3: another engine,
 *      other sums' order), the same top-1 (fp32);
 *   2. DDPIPE_CUDNN_PLANS=F alone: every plan from F, none timed, the
 *      tuning run's logits bit for bit, twice (the same engines);
 *   3. F edited: one entry's engine made unknown is refused (one refusal,
 *      the rest from F); on the emulator, every entry moved to rank 2
 *      (engine 2) is taken (a file whose rank were ignored would find
 *      engine 1 there and refuse it), but refused under DDPIPE_CUDNN_RTC=0
 *      (the fake's engine 2 is runtime-compiled), and one moved to rank 0
 *      (engine 0, nondeterministic) refused; a tuning run over those
 *      entries adds each plan serialized (the fake's engine 2 serializes,
 *      as cuDNN's runtime-compiled engines do), a run on that file loads
 *      every plan instead of finalizing it, with the same bits, and a
 *      serialized plan made unreadable is built from its configuration;
 *   4. a malformed F, and one timed on another device, are refused whole:
 *      heuristics' engines, their logits.
 * On a device, where each model's plans are compiled again (a second of
 * NVRTC a runtime-compiled plan), the parsing cases (2's second run, 4) are
 * left to the emulator: it is 1, 2, 3's unknown engine and the time it
 * takes that only a device can show.
 * Exits 77 when no CUDA device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpud/cuda/cuda_backend.h"
#include "gpud/cuda/cuda_fused.h"
#include "../golden_io.h"

static const int SMALL[4] = {8, 16, 24, 32};

/* the logits of a fresh model (its plans built under the current
 * environment) and what its plans did (counts after - before) */
static float *run(int bf16, const safetensors_t *io, cu_fused_counts_t *d, int *n, int *nc)
{
    char path[1024], err[512] = "";
    model_opts_t o = {.arch = "wideresnet", .threads = 2, .bf16 = bf16, .n_channels = 4};
    memcpy(o.channels, SMALL, sizeof o.channels);
    cu_fused_counts_t c0 = cu_fused_counts();
    model_t *m = model_new(&o, "cuda", tc_src("tests/golden/wrn_small.safetensors", path,
                                               sizeof path), err, sizeof err);
    REQUIRE(m, "model_new(wideresnet, cuda, bf16 %d): %s", bf16, err);
    *nc = model_num_classes(m);
    float *y = golden_forward(m, io, "input_u8", 0, n);
    model_destroy(&m);   /* the backend's end: a tuning run writes its file here */
    cu_fused_counts_t c1 = cu_fused_counts();
    *d = (cu_fused_counts_t){c1.fused - c0.fused, c1.legacy - c0.legacy, c1.off - c0.off,
                             c1.run_failed - c0.run_failed, c1.shared - c0.shared,
                             c1.from_file - c0.from_file, c1.timed - c0.timed,
                             c1.file_refused - c0.file_refused, c1.loaded - c0.loaded};
    return y;
}

typedef struct {
    char device[256];
    long cudnn;
    int n;
    int rank[64];
    long long engine[64];
    char line[64][512];     /* each plan line without its "rank ..." tail */
} plans_t;

/* F parsed (REQUIRE: it is what the backend wrote) */
static void read_plans(const char *path, plans_t *p)
{
    memset(p, 0, sizeof *p);
    p->cudnn = -1;
    FILE *f = fopen(path, "r");
    REQUIRE(f, "plans file %s not written", path);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "device ", 7) == 0)
            snprintf(p->device, sizeof p->device, "%.255s", line + 7);
        else if (strncmp(line, "cudnn ", 6) == 0)
            p->cudnn = strtol(line + 6, NULL, 10);
        else if (strncmp(line, "plan ", 5) == 0) {
            REQUIRE(p->n < 64, "too many plans");
            char *r = strstr(line, " rank ");
            REQUIRE(r && sscanf(r, " rank %d engine %lld", &p->rank[p->n], &p->engine[p->n]) == 2,
                    "plan line: %s", line);
            *r = '\0';
            snprintf(p->line[p->n], sizeof p->line[p->n], "%.511s", line);
            p->n++;
        }
    }
    fclose(f);
}

static void write_plans(const char *path, const plans_t *p, const char *device)
{
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fprintf(f, "# edited by gpud_cuda_tune\ndevice %s\ncudnn %ld\n", device, p->cudnn);
    for (int i = 0; i < p->n; i++)
        fprintf(f, "%s rank %d engine %lld ms 0.1\n", p->line[i], p->rank[i], p->engine[i]);
    fclose(f);
}

/* The file's whole text (REQUIRE). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    REQUIRE(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    REQUIRE(s && fread(s, 1, (size_t)n, f) == (size_t)n, "read %s", path);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* On the emulator, with every entry of `file` at the fake's runtime-compiled
 * engine 2 and no serialized plan: a tuning run adds each plan serialized
 * (json HEX), a run on the file alone loads every plan instead of
 * finalizing it, with the bits of the tuned run; a serialized plan made
 * unreadable is built from its configuration instead (one fewer loaded,
 * none refused). */
static void check_serialized(const char *label, int bf16, const safetensors_t *io,
                             const char *file, unsigned long built, const float *tuned,
                             size_t bytes)
{
    cu_fused_counts_t d;
    int n2 = 0, nc = 0;
    setenv("DDPIPE_CUDNN_TUNE", "1", 1);
    free(run(bf16, io, &d, &n2, &nc));
    unsetenv("DDPIPE_CUDNN_TUNE");
    char *text = slurp(file);
    int with = 0;
    for (const char *at = text; (at = strstr(at, " json ")) != NULL; at++)
        with++;
    CHECK(d.from_file == built && d.timed == 0 && with == (int)built,
          "%s: a tuning run over engine-2 entries: %lu from the file, %lu timed, %d of %lu "
          "serialized", label, d.from_file, d.timed, with, built);
    float *y = run(bf16, io, &d, &n2, &nc);
    printf("%-5s serialized plans: %d written, %lu loaded of %lu\n", label, with, d.loaded, built);
    CHECK(d.loaded == built && d.from_file == built && d.file_refused == 0,
          "%s: %lu of %lu serialized plans loaded (%lu from the file, %lu refused)", label,
          d.loaded, built, d.from_file, d.file_refused);
    CHECK(memcmp(y, tuned, bytes) == 0, "%s: loaded plans' logits differ", label);
    free(y);
    /* the first serialized plan made unreadable: its hex replaced by "00" */
    char *j = strstr(text, " json ");
    REQUIRE(j, "no json field");
    char *end = strchr(j + 6, '\n');
    REQUIRE(end, "json field without its line's end");
    FILE *f = fopen(file, "w");
    REQUIRE(f, "cannot write %s", file);
    fwrite(text, 1, (size_t)(j + 6 - text), f);
    fputs("00", f);
    fputs(end, f);
    fclose(f);
    free(text);
    y = run(bf16, io, &d, &n2, &nc);
    CHECK(d.loaded == built - 1 && d.from_file == built && d.file_refused == 0,
          "%s: an unreadable serialized plan: %lu loaded, %lu from the file, %lu refused",
          label, d.loaded, d.from_file, d.file_refused);
    CHECK(memcmp(y, tuned, bytes) == 0, "%s: logits differ with one plan built", label);
    free(y);
}

static void check(const char *label, int bf16, const char *dir, int emulated)
{
    double tol = bf16 ? 5e-3 : 1e-5;
    char file[512];
    snprintf(file, sizeof file, "%s/plans-%s.txt", dir, bf16 ? "bf16" : "fp32");
    safetensors_t *io = golden_open("tests/golden/wrn_small_io.safetensors");
    int n = 0, nc = 0, n2 = 0;
    cu_fused_counts_t d;
    unsetenv("DDPIPE_CUDNN_PLANS");
    unsetenv("DDPIPE_CUDNN_TUNE");
    float *heur = run(bf16, io, &d, &n, &nc);
    size_t total = (size_t)n * nc, bytes = total * sizeof(float);
    unsigned long built = d.fused - d.shared;
    REQUIRE(built > 0, "%s: no plan built on cuDNN's graph API (legacy %lu)", label, d.legacy);
    CHECK(d.timed == 0 && d.from_file == 0, "%s: plans timed or read without the variables",
          label);

    /* 1. tuning, written */
    setenv("DDPIPE_CUDNN_TUNE", "1", 1);
    setenv("DDPIPE_CUDNN_PLANS", file, 1);
    unlink(file);
    float *tuned = run(bf16, io, &d, &n2, &nc);
    REQUIRE(n2 == n, "%s: batch %d vs %d", label, n2, n);
    printf("%-5s tuning: %lu plans built, %lu timed, %lu from a file\n", label,
           d.fused - d.shared, d.timed, d.from_file);
    CHECK(d.fused - d.shared == built && d.timed == built && d.from_file == 0,
          "%s: %lu of %lu plans timed (%lu from a file)", label, d.timed, built, d.from_file);
    plans_t p;
    read_plans(file, &p);
    CHECK(p.n == (int)built && p.device[0] && p.cudnn > 0,
          "%s: the plans file has %d plans for %lu shapes (device '%s', cudnn %ld)", label, p.n,
          built, p.device, p.cudnn);
    for (int i = 0; i < p.n; i++)
        CHECK(!emulated || ((p.engine[i] == 1 || p.engine[i] == 2) && p.rank[i] == p.engine[i]),
              "%s: plan %d names engine %lld at rank %d (the fake's admissible engines: 1, 2 at "
              "their own ranks)", label, i, p.engine[i], p.rank[i]);
    double e = golden_rel_err(tuned, heur, total);
    int diff = 0;
    for (int i = 0; i < n; i++)
        diff += golden_argmax(tuned + (size_t)i * nc, nc) !=
                golden_argmax(heur + (size_t)i * nc, nc);
    printf("%-5s tuned vs heuristics' engines: %.3g (tol %.0e), top-1 differs on %d of %d\n",
           label, e, tol, diff, n);
    /* bf16: another engine's sums may round a near tie's logit the other
     * way (printed above, as gpud_cuda_fused does) */
    CHECK(e <= tol && (diff == 0 || bf16), "%s: tuned engines' logits %.3g from heuristics' "
          "(%d top-1)", label, e, diff);

    /* 2. the file alone: the same engines, the same bits; every plan the
     * tuning run serialized (its runtime-compiled engines') loaded */
    char *text = slurp(file);
    unsigned long serialized = 0;
    for (const char *at = text; (at = strstr(at, " json ")) != NULL; at++)
        serialized++;
    free(text);
    unsetenv("DDPIPE_CUDNN_TUNE");
    for (int k = 0; k < (emulated ? 2 : 1); k++) {
        float *again = run(bf16, io, &d, &n2, &nc);
        if (k == 0)
            printf("%-5s the file alone: %lu plans from it, %lu of them loaded serialized\n",
                   label, d.from_file, d.loaded);
        CHECK(d.from_file == built && d.timed == 0 && d.file_refused == 0,
              "%s: %lu of %lu plans from the file, %lu timed, %lu refused", label, d.from_file,
              built, d.timed, d.file_refused);
        CHECK(d.loaded == serialized, "%s: %lu of the file's %lu serialized plans loaded "
              "(the log says why not)", label, d.loaded, serialized);
        CHECK(memcmp(again, tuned, bytes) == 0, "%s: the plans file's run %d differs from the "
              "tuning run's bits", label, k + 1);
        free(again);
    }

    /* 3. edited entries */
    plans_t q = p;
    q.engine[0] = 987654;   /* no cuDNN engine has that global index */
    write_plans(file, &q, p.device);
    free(run(bf16, io, &d, &n2, &nc));
    CHECK(d.file_refused == 1 && d.from_file == built - 1,
          "%s: an unknown engine: %lu refused, %lu of %lu from the file", label, d.file_refused,
          d.from_file, built);
    if (emulated) {
        q = p;
        for (int i = 0; i < q.n; i++)
            q.rank[i] = 2, q.engine[i] = 2;
        write_plans(file, &q, p.device);
        free(run(bf16, io, &d, &n2, &nc));
        CHECK(d.from_file == built && d.file_refused == 0,
              "%s: rank 2 (engine 2) entries: %lu of %lu from the file, %lu refused", label,
              d.from_file, built, d.file_refused);
        /* the fake's engine 2 compiles at finalize: passed over without RTC */
        setenv("DDPIPE_CUDNN_RTC", "0", 1);
        free(run(bf16, io, &d, &n2, &nc));
        unsetenv("DDPIPE_CUDNN_RTC");
        CHECK(d.from_file == 0 && d.file_refused == built,
              "%s: runtime-compiled entries under DDPIPE_CUDNN_RTC=0: %lu refused of %lu, %lu "
              "taken", label, d.file_refused, built, d.from_file);
        check_serialized(label, bf16, io, file, built, tuned, bytes);
        q.rank[0] = 0, q.engine[0] = 0;   /* the nondeterministic engine */
        write_plans(file, &q, p.device);
        free(run(bf16, io, &d, &n2, &nc));
        CHECK(d.file_refused == 1 && d.from_file == built - 1,
              "%s: a nondeterministic engine in the file: %lu refused, %lu from it", label,
              d.file_refused, d.from_file);
    }

    /* 4. refused whole: malformed, another device (the file's parsing: on
     * the emulator only, where a model's plans cost nothing to build) */
    FILE *f = fopen(file, "a");
    REQUIRE(f, "append to %s", file);
    fputs("plan 1 2 three\n", f);
    fclose(f);
    for (int k = 0; k < (emulated ? 2 : 0); k++) {
        if (k == 1)
            write_plans(file, &p, "Another GPU");
        float *y = run(bf16, io, &d, &n2, &nc);
        CHECK(d.from_file == 0 && d.timed == 0 && d.file_refused == 0,
              "%s: a %s plans file was used (%lu from it)", label,
              k ? "another device's" : "malformed", d.from_file);
        CHECK(memcmp(y, heur, bytes) == 0, "%s: a refused file's run is not heuristics' bits",
              label);
        free(y);
    }
    unsetenv("DDPIPE_CUDNN_PLANS");
    unlink(file);
    free(heur);
    free(tuned);
    safetensors_destroy(&io);
}

int main(void)
{
    if (cuda_device_count() == 0) {
        printf("gpud_cuda_tune: no CUDA device, skipped\n");
        return 77;
    }
    unsetenv("DDPIPE_CUDA_PRECISION");   /* fp32: no TF32 engines */
    unsetenv("DDPIPE_CUDNN_GRAPH");
    /* 3 configurations a shape: a device finalizes each (runtime-compiled
     * engines take up to a second), and 3 already hold a choice */
    setenv("DDPIPE_CUDNN_TUNE_MAX", "3", 1);
    char dir[] = "/tmp/ddpipe-tune-XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp");
    int emulated = getenv("DDPIPE_TEST_EMULATED") != NULL;
    check("fp32", 0, dir, emulated);
    check("bf16", 1, dir, emulated);
    rmdir(dir);
    return tc_done("gpud_cuda_tune");
}
