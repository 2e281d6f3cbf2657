/* BMP, read directly, as Pillow 9.4's BmpImagePlugin reads it: headers of
 * 12 (OS/2), 40, 64, 108 and 124 bytes; 1/4/8-bit palettes, RLE8/RLE4,
 * 16-bit 5:5:5 and 5:6:5, 24-bit, 32-bit with the bitfield layouts PIL
 * knows; bottom-up or top-down rows. Alpha is dropped (convert("RGB")). */
#include "common/errbuf.h"
#include "common/image/decode_fmt.h"

#include <stdlib.h>
#include <string.h>

static uint32_t rd16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const uint8_t *p)
{
    return rd16(p) | rd16(p + 2) << 16;
}

/* How one stored pixel becomes RGB (PIL's raw modes). */
typedef enum { PX_PAL, PX_BGR15, PX_BGR16, PX_BGR24, PX_BGRX32, PX_XBGR32, PX_RGBX32 } px_t;

typedef struct {
    long long w, h;
    int top_down, bits, rle4, rle;
    px_t px;
    uint32_t colors, offset;
    size_t pos; /* where the palette (or the pixels) follows the header */
    int pal_pad;
} bmp_t;

static int masks_layout(bmp_t *b, const uint32_t m[4], char *err, size_t errlen)
{
    if (b->bits == 32) {
        if (m[0] == 0xFF000000u && m[1] == 0xFF0000u && m[2] == 0xFF00u &&
            (m[3] == 0 || m[3] == 0xFFu))
            b->px = PX_XBGR32;
        else if (m[0] == 0xFFu && m[1] == 0xFF00u && m[2] == 0xFF0000u && m[3] == 0xFF000000u)
            b->px = PX_RGBX32;
        else if ((m[0] == 0xFF0000u && m[1] == 0xFF00u && m[2] == 0xFFu &&
                  (m[3] == 0 || m[3] == 0xFF000000u)) ||
                 (!m[0] && !m[1] && !m[2] && !m[3]))
            b->px = PX_BGRX32;
        else
            goto bad;
        return 0;
    }
    if (b->bits == 24 && m[0] == 0xFF0000u && m[1] == 0xFF00u && m[2] == 0xFFu) {
        b->px = PX_BGR24;
        return 0;
    }
    if (b->bits == 16 && m[0] == 0xF800u && m[1] == 0x7E0u && m[2] == 0x1Fu) {
        b->px = PX_BGR16;
        return 0;
    }
    if (b->bits == 16 && m[0] == 0x7C00u && m[1] == 0x3E0u && m[2] == 0x1Fu) {
        b->px = PX_BGR15;
        return 0;
    }
bad:
    err_set(err, errlen, "unsupported BMP bitfields layout (%d bits, masks %08x %08x %08x)",
            b->bits, m[0], m[1], m[2]);
    return -1;
}

static int parse_header(const uint8_t *buf, size_t len, bmp_t *b, char *err, size_t errlen)
{
    if (len < 18) {
        err_set(err, errlen, "corrupt BMP: %zu bytes, shorter than its header", len);
        return -1;
    }
    memset(b, 0, sizeof *b);
    b->offset = rd32(buf + 10);
    uint32_t hs = rd32(buf + 14);
    if (hs != 12 && hs != 40 && hs != 64 && hs != 108 && hs != 124) {
        err_set(err, errlen, "unsupported BMP header size (%u)", hs);
        return -1;
    }
    if (len < 14 + (size_t)hs) {
        err_set(err, errlen, "image file is truncated (BMP header ends early)");
        return -1;
    }
    const uint8_t *hd = buf + 18;
    uint32_t comp = 0;
    b->pos = 14 + hs;
    if (hs == 12) {
        b->w = rd16(hd);
        b->h = rd16(hd + 2);
        b->bits = (int)rd16(hd + 6);
        b->pal_pad = 3;
    } else {
        /* PIL: a height whose top byte is 0xFF is negative, i.e. top-down */
        b->top_down = hd[7] == 0xFF;
        b->w = rd32(hd);
        b->h = b->top_down ? (long long)(0x100000000LL - rd32(hd + 4)) : (long long)rd32(hd + 4);
        b->bits = (int)rd16(hd + 10);
        comp = rd32(hd + 12);
        b->colors = rd32(hd + 28);
        b->pal_pad = 4;
    }
    if (image_check_dims(b->w, b->h, err, errlen) != 0)
        return -1;
    int bits = b->bits;
    if (bits != 1 && bits != 4 && bits != 8 && bits != 16 && bits != 24 && bits != 32) {
        err_set(err, errlen, "unsupported BMP pixel depth (%d bits)", bits);
        return -1;
    }
    if (!b->colors)
        b->colors = bits <= 8 ? 1u << bits : 0;
    if (b->offset == 14 + hs && bits <= 8)
        b->offset += 4 * b->colors; /* PIL's allowance for a palette the offset forgot */
    b->px = bits <= 8 ? PX_PAL : bits == 16 ? PX_BGR15 : bits == 24 ? PX_BGR24 : PX_BGRX32;
    if (comp == 3) { /* BITFIELDS: 40-byte headers keep 3 masks after the header */
        uint32_t m[4] = {0, 0, 0, 0};
        if (hs >= 56) {
            for (int i = 0; i < 4; i++)
                m[i] = rd32(hd + 36 + 4 * i);
        } else {
            if (len < b->pos + 12) {
                err_set(err, errlen, "image file is truncated (BMP bitfield masks missing)");
                return -1;
            }
            for (int i = 0; i < 3; i++)
                m[i] = rd32(buf + b->pos + 4 * i);
            b->pos += 12;
        }
        return masks_layout(b, m, err, errlen);
    }
    if (comp == 1 || comp == 2) {
        if (bits > 8) {
            err_set(err, errlen, "unsupported BMP: RLE compression with %d bits per pixel", bits);
            return -1;
        }
        b->rle = 1;
        b->rle4 = comp == 2;
    } else if (comp != 0) {
        err_set(err, errlen, "unsupported BMP compression (%u)", comp);
        return -1;
    }
    return 0;
}

