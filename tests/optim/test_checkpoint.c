/* test_checkpoint — gpud/checkpoint: a save/load round trip restores the
 * model, optimizer state (SGD momentum, Adam amsgrad moments, NovoGrad's
 * scalar moments), counters, RNG and sampler bytes exactly, so a resumed run
 * continues bit-identically; missing, truncated, corrupt and mismatched
 * files fail with an error naming the file or tensor and change nothing. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpud/checkpoint.h"
#include "tests/gpud/tcheck.h"

enum { CONV, RMEAN, NBT, FCW, FCB, NT };

typedef struct {
    float conv[4 * 2 * 3 * 3], rmean[4], fcw[3 * 8], fcb[3];
    int64_t nbt;
    float g_conv[72], g_fcw[24], g_fcb[3];
    ckpt_tensor_t t[NT];
} net_t;

static char dir[256];

static void net_init(net_t *n, unsigned seed)
{
    memset(n, 0, sizeof *n);
    float *arrs[] = {n->conv, n->rmean, n->fcw, n->fcb};
    size_t lens[] = {72, 4, 24, 3};
    for (int a = 0; a < 4; a++)
        for (size_t i = 0; i < lens[a]; i++) {
            seed = seed * 1664525u + 1013904223u;
            arrs[a][i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
        }
    n->nbt = 1234;
    n->t[CONV] = (ckpt_tensor_t){"conv.weight", ST_F32, 4, {4, 2, 3, 3}, n->conv};
    n->t[RMEAN] = (ckpt_tensor_t){"bn.running_mean", ST_F32, 1, {4}, n->rmean};
    n->t[NBT] = (ckpt_tensor_t){"bn.num_batches_tracked", ST_I64, 0, {0}, &n->nbt};
    n->t[FCW] = (ckpt_tensor_t){"fc.weight", ST_F32, 2, {3, 8}, n->fcw};
    n->t[FCB] = (ckpt_tensor_t){"fc.bias", ST_F32, 1, {3}, n->fcb};
}

static void make_grads(net_t *n, unsigned seed)
{
    float *arrs[] = {n->g_conv, n->g_fcw, n->g_fcb};
    size_t lens[] = {72, 24, 3};
    for (int a = 0; a < 3; a++)
        for (size_t i = 0; i < lens[a]; i++) {
            seed = seed * 22695477u + 1u;
            arrs[a][i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
        }
}

static optim_t *make_optim(const optim_cfg_t *cfg, net_t *n)
{
    char err[256];
    optim_t *o = optim_new(cfg, err, sizeof err);
    REQUIRE(o, "%s", err);
    REQUIRE(optim_add_param(o, "conv.weight", n->conv, n->g_conv, 4, n->t[CONV].shape, true, err,
                            sizeof err) == 0, "%s", err);
    REQUIRE(optim_add_param(o, "fc.weight", n->fcw, n->g_fcw, 2, n->t[FCW].shape, true, err,
                            sizeof err) == 1, "%s", err);
    REQUIRE(optim_add_param(o, "fc.bias", n->fcb, n->g_fcb, 1, n->t[FCB].shape, false, err,
                            sizeof err) == 2, "%s", err);
    return o;
}

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static int same_state(const optim_t *a, const optim_t *b)
{
    static const char *const names[] = {"momentum_buffer", "exp_avg", "exp_avg_sq",
                                        "max_exp_avg_sq"};
    int same = optim_param_count(a) == optim_param_count(b);
    for (int i = 0; same && i < optim_param_count(a); i++) {
        same = optim_param_steps(a, i) == optim_param_steps(b, i);
        for (int s = 0; s < 4 && same; s++) {
            int64_t na = 0, nb = 0;
            const float *x = optim_state(a, i, names[s], &na), *y = optim_state(b, i, names[s], &nb);
            same = na == nb && (!x) == (!y) && (!x || memcmp(x, y, (size_t)na * 4) == 0);
        }
    }
    return same;
}

/* Save after 2 steps, restore into fresh objects, take a 3rd step on both. */
static void roundtrip(const optim_cfg_t *cfg, const char *label)
{
    char path[512], err[512];
    path_of(path, sizeof path, "rt.safetensors");
    net_t a, b;
    net_init(&a, 1);
    net_init(&b, 99);   /* different weights: the load must overwrite all */
    optim_t *oa = make_optim(cfg, &a), *ob = make_optim(cfg, &b);
    for (int s = 0; s < 2; s++) {
        make_grads(&a, 10 + (unsigned)s);
        optim_step(oa, 0.05);
    }
    uint8_t rng[32], sampler[5] = {1, 2, 3, 4, 5};
    for (int i = 0; i < 32; i++)
        rng[i] = (uint8_t)(i * 7 + 3);
    ckpt_info_t info = {.epoch = 3, .step = 77, .seed = UINT64_C(9223372036854775813),
                        .rng = rng, .rng_len = sizeof rng, .sampler = sampler,
                        .sampler_len = sizeof sampler};
    snprintf(info.arch, sizeof info.arch, "wideresnet");
    REQUIRE(ckpt_save(path, a.t, NT, oa, &info, err, sizeof err) == 0, "%s: %s", label, err);
    ckpt_info_t got = {0};
    REQUIRE(ckpt_load(path, b.t, NT, ob, &got, err, sizeof err) == 0, "%s: %s", label, err);
    CHECK(memcmp(a.conv, b.conv, sizeof a.conv) == 0 && memcmp(a.fcw, b.fcw, sizeof a.fcw) == 0 &&
              memcmp(a.fcb, b.fcb, sizeof a.fcb) == 0 &&
              memcmp(a.rmean, b.rmean, sizeof a.rmean) == 0 && a.nbt == b.nbt,
          "%s: model tensors differ after the round trip", label);
    CHECK(same_state(oa, ob), "%s: optimizer state differs after the round trip", label);
    CHECK(got.epoch == 3 && got.step == 77 && got.seed == info.seed &&
              strcmp(got.arch, "wideresnet") == 0, "%s: counters %lld %lld %llu %s", label,
          (long long)got.epoch, (long long)got.step, (unsigned long long)got.seed, got.arch);
    CHECK(got.rng_len == 32 && got.rng && memcmp(got.rng, rng, 32) == 0 && got.sampler_len == 5 &&
              got.sampler && memcmp(got.sampler, sampler, 5) == 0, "%s: RNG/sampler state", label);
    ckpt_info_clear(&got);
    /* resume: the next step is identical */
    make_grads(&a, 12);
    make_grads(&b, 12);
    optim_step(oa, 0.05);
    optim_step(ob, 0.05);
    CHECK(memcmp(a.conv, b.conv, sizeof a.conv) == 0 && memcmp(a.fcb, b.fcb, sizeof a.fcb) == 0,
          "%s: the step after resuming differs", label);
    optim_destroy(&oa);
    optim_destroy(&ob);
}

