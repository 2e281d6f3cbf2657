/* safetensors reader/writer: round trip of every dtype, half-float
 * conversions, atomic save, and a table of malformed files, each of which
 * must be refused with a message that says what is wrong (never a crash;
 * ASan/UBSan watch the mutation loop). */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "tcheck.h"

static char tmpdir[256];

static const char *tmp_path(const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
    return buf;
}

static void test_roundtrip(void)
{
    char err[512] = "", path[512];
    st_writer_t *w = st_writer_new();
    REQUIRE(w, "writer");
    float f32[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-20f};
    uint16_t f16[4] = {st_f32_to_f16(1.0f), st_f32_to_f16(-2.5f), st_f32_to_f16(65504.0f),
                       st_f32_to_f16(1e-7f)};
    uint16_t bf16[4] = {st_f32_to_bf16(1.0f), st_f32_to_bf16(3.0f), st_f32_to_bf16(-0.5f),
                        st_f32_to_bf16(1e30f)};
    int64_t i64 = 1234567890123ll;
    uint8_t u8[5] = {0, 1, 127, 128, 255};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s22[2] = {2, 2}, s5[1] = {5}, s03[2] = {0, 3};
    const char *weird = "we\"ird\\name\n\xc3\xa9";
    CHECK(st_writer_add(w, "f32", ST_F32, 2, s23, f32, err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_add(w, "f16", ST_F16, 1, s4, f16, err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_add(w, "bf16", ST_BF16, 2, s22, bf16, err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_add(w, "num_batches_tracked", ST_I64, 0, NULL, &i64, err, sizeof err) == 0,
          "%s", err);
    CHECK(st_writer_add(w, weird, ST_U8, 1, s5, u8, err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_add(w, "empty", ST_F32, 2, s03, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_add(w, "f32", ST_F32, 1, s4, f32, err, sizeof err) < 0 &&
          strstr(err, "added twice"), "duplicate add refused: %s", err);
    CHECK(st_writer_add(w, "bad\xff", ST_F32, 1, s4, f32, err, sizeof err) < 0 &&
          strstr(err, "UTF-8"), "a name that is not UTF-8 is refused: %s", err);
    CHECK(st_writer_meta(w, "k", "bad\xc3", err, sizeof err) < 0 && strstr(err, "UTF-8"),
          "metadata that is not UTF-8 is refused: %s", err);
    CHECK(st_writer_meta(w, "format", "pt", err, sizeof err) == 0, "%s", err);
    CHECK(st_writer_meta(w, "note", "quote \" and \\ backslash", err, sizeof err) == 0, "%s",
          err);
    REQUIRE(st_writer_save(w, tmp_path("rt.safetensors", path, sizeof path), err,
                           sizeof err) == 0, "save: %s", err);
    st_writer_destroy(&w);
    CHECK(w == NULL, "destroy nulls");

    safetensors_t *st = safetensors_open(path, err, sizeof err);
    REQUIRE(st, "open: %s", err);
    CHECK(safetensors_count(st) == 6, "count %zu", safetensors_count(st));
    const st_tensor_t *t = safetensors_get(st, "f32");
    float back[6];
    REQUIRE(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 &&
            t->numel == 6 && t->nbytes == 24, "f32 entry");
    CHECK(st_tensor_to_f32(t, back, 6) == 0 && memcmp(back, f32, sizeof f32) == 0, "f32 data");
    CHECK(st_tensor_to_f32(t, back, 5) < 0, "wrong count refused");
    t = safetensors_get(st, "f16");
    CHECK(t && st_tensor_to_f32(t, back, 4) == 0 && back[0] == 1.0f && back[1] == -2.5f &&
          back[2] == 65504.0f && fabsf(back[3] - 1e-7f) <= 2.99e-8f, "f16 values %g %g %g %g",
          (double)back[0], (double)back[1], (double)back[2], (double)back[3]);
    t = safetensors_get(st, "bf16");
    CHECK(t && st_tensor_to_f32(t, back, 4) == 0 && back[0] == 1.0f && back[1] == 3.0f &&
          back[2] == -0.5f && fabsf(back[3] / 1e30f - 1.0f) < 1e-2f, "bf16 values");
    t = safetensors_get(st, "num_batches_tracked");
    int64_t iv = 0;
    CHECK(t && t->ndim == 0 && t->numel == 1 && st_tensor_to_i64(t, &iv, 1) == 0 && iv == i64,
          "i64 scalar");
    CHECK(st_tensor_to_f32(t, back, 1) < 0, "i64 is not converted to float");
    t = safetensors_get(st, weird);
    int64_t u[5];
    CHECK(t && t->dtype == ST_U8 && st_tensor_to_i64(t, u, 5) == 0 && u[4] == 255 && u[3] == 128,
          "u8 with escaped name");
    t = safetensors_get(st, "empty");
    CHECK(t && t->numel == 0 && t->nbytes == 0, "empty tensor");
    CHECK(safetensors_get(st, "nope") == NULL, "missing name gives NULL");
    CHECK(safetensors_meta(st, "format") && strcmp(safetensors_meta(st, "format"), "pt") == 0,
          "metadata");
    CHECK(safetensors_meta(st, "note") &&
          strcmp(safetensors_meta(st, "note"), "quote \" and \\ backslash") == 0, "escaped meta");
    /* names come back sorted */
    for (size_t i = 1; i < safetensors_count(st); i++)
        CHECK(strcmp(safetensors_at(st, i - 1)->name, safetensors_at(st, i)->name) < 0,
              "sorted names");
    safetensors_destroy(&st);
    CHECK(st == NULL, "destroy nulls");

    /* the data section starts 8-aligned (header padded) */
    FILE *f = fopen(path, "rb");
    uint8_t len8[8];
    REQUIRE(f && fread(len8, 1, 8, f) == 8, "read back");
    fclose(f);
    CHECK(len8[0] % 8 == 0, "header length %u is a multiple of 8", len8[0]);
}

static void test_halves(void)
{
    CHECK(st_f32_to_f16(1.0f) == 0x3c00, "1.0");
    CHECK(st_f32_to_f16(65504.0f) == 0x7bff, "max half");
    CHECK(st_f32_to_f16(65520.0f) == 0x7c00, "rounds to inf");
    CHECK(st_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    CHECK((st_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (st_f32_to_f16(NAN) & 0x3ff), "nan");
    CHECK(st_f32_to_f16(5.9604645e-8f) == 0x0001, "smallest subnormal");
    CHECK(st_f32_to_f16(2.9802322e-8f) == 0x0000, "half of it ties to even zero");
    CHECK(st_f32_to_f16(1.0f + 1.0f / 2048) == 0x3c00, "tie to even (down)");
    CHECK(st_f32_to_f16(1.0f + 3.0f / 2048) == 0x3c02, "tie to even (up)");
    /* every finite half survives half -> float -> half */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            continue;   /* nan payloads */
        bad += st_f32_to_f16(st_f16_to_f32((uint16_t)h)) != h;
    }
    CHECK(bad == 0, "%d halves do not round-trip", bad);
    CHECK(st_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80, "bf16 tie to even");
    CHECK(st_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82, "bf16 tie to even up");
    CHECK(st_bf16_to_f32(0x4040) == 3.0f, "bf16 3.0");
    CHECK(isnan(st_bf16_to_f32(st_f32_to_bf16(NAN))), "bf16 nan stays nan");
}

/* A file image: 8-byte length + header text + `data` zero bytes. */
static uint8_t *image(const char *hdr, size_t data, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data;
    uint8_t *b = calloc(1, *len);
    REQUIRE(b, "alloc");
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    return b;
}

static void expect_reject(const char *hdr, size_t data, const char *want)
{
    char err[512] = "";
    size_t len;
    uint8_t *b = image(hdr, data, &len);
    safetensors_t *st = safetensors_open_buffer(b, len, "bad.safetensors", err, sizeof err);
    CHECK(st == NULL, "accepted: %s", hdr);
    CHECK(strstr(err, want) && strstr(err, "bad.safetensors"),
          "header %s: error '%s' lacks '%s'", hdr, err, want);
    safetensors_destroy(&st);
    free(b);
}

static void test_rejects(void)
{
    const char *T = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    char h[512];
    snprintf(h, sizeof h, "{%s}", T);
    size_t len;
    char err[512] = "";
    uint8_t *ok = image(h, 8, &len);
    safetensors_t *st = safetensors_open_buffer(ok, len, "ok", err, sizeof err);
    CHECK(st != NULL, "control case must parse: %s", err);
    safetensors_destroy(&st);
    free(ok);

    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8,
                  "'}' expected");
    expect_reject("{\"a\":{\"dtype\":\"F8\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
                  "unknown dtype");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                  "outside the data section");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
                  "needs 12 bytes but data_offsets span 8");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
                  "non-negative integer");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
                  "fraction");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "lacks dtype, shape or");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],"
                  "\"data_offsets\":[0,8]}}", 8, "duplicate object key near '\"dtype\"'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16,
                  "duplicate object key near '\"a\"'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 16,
                  "overlap");
    /* the tensors must tile the data section: trailing bytes, gaps */
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9,
                  "1 trailing bytes after the last tensor's data");
    expect_reject("{}", 16, "16 trailing bytes");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
                  "4 bytes before tensor 'a'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", 16,
                  "4 bytes before tensor 'b'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8,
                  "overlap");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
                  "outside the data section");
    expect_reject("{\"__metadata__\":{\"k\":1}}", 0, "must be strings");
    expect_reject("{} x", 0, "end of file expected near 'x'");
    expect_reject("[]", 0, "expected '{'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                  "\"data_offsets\":[0,4]}}", 4, "too many dimensions");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
                  "\"data_offsets\":[0,4]}}", 4, "too big integer");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[9007199254740993],"
                  "\"data_offsets\":[0,4]}}", 4, "integer too large");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                  "\"data_offsets\":[0,4]}}", 4, "shape too large");
    expect_reject("{\"a\\ud800\":{}}", 0, "invalid Unicode '\\uD800'");
    expect_reject("{\"a\\u0000\":{}}", 0, "NUL");
    expect_reject("{\"a\xff\":{}}", 0, "unable to decode byte 0xff"); /* names are UTF-8 */
    expect_reject("{\"a\":{\"x\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]"
                  "]]]]]]]]]]]]]]]]]]]}}", 0, "nesting too deep");
    expect_reject("{\"a\":{\"dtype\":\"F32", 0, "premature end of input");

    /* tolerated: unknown fields, whitespace, escapes, empty header */
    const char *fine = " { \"\\u00e9\\n\" : { \"extra\" : [1, {\"k\": null}], \"dtype\" : \"U8\","
                       " \"shape\" : [ ] , \"data_offsets\" : [ 0 , 1 ] } }   ";
    ok = image(fine, 1, &len);
    st = safetensors_open_buffer(ok, len, "fine", err, sizeof err);
    CHECK(st && safetensors_get(st, "\xc3\xa9\n"), "tolerant parse: %s", err);
    safetensors_destroy(&st);
    free(ok);

    /* too short, length past the end */
    uint8_t small[4] = {0};
    st = safetensors_open_buffer(small, 4, "tiny", err, sizeof err);
    CHECK(!st && strstr(err, "shorter than the 8-byte"), "%s", err);
    uint8_t big[16] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}'};
    st = safetensors_open_buffer(big, 16, "big", err, sizeof err);
    CHECK(!st && strstr(err, "exceeds the file"), "%s", err);
    uint8_t nul[16] = {2, 0, 0, 0, 0, 0, 0, 0, '{', 0};
    st = safetensors_open_buffer(nul, 10, "nul", err, sizeof err);
    CHECK(!st && strstr(err, "NUL"), "%s", err);
}

