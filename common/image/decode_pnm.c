/* PPM/PGM/PBM (P1..P6), read directly, as Pillow 9.4's PpmImagePlugin
 * reads them: binary and plain; maxval other than 255 rescaled with
 * Python's round(v / maxval * out_max) (round half to even: rint in the
 * default rounding mode); 16-bit gray becomes mode "I" (0..65535), which
 * convert("RGB") clips to 255. */
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* PIL's _read_token: skips leading blanks and '#' comments, stops after the
 * blank that ends the token; at most 10 characters. -1 with a reason. */
static long read_token(const uint8_t *b, size_t len, size_t *pos, char *err, size_t errlen)
{
    char tok[12];
    size_t n = 0;
    while (n <= 10 && *pos < len) {
        uint8_t c = b[(*pos)++];
        if (is_space(c)) {
            if (!n)
                continue;
            break;
        }
        if (c == '#') {
            while (*pos < len && b[*pos] != '\r' && b[*pos] != '\n')
                (*pos)++;
            if (*pos < len)
                (*pos)++;
            continue;
        }
        tok[n++] = (char)c;
    }
    if (!n) {
        err_set(err, errlen, "image file is truncated (PNM header ends early)");
        return -1;
    }
    if (n > 10) {
        err_set(err, errlen, "corrupt PNM: header token too long");
        return -1;
    }
    tok[n] = 0;
    char *end;
    long v = strtol(tok, &end, 10);
    if (*end || v < 0) {
        err_set(err, errlen, "corrupt PNM: bad header number '%s'", tok);
        return -1;
    }
    return v;
}

typedef struct {
    int kind;   /* the digit of P1..P6 */
    int bands;  /* 1 or 3 */
    long maxval;
    int wide;   /* PGM with maxval > 255: PIL's mode "I" */
} pnm_t;

/* One sample scaled as PIL's PpmDecoder / PpmPlainDecoder do, then to
 * 8 bits as convert("RGB") does (mode "I" clips). */
static uint8_t scale(const pnm_t *p, long v)
{
    if (p->maxval == 255 && !p->wide)
        return (uint8_t)v;
    double out_max = p->wide ? 65535.0 : 255.0;
    double r = rint((double)v / (double)p->maxval * out_max);
    if (r > out_max)
        r = out_max;
    return (uint8_t)(r > 255 ? 255 : r);
}

/* The data of a plain file with PIL's comment removal: '#' up to and
 * including the next CR or LF. Tokens are then split at blanks. */
static int plain_next(const uint8_t *b, size_t len, size_t *pos, char *tok, size_t *n)
{
    *n = 0;
    while (*pos < len) {
        uint8_t c = b[*pos];
        if (c == '#') {
            while (*pos < len && b[*pos] != '\r' && b[*pos] != '\n')
                (*pos)++;
            if (*pos < len)
                (*pos)++;
            continue;
        }
        (*pos)++;
        if (is_space(c)) {
            if (*n)
                return 1;
            continue;
        }
        if (*n < 11)
            tok[*n] = (char)c;
        (*n)++;
    }
    return *n > 0;
}

static int read_plain(const uint8_t *b, size_t len, size_t pos, const pnm_t *p, image_t *img,
                      char *err, size_t errlen)
{
    size_t total = (size_t)img->w * img->h * img->c, got = 0;
    char tok[12];
    size_t n;
    if (p->kind == 1) { /* every character is a pixel; blanks are optional */
        while (got < total && pos < len) {
            uint8_t c = b[pos++];
            if (c == '#') {
                while (pos < len && b[pos] != '\r' && b[pos] != '\n')
                    pos++;
                pos += pos < len;
            } else if (c == '0' || c == '1') {
                img->px[got++] = c == '1' ? 0 : 255;
            } else if (!is_space(c)) {
                err_set(err, errlen, "corrupt PBM: invalid character 0x%02x in the data", c);
                return -1;
            }
        }
    }
    while (p->kind != 1 && got < total && plain_next(b, len, &pos, tok, &n)) {
        if (n > 10) {
            err_set(err, errlen, "corrupt PNM: data token too long");
            return -1;
        }
        tok[n] = 0;
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 0) {
            err_set(err, errlen, "corrupt PNM: bad sample '%s'", tok);
            return -1;
        }
        if (v > p->maxval) {
            err_set(err, errlen, "corrupt PNM: sample %ld above maxval %ld", v, p->maxval);
            return -1;
        }
        img->px[got++] = scale(p, v);
    }
    if (got < total) {
        err_set(err, errlen, "image file is truncated (PNM data ends early)");
        return -1;
    }
    return 0;
}

