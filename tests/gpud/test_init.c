/* Initial weights without a file (model_opts_t.init): the same seed gives
 * the same bytes, another seed other bytes; the distributions are
 * PyTorch's (seed WideResNet: torch defaults; resnet18: torchvision's
 * kaiming_normal(fan_out)); BatchNorm starts at 1/0/0/1; the model runs.
 * Then the start of a training job: two ranks with different seeds
 * (different processes, a real ring) end with rank 0's parameters and
 * buffers, and the BN-buffer broadcast moves only running stats. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpud/ring.h"
#include "gpud/trainer.h"
#include "gpud/model.h"
#include "tcheck.h"

static model_t *open_init(const char *arch, uint64_t seed, int small)
{
    model_opts_t o = {.arch = arch, .train = 1, .init = 1, .init_seed = seed, .threads = 1};
    if (small) {
        int ch[4] = {4, 8, 8, 12};
        memcpy(o.channels, ch, sizeof ch);
        o.n_channels = 4;
    }
    char err[512];
    model_t *m = model_new(&o, "cpu", NULL, err, sizeof err);
    REQUIRE(m, "model_new(%s, init seed %llu): %s", arch, (unsigned long long)seed, err);
    return m;
}

/* Every parameter and buffer, concatenated (model order). */
static float *flat_of(const model_t *m, size_t *n)
{
    size_t total = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        model_param_at(m, i, &p);
        total += p.numel;
    }
    float *v = malloc(total * sizeof *v);
    REQUIRE(v, "out of memory");
    size_t off = 0;
    for (int i = 0; i < model_param_count(m); i++) {
        model_param_t p;
        model_param_at(m, i, &p);
        memcpy(v + off, p.value, p.numel * sizeof *v);
        off += p.numel;
    }
    *n = total;
    return v;
}

static void stats(const model_t *m, const char *name, double *mean, double *var, double *maxabs)
{
    model_param_t p;
    REQUIRE(model_param_find(m, name, &p) == 0, "%s missing", name);
    double s = 0, s2 = 0, mx = 0;
    for (size_t i = 0; i < p.numel; i++) {
        s += p.value[i];
        s2 += (double)p.value[i] * p.value[i];
        mx = fabs(p.value[i]) > mx ? fabs(p.value[i]) : mx;
    }
    *mean = s / p.numel;
    *var = s2 / p.numel - *mean * *mean;
    *maxabs = mx;
}

static void check_all(const model_t *m, const char *name, float want)
{
    model_param_t p;
    REQUIRE(model_param_find(m, name, &p) == 0, "%s missing", name);
    for (size_t i = 0; i < p.numel; i++)
        if (p.value[i] != want) {
            CHECK(0, "%s[%zu] = %g, want %g", name, i, (double)p.value[i], (double)want);
            return;
        }
}

static void test_determinism(void)
{
    model_t *a = open_init("wideresnet", 42, 1), *b = open_init("wideresnet", 42, 1);
    model_t *c = open_init("wideresnet", 43, 1);
    size_t na, nb, nc;
    float *fa = flat_of(a, &na), *fb = flat_of(b, &nb), *fc = flat_of(c, &nc);
    CHECK(na == nb && memcmp(fa, fb, na * sizeof *fa) == 0, "seed 42 twice: different bytes");
    CHECK(na == nc && memcmp(fa, fc, na * sizeof *fa) != 0, "seeds 42 and 43: same bytes");
    CHECK(model_num_classes(a) == 10, "wideresnet default classes %d, want 10",
          model_num_classes(a));
    free(fa), free(fb), free(fc);
    model_destroy(&b);
    model_destroy(&c);

    /* the seed WideResNet: torch defaults */
    check_all(a, "block1.layer1.cbr.1.weight", 1.0f);
    check_all(a, "block1.layer1.cbr.1.bias", 0.0f);
    check_all(a, "block1.layer1.cbr.1.running_mean", 0.0f);
    check_all(a, "block1.layer1.cbr.1.running_var", 1.0f);
    double mean, var, mx;
    stats(a, "block5.layer2.cbr.0.weight", &mean, &var, &mx);   /* 12x12x3x3: fan_in 108 */
    double bound = 1.0 / sqrt(108.0);
    CHECK(mx <= bound, "conv |w| max %g > 1/sqrt(fan_in) %g", mx, bound);
    CHECK(fabs(var / (bound * bound / 3) - 1) < 0.15, "conv var %g, want U(-b,b)'s %g", var,
          bound * bound / 3);
    stats(a, "block1.scale.bias", &mean, &var, &mx);             /* fan_in 4 */
    CHECK(mx <= 0.5 && mx > 0, "scale bias max %g, want in (0, 1/sqrt(4)]", mx);
    stats(a, "fc.weight", &mean, &var, &mx);                     /* 10x12 */
    CHECK(mx <= 1.0 / sqrt(12.0), "fc |w| max %g > %g", mx, 1.0 / sqrt(12.0));

    /* the fresh model runs and gives finite logits */
    uint8_t px[2 * 28 * 28];
    for (size_t i = 0; i < sizeof px; i++)
        px[i] = (uint8_t)(i * 37);
    float logits[20];
    char err[512];
    REQUIRE(model_forward_u8(a, px, 2, 1, 28, 28, NULL, NULL, logits, err, sizeof err) == 0,
            "forward: %s", err);
    for (int i = 0; i < 20; i++)
        CHECK(isfinite(logits[i]), "logit %d = %g", i, (double)logits[i]);
    model_destroy(&a);
}

