/* Crafted IDX files (plain and gzip): every lie a header can tell is an
 * error naming the file, found before the data buffer is allocated (a
 * header claiming 1-2 GiB on a 100-byte file must not allocate it: the
 * test runs under an address-space limit far below that). */
#include "common/dataset.h"
#include "common/idx.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <zlib.h>

static char *s_dir;

static size_t hdr(uint8_t *b, int ndims, const uint32_t *dims)
{
    b[0] = b[1] = 0;
    b[2] = 0x08;
    b[3] = (uint8_t)ndims;
    for (int d = 0; d < ndims; d++)
        for (int k = 0; k < 4; k++)
            b[4 + 4 * d + k] = (uint8_t)(dims[d] >> (24 - 8 * k));
    return 4 + 4 * (size_t)ndims;
}

/* gzip of SRC into a malloc'd buffer (one member). */
static uint8_t *gz(const uint8_t *src, size_t n, size_t *out_len)
{
    z_stream z = {0};
    uint8_t *out = malloc(n + 1024);
    if (!out || deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        abort();
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)(n + 1024);
    if (deflate(&z, Z_FINISH) != Z_STREAM_END)
        abort();
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

/* Writes B as NAME in the test dir and reads it back as an NDIMS IDX file;
 * the error (if any) must contain WANT and the path. */
static void expect_file(const char *name, const uint8_t *b, size_t n, int ndims,
                        const char *want)
{
    char path[1024], err[512] = "";
    snprintf(path, sizeof path, "%s/%s", s_dir, name);
    CHECK(tu_write_file(path, b, n) == 0, "write %s", path);
    idx_file_t f;
    int rc = idx_file_read(path, ndims, &f, err, sizeof err);
    if (!want) {
        CHECK(rc == 0, "%s: %s", name, err);
        idx_file_free(&f);
        return;
    }
    CHECK(rc != 0, "%s was accepted", name);
    CHECK(strstr(err, want) && strstr(err, path), "%s: error '%s' lacks '%s' or the path", name,
          err, want);
    CHECK(f.data == NULL && f.len == 0, "%s: a refused file left data behind", name);
}

/* The same bytes plain and gzipped. */
static void expect_both(const char *name, const uint8_t *b, size_t n, int ndims,
                        const char *want_plain, const char *want_gz)
{
    expect_file(name, b, n, ndims, want_plain);
    size_t zn;
    uint8_t *z = gz(b, n, &zn);
    char gzname[256];
    snprintf(gzname, sizeof gzname, "%s.gz", name);
    expect_file(gzname, z, zn, ndims, want_gz);
    free(z);
}

static void test_headers(void)
{
    uint8_t b[4096] = {0};
    /* 65536 x 128 x 256 = 2 GiB claimed, 100 bytes there */
    uint32_t big[3] = {65536, 128, 256};
    size_t h = hdr(b, 3, big);
    expect_both("claims-2g", b, 100, 3, "the header declares 2147483648 data bytes, the file has 84",
                "the header declares 2147483648 data bytes, the file has 84");
    /* 4 GiB: over the cap, refused from the header alone */
    uint32_t huge[3] = {65536, 256, 256};
    hdr(b, 3, huge);
    expect_both("claims-4g", b, 100, 3, "more than 2147483648 bytes", "more than 2147483648 bytes");
    /* dims whose product overflows 64 bits */
    uint32_t ovf[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    hdr(b, 4, ovf);
    expect_both("overflow", b, 40, 4, "more than 2147483648 bytes", "more than 2147483648 bytes");
    /* right size, then one byte missing, then one extra */
    uint32_t small[3] = {3, 4, 5};
    h = hdr(b, 3, small);
    for (size_t i = 0; i < 60; i++)
        b[h + i] = (uint8_t)i;
    expect_both("exact", b, h + 60, 3, NULL, NULL);
    expect_both("short", b, h + 59, 3, "declares 60 data bytes, the file has 59",
                "declares 60 data bytes, the file has 59");
    expect_both("long", b, h + 61, 3, "more data than the header declares (1 bytes after its 60",
                "more data than the header declares (over its 60 data bytes)");
    /* wrong magic: not uint8, wrong rank, garbage, too short, empty */
    b[2] = 0x0d;
    expect_both("float", b, h + 60, 3, "bad IDX magic", "bad IDX magic");
    b[2] = 0x08;
    expect_both("rank", b, h + 60, 1, "bad IDX magic", "bad IDX magic");
    expect_both("garbage", (const uint8_t *)"hello, this is no IDX", 21, 3, "bad IDX magic",
                "bad IDX magic");
    expect_both("tiny", b, 3, 3, "too short", "too short");
    expect_both("empty", b, 0, 3, "too short", "too short");
    expect_both("cut-header", b, 9, 3, "truncated IDX header", "truncated IDX header");
    uint32_t zero[3] = {3, 0, 5};
    hdr(b, 3, zero);
    expect_both("zero-dim", b, 16, 3, "dimension 1 is zero", "dimension 1 is zero");
}

static void test_gzip_stream(void)
{
    uint8_t b[256] = {0};
    uint32_t dims[1] = {100};
    size_t h = hdr(b, 1, dims);
    size_t zn;
    uint8_t *z = gz(b, h + 100, &zn);
    uint8_t *cat = malloc(2 * zn + 8);
    /* a cut gzip stream, a corrupt one, garbage after it: errors */
    expect_file("cut.gz", z, zn - 12, 1, "truncated gzip stream");
    memcpy(cat, z, zn);
    cat[12] ^= 0xff;
    cat[13] ^= 0xff;
    expect_file("corrupt.gz", cat, zn, 1, "gzip");
    memcpy(cat, z, zn);
    memcpy(cat + zn, "JUNKJUNK", 8);
    expect_file("junk.gz", cat, zn + 8, 1, "garbage after the gzip stream");
    /* two members (as `cat a.gz b.gz`): one stream, as gzip -d reads it */
    size_t z1n, z2n;
    uint8_t *z1 = gz(b, h + 40, &z1n), *z2 = gz(b + h + 40, 60, &z2n);
    memcpy(cat, z1, z1n);
    memcpy(cat + z1n, z2, z2n);
    expect_file("members.gz", cat, z1n + z2n, 1, NULL);
    free(z1);
    free(z2);
    /* a gzip bomb: 64 MiB of zeros declared as 1000 bytes; memory stays
     * at the declared size + 1 (the address-space limit would catch it) */
    size_t bombn = (size_t)64 << 20;
    uint8_t *bomb = calloc(1, bombn);
    dims[0] = 1000;
    hdr(bomb, 1, dims);
    uint8_t *zb = gz(bomb, bombn, &zn);
    free(bomb);
    expect_file("bomb.gz", zb, zn, 1, "more data than the header declares (over its 1000");
    free(zb);
    free(cat);
    free(z);
}

/* The buffer entry point the fuzzer uses, and dataset_open naming the file. */
static void test_buffer_and_dataset(void)
{
    uint8_t b[64] = {0};
    uint32_t dims[1] = {4};
    size_t h = hdr(b, 1, dims);
    char err[512] = "";
    idx_file_t f;
    CHECK(idx_parse_buffer(b, h + 4, "mem", 1, &f, err, sizeof err) == 0 && f.len == 4 &&
              f.dims[0] == 4, "buffer: %s", err);
    idx_file_free(&f);
    CHECK(idx_parse_buffer(b, h + 3, "mem", 1, &f, err, sizeof err) != 0 && strstr(err, "mem:"),
          "buffer short: %s", err);
    /* a dataset whose images file lies: dataset_open says which file */
    uint32_t im[3] = {60000, 28, 28};
    h = hdr(b, 3, im);
    char path[1024];
    snprintf(path, sizeof path, "%s/ds-images-idx3-ubyte", s_dir);
    tu_write_file(path, b, h + 20);
    snprintf(path, sizeof path, "%s/ds-labels-idx1-ubyte", s_dir);
    dims[0] = 60000;
    h = hdr(b, 1, dims);
    tu_write_file(path, b, h);
    char spec[1100];
    snprintf(spec, sizeof spec, "idx:%s/ds", s_dir);
    dataset_t *ds = dataset_open(spec, err, sizeof err);
    CHECK(!ds && strstr(err, "ds-images-idx3-ubyte: truncated"), "dataset: %s", err);
    dataset_destroy(&ds);
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan reserves terabytes of shadow, so no address-space limit: its own
 * allocation cap instead (a blind 2 GiB malloc fails, and the message
 * checked below would be "out of memory"). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "max_allocation_size_mb=256:allocator_may_return_null=1";
}
#endif

int main(void)
{
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit rl = {(rlim_t)768 << 20, (rlim_t)768 << 20};
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0, "setrlimit");
#endif
    s_dir = tu_mkdtemp("idx-bad");
    CHECK(s_dir != NULL, "mkdtemp");
    if (!s_dir)
        return 1;
    test_headers();
    test_gzip_stream();
    test_buffer_and_dataset();
    tu_rmtree(s_dir);
    free(s_dir);
    return tu_finish("test_idx_bad");
}