static int read_binary(const uint8_t *b, size_t len, size_t pos, const pnm_t *p, image_t *img,
                       char *err, size_t errlen)
{
    size_t w = (size_t)img->w, h = (size_t)img->h;
    if (p->kind == 4) { /* 1 bit per pixel, rows padded to a byte, 1 = black */
        size_t row = (w + 7) / 8;
        if (len - pos < row * h) {
            err_set(err, errlen, "image file is truncated (PBM data ends early)");
            return -1;
        }
        for (size_t y = 0; y < h; y++)
            for (size_t x = 0; x < w; x++)
                img->px[y * w + x] = (b[pos + y * row + x / 8] >> (7 - x % 8)) & 1 ? 0 : 255;
        return 0;
    }
    size_t bytes = p->maxval > 255 ? 2 : 1, total = w * h * (size_t)p->bands;
    if ((len - pos) / bytes < total) {
        err_set(err, errlen, "image file is truncated (PNM data ends early)");
        return -1;
    }
    const uint8_t *s = b + pos;
    for (size_t i = 0; i < total; i++) {
        long v = bytes == 1 ? s[i] : (long)s[2 * i] << 8 | s[2 * i + 1];
        img->px[i] = scale(p, v);
    }
    return 0;
}

/* The header: magic, size, maxval; *pos is then where the data starts. */
static int parse_header(const uint8_t *buf, size_t len, pnm_t *p, long *w, long *h, size_t *pos,
                        char *err, size_t errlen)
{
    /* the magic: up to 6 characters before a blank, as PIL reads it */
    *pos = 0;
    while (*pos < 6 && *pos < len && !is_space(buf[*pos]))
        (*pos)++;
    if (*pos != 2 || buf[0] != 'P' || buf[1] < '1' || buf[1] > '6') {
        err_set(err, errlen, "corrupt PNM: unknown magic '%.*s'", (int)*pos, (const char *)buf);
        return -1;
    }
    if (*pos < len)
        (*pos)++;
    *p = (pnm_t){buf[1] - '0', 1, 1, 0};
    p->bands = p->kind == 3 || p->kind == 6 ? 3 : 1;
    *w = read_token(buf, len, pos, err, errlen);
    *h = *w < 0 ? -1 : read_token(buf, len, pos, err, errlen);
    if (*h < 0 || image_check_dims(*w, *h, err, errlen) != 0)
        return -1;
    if (p->kind == 1 || p->kind == 4)
        return 0;
    p->maxval = read_token(buf, len, pos, err, errlen);
    if (p->maxval < 0)
        return -1;
    if (p->maxval < 1 || p->maxval > 65535) {
        err_set(err, errlen, "corrupt PNM: maxval %ld is not in 1..65535", p->maxval);
        return -1;
    }
    p->wide = p->bands == 1 && p->maxval > 255;
    return 0;
}

/* The fewest bytes the data can take (1 bit per PBM pixel, every plain
 * sample a digit and a blank): a short file fails before the image is
 * allocated. */
static size_t min_data(const pnm_t *p, size_t w, size_t h)
{
    size_t n = w * h * (size_t)p->bands;
    switch (p->kind) {
    case 1:
        return n;
    case 4:
        return (w + 7) / 8 * h;
    case 2:
    case 3:
        return 2 * n - 1;
    default:
        return n * (p->maxval > 255 ? 2 : 1);
    }
}

int decode_pnm_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    pnm_t p;
    long lw, lh;
    size_t pos;
    if (parse_header(buf, len, &p, &lw, &lh, &pos, err, errlen) != 0)
        return -1;
    *w = (int)lw;
    *h = (int)lh;
    return 0;
}

image_t *decode_pnm(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    pnm_t p;
    long w, h;
    size_t pos;
    if (parse_header(buf, len, &p, &w, &h, &pos, err, errlen) != 0)
        return NULL;
    if (len - pos < min_data(&p, (size_t)w, (size_t)h)) {
        err_set(err, errlen, "image file is truncated (PNM data ends early)");
        return NULL;
    }
    image_t *img = image_alloc((int)w, (int)h, p.bands, err, errlen);
    if (!img)
        return NULL;
    int rc = p.kind <= 3 ? read_plain(buf, len, pos, &p, img, err, errlen)
                         : read_binary(buf, len, pos, &p, img, err, errlen);
    if (rc != 0)
        image_destroy(&img);
    return img;
}