/* Real files: truncated, missing, atomic overwrite leaves no temp file. */
static void test_files(void)
{
    char err[512] = "", path[512], tpath[512];
    float v[256];
    for (int i = 0; i < 256; i++)
        v[i] = (float)i;
    int64_t shape[2] = {16, 16};
    st_writer_t *w = st_writer_new();
    REQUIRE(w && st_writer_add(w, "w", ST_F32, 2, shape, v, err, sizeof err) == 0, "%s", err);
    tmp_path("f.safetensors", path, sizeof path);
    REQUIRE(st_writer_save(w, path, err, sizeof err) == 0, "%s", err);
    v[0] = 42.0f;
    st_writer_destroy(&w);
    w = st_writer_new();
    REQUIRE(w && st_writer_add(w, "w", ST_F32, 2, shape, v, err, sizeof err) == 0, "%s", err);
    REQUIRE(st_writer_save(w, path, err, sizeof err) == 0, "overwrite: %s", err);
    CHECK(st_writer_save(w, "/nonexistent-dir/x.safetensors", err, sizeof err) < 0 &&
          strstr(err, "/nonexistent-dir/x.safetensors"), "save into a missing dir: %s", err);
    st_writer_destroy(&w);

    safetensors_t *st = safetensors_open(path, err, sizeof err);
    float back[256];
    CHECK(st && st_tensor_to_f32(safetensors_get(st, "w"), back, 256) == 0 && back[0] == 42.0f,
          "overwritten file holds the new data: %s", err);
    safetensors_destroy(&st);

    DIR *d = opendir(tmpdir);
    struct dirent *e;
    int temps = 0;
    while (d && (e = readdir(d)))
        temps += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    CHECK(temps == 0, "%d temp files left behind", temps);

    /* truncate a copy: data section shorter than the header claims */
    struct stat sb;
    REQUIRE(stat(path, &sb) == 0, "stat");
    tmp_path("trunc.safetensors", tpath, sizeof tpath);
    FILE *in = fopen(path, "rb"), *out = fopen(tpath, "wb");
    REQUIRE(in && out, "copy");
    for (long i = 0; i < sb.st_size - 100; i++)
        fputc(fgetc(in), out);
    fclose(in);
    fclose(out);
    st = safetensors_open(tpath, err, sizeof err);
    CHECK(!st && strstr(err, "truncated") && strstr(err, "'w'"), "truncated: %s", err);
    /* a copy with bytes appended after the last tensor: refused */
    tmp_path("tail.safetensors", tpath, sizeof tpath);
    in = fopen(path, "rb");
    out = fopen(tpath, "wb");
    REQUIRE(in && out, "copy");
    for (long i = 0; i < sb.st_size; i++)
        fputc(fgetc(in), out);
    fputs("appended", out);
    fclose(in);
    fclose(out);
    st = safetensors_open(tpath, err, sizeof err);
    CHECK(!st && strstr(err, "8 trailing bytes") && strstr(err, "tail.safetensors"),
          "trailing bytes: %s", err);
    unlink(tpath);
    st = safetensors_open(tmp_path("missing.safetensors", tpath, sizeof tpath), err, sizeof err);
    CHECK(!st && strstr(err, "cannot open") && strstr(err, "missing.safetensors"), "%s", err);
    st = safetensors_open(tmpdir, err, sizeof err);
    CHECK(!st && strstr(err, "not a regular file"), "directory: %s", err);
    unlink(path);
    unlink(tmp_path("trunc.safetensors", tpath, sizeof tpath));
    unlink(tmp_path("rt.safetensors", tpath, sizeof tpath));
}