/* The palette as RGB; entries PIL did not read keep its gray ramp. 1 when
 * every entry is gray (PIL's "1"/"L" mode: a 1-channel image). */
static int read_palette(const uint8_t *buf, size_t len, bmp_t *b, uint8_t pal[256][3],
                        char *err, size_t errlen)
{
    if (b->colors == 0 || b->colors > 65536) {
        err_set(err, errlen, "unsupported BMP palette size (%u)", b->colors);
        return -1;
    }
    for (int i = 0; i < 256; i++)
        pal[i][0] = pal[i][1] = pal[i][2] = (uint8_t)i;
    size_t have = len > b->pos ? (len - b->pos) / (size_t)b->pal_pad : 0;
    size_t n = have < b->colors ? have : b->colors;
    int gray = n == b->colors;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = buf + b->pos + i * (size_t)b->pal_pad;
        unsigned want = b->colors == 2 ? (i ? 255u : 0u) : (unsigned)i;
        if (e[0] != want || e[1] != want || e[2] != want)
            gray = 0;
        if (i < 256) {
            pal[i][0] = e[2];
            pal[i][1] = e[1];
            pal[i][2] = e[0];
        }
    }
    b->pos += n * (size_t)b->pal_pad;
    return gray;
}

/* PIL's BmpRleDecoder, quirks included, into IDX (w * h indices in file
 * row order). 0, or -1 when the data ends before the image is full. */
static int rle_decode(const uint8_t *buf, size_t len, size_t pos, const bmp_t *b, uint8_t *idx)
{
    const size_t w = (size_t)b->w, total = w * (size_t)b->h;
    size_t n = 0, x = 0;
#define PUT(v)                     \
    do {                           \
        if (n < total)             \
            idx[n] = (uint8_t)(v); \
        n++;                       \
    } while (0)
    while (n < total) {
        if (pos + 2 > len)
            break;
        unsigned count = buf[pos], byte = buf[pos + 1];
        pos += 2;
        if (count) { /* encoded run, clipped to the row */
            if (x + count > w)
                count = x < w ? (unsigned)(w - x) : 0;
            for (unsigned i = 0; i < count; i++)
                PUT(b->rle4 ? (i % 2 ? byte & 15 : byte >> 4) : byte);
            x += count;
        } else if (byte == 0) { /* end of line */
            while (n % w)
                PUT(0);
            x = 0;
        } else if (byte == 1) { /* end of bitmap */
            break;
        } else if (byte == 2) {
            /* delta; Pillow 9.4 reads its two bytes twice (a bug): the pair
             * after them is the offset used, and 4 bytes are consumed */
            if (pos + 4 > len)
                break;
            size_t skip = buf[pos + 2] + (size_t)buf[pos + 3] * w;
            pos += 4;
            for (size_t i = 0; i < skip && n < total; i++)
                PUT(0);
            x = n % w;
        } else { /* absolute run of BYTE pixels */
            size_t want = b->rle4 ? byte / 2 : byte;
            size_t got = len - pos < want ? len - pos : want;
            for (size_t i = 0; i < got; i++) {
                if (b->rle4) {
                    PUT(buf[pos + i] >> 4);
                    PUT(buf[pos + i] & 15);
                } else {
                    PUT(buf[pos + i]);
                }
            }
            pos += got;
            if (got < want)
                break;
            x += byte;
            if (pos % 2)
                pos++;
        }
    }
#undef PUT
    return n >= total ? 0 : -1;
}