static void test_roundtrips(void)
{
    optim_cfg_t c = optim_cfg_default(OPTIM_SGD);
    c.momentum = 0.9;
    c.weight_decay = 1e-4;
    roundtrip(&c, "sgd momentum");
    c = optim_cfg_default(OPTIM_ADAM);
    c.amsgrad = true;
    roundtrip(&c, "adam amsgrad");
    c = optim_cfg_default(OPTIM_ADAMW);
    roundtrip(&c, "adamw");
    c = optim_cfg_default(OPTIM_NOVOGRAD);
    c.grad_averaging = true;
    c.amsgrad = true;
    roundtrip(&c, "novograd");
    /* nothing but the checkpoint is left in the directory (the temp file was renamed) */
    DIR *d = opendir(dir);
    REQUIRE(d, "opendir %s", dir);
    int files = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            files++;
            CHECK(strcmp(e->d_name, "rt.safetensors") == 0, "stray file %s", e->d_name);
        }
    closedir(d);
    CHECK(files == 1, "%d files in the checkpoint directory", files);
}

/* A checkpoint of net(seed 1) with 1 SGD-momentum step; returns its path. */
static void write_sgd_ckpt(char *path, size_t len)
{
    char err[512];
    path_of(path, len, "sgd.safetensors");
    net_t n;
    net_init(&n, 1);
    optim_cfg_t c = optim_cfg_default(OPTIM_SGD);
    c.momentum = 0.9;
    optim_t *o = make_optim(&c, &n);
    make_grads(&n, 5);
    optim_step(o, 0.1);
    ckpt_info_t info = {.epoch = 1, .step = 1};
    REQUIRE(ckpt_save(path, n.t, NT, o, &info, err, sizeof err) == 0, "%s", err);
    optim_destroy(&o);
}

/* Expect a failed load whose message contains want, leaving net and optim as they were. */
static void expect_fail(const char *path, net_t *n, optim_t *o, const char *want,
                        const char *label)
{
    char err[512] = "";
    net_t before = *n;
    int64_t step0 = o ? optim_param_steps(o, 0) : 0;
    ckpt_info_t info = {0};
    int rc = ckpt_load(path, n->t, NT, o, &info, err, sizeof err);
    CHECK(rc < 0, "%s: load succeeded", label);
    CHECK(strstr(err, want) != NULL, "%s: error \"%s\" does not mention \"%s\"", label, err, want);
    CHECK(memcmp(before.conv, n->conv, sizeof n->conv) == 0 &&
              memcmp(before.fcw, n->fcw, sizeof n->fcw) == 0 && before.nbt == n->nbt,
          "%s: a failed load changed the model", label);
    CHECK(!o || optim_param_steps(o, 0) == step0, "%s: a failed load changed the optimizer", label);
    CHECK(info.rng == NULL && info.epoch == 0, "%s: a failed load filled info", label);
    printf("  %-28s -> %s\n", label, err);
}