static void test_resnet(void)
{
    model_t *r = open_init("resnet18", 1, 0);
    CHECK(model_num_classes(r) == 1000, "resnet18 default classes %d", model_num_classes(r));
    double mean, var, mx;
    stats(r, "layer4.1.conv2.weight", &mean, &var, &mx);   /* 512x512x3x3, fan_out 4608 */
    double want = 2.0 / 4608.0;
    CHECK(fabs(var / want - 1) < 0.02 && fabs(mean) < 1e-3, "kaiming_normal(fan_out) var %g, "
          "want %g (mean %g)", var, want, mean);
    stats(r, "fc.weight", &mean, &var, &mx);
    CHECK(mx <= 1.0 / sqrt(512.0), "fc |w| max %g > 1/sqrt(512)", mx);
    check_all(r, "bn1.weight", 1.0f);
    check_all(r, "layer1.0.bn2.running_var", 1.0f);
    model_destroy(&r);
}

/* model_param_t.walk: the order the layers bind their parameters in (the
 * gradient buckets' guess at backward's order), not the arena's name
 * order: resnet18's conv1 first, then the blocks in order, fc last; the
 * WideResNet's input_block first although its name sorts after the
 * blocks'. */
static int walk_of(const model_t *m, const char *name)
{
    model_param_t p;
    return model_param_find(m, name, &p) == 0 ? p.walk : -2;
}

static void test_walk(void)
{
    model_t *r = open_init("resnet18", 1, 0);
    int c1 = walk_of(r, "conv1.weight"), b1 = walk_of(r, "bn1.weight"),
        l1 = walk_of(r, "layer1.0.conv1.weight"), l4 = walk_of(r, "layer4.1.bn2.bias"),
        fc = walk_of(r, "fc.weight");
    CHECK(c1 == 0 && b1 > c1 && l1 > b1 && l4 > l1 && fc > l4, "resnet18 walk: conv1 %d, bn1 %d, "
          "layer1.0.conv1 %d, layer4.1.bn2.bias %d, fc %d", c1, b1, l1, l4, fc);
    model_destroy(&r);
    model_t *w = open_init("wideresnet", 1, 1);
    int in = walk_of(w, "input_block.cbr.0.weight"), b6 = walk_of(w, "block6.layer2.cbr.0.weight");
    fc = walk_of(w, "fc.weight");
    CHECK(in == 0 && b6 > in && fc > b6, "wideresnet walk: input_block %d, block6 %d, fc %d", in,
          b6, fc);
    model_param_t p;
    CHECK(model_param_at(w, model_param_count(w) - 1, &p) == 0 &&
              strncmp(p.name, "input_block", 11) == 0,
          "the arena's last tensor is %s, not the input_block's (name order)", p.name);
    model_destroy(&w);
}

/* ------------------------------------------------ rank 0's broadcast */

static char s_dir[128];

static void ep(char *buf, size_t len, int rank) { snprintf(buf, len, "ipc://%s/r%d", s_dir, rank); }

static int write_flat(const model_t *m, const char *tag, int rank)
{
    size_t n;
    float *v = flat_of(m, &n);
    char path[256];
    snprintf(path, sizeof path, "%s/%s%d", s_dir, tag, rank);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(v, sizeof *v, n, f) == n;
    if (f)
        fclose(f);
    free(v);
    return ok ? 0 : -1;
}