static void put_px(const bmp_t *b, const uint8_t *s, size_t x, uint8_t pal[256][3], int gray,
                   uint8_t *out)
{
    uint32_t v;
    switch (b->px) {
    case PX_PAL: {
        unsigned i = b->bits == 8 ? s[x] : b->bits == 4 ? (s[x / 2] >> (x % 2 ? 0 : 4)) & 15
                                                          : (s[x / 8] >> (7 - x % 8)) & 1;
        if (gray)
            out[0] = pal[i][0];
        else
            memcpy(out, pal[i], 3);
        return;
    }
    case PX_BGR15: /* PIL's unpackers scale 5/6-bit fields with v * 255 / max */
        v = rd16(s + 2 * x);
        out[0] = (uint8_t)(((v >> 10) & 31) * 255 / 31);
        out[1] = (uint8_t)(((v >> 5) & 31) * 255 / 31);
        out[2] = (uint8_t)((v & 31) * 255 / 31);
        return;
    case PX_BGR16:
        v = rd16(s + 2 * x);
        out[0] = (uint8_t)(((v >> 11) & 31) * 255 / 31);
        out[1] = (uint8_t)(((v >> 5) & 63) * 255 / 63);
        out[2] = (uint8_t)((v & 31) * 255 / 31);
        return;
    case PX_BGR24:
        s += 3 * x;
        break;
    case PX_BGRX32:
        s += 4 * x;
        break;
    case PX_XBGR32:
        s += 4 * x;
        out[0] = s[3];
        out[1] = s[2];
        out[2] = s[1];
        return;
    case PX_RGBX32:
        memcpy(out, s + 4 * x, 3);
        return;
    }
    out[0] = s[2];
    out[1] = s[1];
    out[2] = s[0];
}

image_t *decode_bmp(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    bmp_t b;
    uint8_t pal[256][3];
    int gray = 0;
    if (parse_header(buf, len, &b, err, errlen) != 0)
        return NULL;
    if (b.px == PX_PAL && (gray = read_palette(buf, len, &b, pal, err, errlen)) < 0)
        return NULL;
    size_t off = b.offset ? b.offset : b.pos;
    const size_t w = (size_t)b.w, h = (size_t)b.h;
    uint8_t *idx = NULL;
    size_t stride;
    if (b.rle) {
        idx = malloc(w * h);
        if (!idx) {
            err_set(err, errlen, "out of memory for a %zux%zu image", w, h);
            return NULL;
        }
        if (off > len || rle_decode(buf, len, off, &b, idx) != 0) {
            free(idx);
            err_set(err, errlen, "image file is truncated (BMP RLE data ends early)");
            return NULL;
        }
        b.bits = 8; /* the rows below are indices, one byte each */
        stride = w;
    } else {
        stride = ((w * (size_t)b.bits + 31) >> 3) & ~(size_t)3;
        size_t row = (w * (size_t)b.bits + 7) / 8;
        if (off > len || (len - off) / stride < h - 1 || len - off - stride * (h - 1) < row) {
            err_set(err, errlen, "image file is truncated (BMP pixel data ends early)");
            return NULL;
        }
    }
    int c = b.px == PX_PAL && gray ? 1 : 3;
    image_t *img = image_alloc((int)w, (int)h, c, err, errlen);
    for (size_t y = 0; img && y < h; y++) {
        const uint8_t *s = idx ? idx + y * w : buf + off + y * stride;
        uint8_t *d = img->px + (b.top_down ? y : h - 1 - y) * w * (size_t)c;
        for (size_t x = 0; x < w; x++)
            put_px(&b, s, x, pal, c == 1, d + x * (size_t)c);
    }
    free(idx);
    return img;
}

int decode_bmp_probe(const uint8_t *buf, size_t len, int *w, int *h, char *err, size_t errlen)
{
    bmp_t b;
    if (parse_header(buf, len, &b, err, errlen) != 0)
        return -1;
    *w = (int)b.w;
    *h = (int)b.h;
    return 0;
}