/* Random byte flips and truncations of a valid image: must never crash. */
static void test_mutations(void)
{
    const char *hdr = "{\"__metadata__\":{\"a\":\"b\"},\"x\":{\"dtype\":\"F16\",\"shape\":[2,2],"
                      "\"data_offsets\":[0,8]},\"y\":{\"dtype\":\"I64\",\"shape\":[],"
                      "\"data_offsets\":[8,16]}}";
    size_t len;
    uint8_t *base = image(hdr, 16, &len);
    uint8_t *b = malloc(len);
    REQUIRE(b, "alloc");
    uint32_t s = 99;
    int accepted = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(b, base, len);
        int flips = 1 + it % 3;
        for (int f = 0; f < flips; f++) {
            s = s * 1664525u + 1013904223u;
            size_t pos = (s >> 8) % len;
            s = s * 1664525u + 1013904223u;
            b[pos] = (uint8_t)(s >> 24);
        }
        s = s * 1664525u + 1013904223u;
        size_t n = (it % 5 == 0) ? (s >> 8) % (len + 1) : len;
        char err[256];
        safetensors_t *st = safetensors_open_buffer(b, n, "mut", err, sizeof err);
        if (st) {
            accepted++;
            for (size_t i = 0; i < safetensors_count(st); i++) {
                const st_tensor_t *t = safetensors_at(st, i);
                /* touching every byte a tensor claims must be in bounds */
                volatile uint8_t sum = 0;
                for (size_t k = 0; k < t->nbytes; k++)
                    sum ^= ((const uint8_t *)t->data)[k];
                (void)sum;
            }
        }
        safetensors_destroy(&st);
    }
    printf("mutations: %d of 3000 still valid files, none crashed\n", accepted);
    free(b);
    free(base);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ddp_st_XXXXXX");
    REQUIRE(mkdtemp(tmpdir), "mkdtemp");
    test_halves();
    test_roundtrip();
    test_rejects();
    test_files();
    test_mutations();
    rmdir(tmpdir);
    return tc_done("test_safetensors");
}