/* One rank: init from its own seed, broadcast all, dump; set its BN
 * buffers to a rank-specific value, broadcast buffers, dump. */
static int rank_main(int rank)
{
    model_t *m = open_init("wideresnet", 100 + (uint64_t)rank, 1);
    trainer_cfg_t cfg = {.optim = optim_cfg_default(OPTIM_SGD), .lr = 0.1, .seed = 1};
    char err[512], mine[200], next[200];
    trainer_t *t = trainer_new(m, &cfg, err, sizeof err);
    ep(mine, sizeof mine, rank);
    ep(next, sizeof next, 1 - rank);
    allreduce_t *ar = t ? allreduce_new(rank, 2, mine, next, err, sizeof err) : NULL;
    if (!ar) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    int rc = trainer_broadcast(t, ar, TRAINER_ALL, 20000, err, sizeof err);
    rc = rc ? rc : write_flat(m, "all", rank);
    for (int i = 0; rc == 0 && i < model_param_count(m); i++) {
        model_param_t p;
        model_param_at(m, i, &p);
        float v = strstr(p.name, "running_") ? 3.0f + (float)rank : (p.grad ? 7.0f + rank : 0);
        if (strstr(p.name, "running_") || (rank == 1 && p.grad))
            for (size_t k = 0; k < p.numel; k++)
                p.value[k] = v;
    }
    rc = rc ? rc : trainer_broadcast(t, ar, TRAINER_BN_BUFFERS, 20000, err, sizeof err);
    rc = rc ? rc : write_flat(m, "bn", rank);
    if (rc)
        fprintf(stderr, "rank %d: %s\n", rank, err);
    allreduce_destroy(&ar);
    trainer_destroy(&t);
    model_destroy(&m);
    return rc ? 1 : 0;
}

static float *read_flat(const char *tag, int rank, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s%d", s_dir, tag, rank);
    float *v = malloc(n * sizeof *v);
    FILE *f = fopen(path, "rb");
    size_t got = f && v ? fread(v, sizeof *v, n, f) : 0;
    if (f)
        fclose(f);
    REQUIRE(got == n, "%s: %zu of %zu floats", path, got, n);
    return v;
}

static void test_broadcast(void)
{
    snprintf(s_dir, sizeof s_dir, "/tmp/ddpipe-init-%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", s_dir);
    REQUIRE(system(cmd) == 0, "mkdir %s", s_dir);
    pid_t pid[2];
    for (int r = 0; r < 2; r++)
        if ((pid[r] = fork()) == 0)
            exit(rank_main(r));
    for (int r = 0; r < 2; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed", r);
    }
    model_t *ref = open_init("wideresnet", 100, 1);   /* rank 0's seed */
    size_t n;
    float *want = flat_of(ref, &n), *a0 = read_flat("all", 0, n), *a1 = read_flat("all", 1, n);
    CHECK(memcmp(a0, want, n * sizeof *want) == 0, "rank 0 changed by the broadcast");
    CHECK(memcmp(a1, want, n * sizeof *want) == 0, "rank 1 does not hold rank 0's init");
    float *b0 = read_flat("bn", 0, n), *b1 = read_flat("bn", 1, n);
    size_t off = 0;
    for (int i = 0; i < model_param_count(ref); i++) {
        model_param_t p;
        model_param_at(ref, i, &p);
        int buf = strstr(p.name, "running_") != NULL;
        for (size_t k = 0; k < p.numel; k++) {
            float w1 = buf ? 3.0f : (p.grad ? 8.0f : want[off + k]);
            if (b1[off + k] != w1 || (buf && b0[off + k] != 3.0f)) {
                CHECK(0, "%s[%zu]: rank 1 %g (want %g), rank 0 %g", p.name, k,
                      (double)b1[off + k], (double)w1, (double)b0[off + k]);
                break;
            }
        }
        off += p.numel;
    }
    free(want), free(a0), free(a1), free(b0), free(b1);
    model_destroy(&ref);
    snprintf(cmd, sizeof cmd, "rm -rf %s", s_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s_dir);
}

int main(void)
{
    test_determinism();
    test_resnet();
    test_walk();
    test_broadcast();
    return tc_done("test_init");
}