static void copy_prefix(const char *src, const char *dst, long keep, long flip_at)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    REQUIRE(in && out, "open %s / %s: %s", src, dst, strerror(errno));
    int c;
    for (long i = 0; (c = fgetc(in)) != EOF && (keep < 0 || i < keep); i++)
        fputc(i == flip_at ? c ^ 0x5a : c, out);
    fclose(in);
    REQUIRE(fclose(out) == 0, "write %s", dst);
}

static void test_errors(void)
{
    char good[512], bad[512], err[512];
    write_sgd_ckpt(good, sizeof good);
    net_t n;
    net_init(&n, 7);
    optim_cfg_t sgd = optim_cfg_default(OPTIM_SGD);
    sgd.momentum = 0.9;
    optim_t *o = make_optim(&sgd, &n);

    path_of(bad, sizeof bad, "missing.safetensors");
    expect_fail(bad, &n, o, "missing.safetensors", "missing file");
    path_of(bad, sizeof bad, "trunc.safetensors");
    copy_prefix(good, bad, 300, -1);
    expect_fail(bad, &n, o, "trunc.safetensors", "truncated file");
    FILE *f = fopen(good, "rb");
    REQUIRE(f && fseek(f, 0, SEEK_END) == 0, "open %s", good);
    long size = ftell(f);
    fclose(f);
    path_of(bad, sizeof bad, "short.safetensors");
    copy_prefix(good, bad, size - 10, -1);
    expect_fail(bad, &n, o, "short.safetensors", "last 10 bytes cut");
    path_of(bad, sizeof bad, "corrupt.safetensors");
    copy_prefix(good, bad, -1, 20);
    expect_fail(bad, &n, o, "corrupt.safetensors", "corrupt header");

    /* shape, dtype, missing and extra model tensors */
    n.t[FCW].shape[1] = 9;
    expect_fail(good, &n, o, "fc.weight: checkpoint has F32 [3,8], the model needs F32 [3,9]",
                "shape mismatch");
    n.t[FCW].shape[1] = 8;
    n.t[NBT].dtype = ST_F32;
    n.t[NBT].data = n.rmean;
    expect_fail(good, &n, o, "bn.num_batches_tracked", "dtype mismatch");
    n.t[NBT].dtype = ST_I64;
    n.t[NBT].data = &n.nbt;
    net_t more = n;
    ckpt_tensor_t extra[NT + 1];
    memcpy(extra, more.t, sizeof more.t);
    extra[NT] = (ckpt_tensor_t){"fc2.weight", ST_F32, 1, {3}, more.fcb};
    CHECK(ckpt_load(good, extra, NT + 1, NULL, NULL, err, sizeof err) < 0 &&
              strstr(err, "fc2.weight [3] is missing"), "missing tensor: %s", err);
    CHECK(ckpt_load(good, n.t, NT - 1, NULL, NULL, err, sizeof err) < 0 &&
              strstr(err, "fc.bias in the checkpoint is not part of this model"),
          "extra tensor: %s", err);

    /* optimizer mismatches */
    optim_cfg_t adam = optim_cfg_default(OPTIM_ADAM);
    optim_t *oa = make_optim(&adam, &n);
    expect_fail(good, &n, oa, "optimizer state is for sgd", "other optimizer");
    optim_destroy(&oa);
    optim_cfg_t plain = optim_cfg_default(OPTIM_SGD);
    optim_t *op = make_optim(&plain, &n);
    expect_fail(good, &n, op, "momentum_buffer", "momentum 0 vs buffers");
    optim_destroy(&op);
    optim_t *o4 = make_optim(&sgd, &n);
    float w4[2], g4[2];
    int64_t s4[1] = {2};
    REQUIRE(optim_add_param(o4, "head.weight", w4, g4, 1, s4, true, err, sizeof err) == 3, "%s",
            err);
    expect_fail(good, &n, o4, "optim.head.weight.step: missing", "parameter without state");
    optim_destroy(&o4);

    /* a hand-made file: right model, optimizer state of the wrong shape */
    path_of(bad, sizeof bad, "badstate.safetensors");
    st_writer_t *w = st_writer_new();
    REQUIRE(w, "writer");
    for (int i = 0; i < NT; i++)
        REQUIRE(st_writer_add(w, n.t[i].name, n.t[i].dtype, n.t[i].ndim, n.t[i].shape,
                              n.t[i].data, err, sizeof err) == 0, "%s", err);
    int64_t wrong[1] = {24}, one = 1;
    float buf[24] = {0};
    REQUIRE(st_writer_add(w, "optim.fc.weight.momentum_buffer", ST_F32, 1, wrong, buf, err,
                          sizeof err) == 0 &&
            st_writer_add(w, "optim.fc.weight.step", ST_I64, 0, NULL, &one, err, sizeof err) == 0 &&
            st_writer_meta(w, "format", CKPT_FORMAT, err, sizeof err) == 0 &&
            st_writer_meta(w, "ckpt.version", "1", err, sizeof err) == 0 &&
            st_writer_meta(w, "ckpt.epoch", "1", err, sizeof err) == 0 &&
            st_writer_meta(w, "ckpt.step", "1", err, sizeof err) == 0 &&
            st_writer_meta(w, "ckpt.seed", "0", err, sizeof err) == 0 &&
            st_writer_meta(w, "optim.kind", "sgd", err, sizeof err) == 0 &&
            st_writer_save(w, bad, err, sizeof err) == 0, "%s", err);
    st_writer_destroy(&w);
    expect_fail(bad, &n, o, "optim.fc.weight.momentum_buffer: expected F32 [3,8], got F32 [24]",
                "state shape mismatch");

    /* a NaN weight or an infinite momentum is refused naming it, from a
     * file (--resume) and from memory (a joiner's STATE) */
    for (int which = 0; which < 2; which++) {
        path_of(bad, sizeof bad, "nonfinite.safetensors");
        net_t v;
        net_init(&v, 3);
        optim_t *ov = make_optim(&sgd, &v);
        make_grads(&v, 9);
        optim_step(ov, 0.1);
        optim_step(ov, 0.1);
        if (which == 0)
            v.fcw[5] = NAN;
        else
            v.g_fcb[1] = INFINITY;   /* the next step's momentum buffer */
        if (which == 1) {
            optim_step(ov, 0.1);
            v.fcb[1] = 0.5f;   /* the weight the step made -inf: finite again */
        }
        ckpt_info_t vi = {.epoch = 1, .step = 3};
        REQUIRE(ckpt_save(bad, v.t, NT, ov, &vi, err, sizeof err) == 0, "%s", err);
        const char *want = which == 0 ? "fc.weight: element 5 of 24 is nan"
                                      : "optim.fc.bias.momentum_buffer: element 1 of 3 is inf";
        expect_fail(bad, &n, o, want, which == 0 ? "NaN weight" : "inf momentum");
        uint8_t *img = NULL;
        size_t len = 0;
        REQUIRE(ckpt_save_image(&img, &len, v.t, NT, ov, &vi, err, sizeof err) == 0, "%s", err);
        net_t before = n;
        CHECK(ckpt_load_image(img, len, "STATE", n.t, NT, o, NULL, err, sizeof err) < 0 &&
                  strstr(err, want) && strstr(err, "STATE"),
              "non-finite STATE image: %s", err);
        CHECK(memcmp(before.fcw, n.fcw, sizeof n.fcw) == 0, "a refused STATE changed the model");
        free(img);
        optim_destroy(&ov);
    }

    /* plain weights are not a checkpoint */
    path_of(bad, sizeof bad, "weights.safetensors");
    w = st_writer_new();
    for (int i = 0; i < NT; i++)
        st_writer_add(w, n.t[i].name, n.t[i].dtype, n.t[i].ndim, n.t[i].shape, n.t[i].data, err,
                      sizeof err);
    REQUIRE(st_writer_save(w, bad, err, sizeof err) == 0, "%s", err);
    st_writer_destroy(&w);
    expect_fail(bad, &n, o, "not a ddpipe checkpoint", "plain weights file");

    /* reserved names are refused on save; an eval load ignores optimizer state */
    ckpt_tensor_t res = {"optim.x", ST_F32, 1, {3}, n.fcb};
    CHECK(ckpt_save(bad, &res, 1, NULL, NULL, err, sizeof err) < 0 && strstr(err, "reserved"),
          "reserved prefix: %s", err);
    CHECK(ckpt_load(good, n.t, NT, NULL, NULL, err, sizeof err) == 0, "model-only load: %s", err);
    optim_destroy(&o);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ddpipe_ckpt_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
    test_roundtrips();
    test_errors();
    /* clean up what the tests wrote */
    DIR *d = opendir(dir);
    char p[600];
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    return tc_done("test_checkpoint");
}
