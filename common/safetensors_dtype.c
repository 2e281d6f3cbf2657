/* safetensors element types: names, sizes, shapes as text, and the
 * conversions of half, bfloat16, double and integer tensors for the code
 * that computes in float or int64. */
#include "common/safetensors.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ dtypes */

static const struct {
    const char *name;
    size_t size;
} DTYPES[ST_DTYPE_COUNT] = {
    [ST_F64] = {"F64", 8}, [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2}, [ST_I64] = {"I64", 8}, [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1}, [ST_U8] = {"U8", 1},
    [ST_BOOL] = {"BOOL", 1},
};

const char *st_dtype_name(st_dtype_t dt)
{
    return (unsigned)dt < ST_DTYPE_COUNT ? DTYPES[dt].name : "?";
}

size_t st_dtype_size(st_dtype_t dt)
{
    return (unsigned)dt < ST_DTYPE_COUNT ? DTYPES[dt].size : 0;
}

int st_dtype_parse(const char *s, st_dtype_t *out)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(s, DTYPES[i].name) == 0) {
            *out = (st_dtype_t)i;
            return 0;
        }
    return -1;
}

char *st_shape_str(const int64_t *shape, int ndim, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "",
                                 (long long)shape[i]);
    if (used < len)
        snprintf(buf + used, len - used, "]");
    return buf;
}

/* ------------------------------------------------------- half conversions */

float st_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);    /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;                                /* signed zero */
    } else {                                        /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float st_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t st_f32_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40u);    /* quiet nan */
    bits += 0x7fffu + ((bits >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(bits >> 16);
}

uint16_t st_f32_to_f16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t absb = bits & 0x7fffffffu;
    if (absb > 0x7f800000u)
        return sign | 0x7e00u;                      /* nan */
    if (absb >= 0x477ff000u)                        /* rounds to >= 65520: inf */
        return sign | 0x7c00u;
    if (absb < 0x33000001u)                         /* < half the smallest subnormal */
        return sign;
    uint32_t exp = absb >> 23;
    uint32_t man = (absb & 0x7fffffu) | 0x800000u;
    int shift;
    uint32_t base;
    if (exp < 113) {                                /* subnormal half */
        shift = (int)(126 - exp);                   /* 14..24 */
        base = 0;
    } else {
        shift = 13;
        base = (exp - 112) << 10;
        man &= 0x7fffffu;
    }
    uint32_t q = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return (uint16_t)(sign | (base + q));           /* carry into exp is right */
}

/* ------------------------------------------------------------ conversion */

int st_tensor_to_f32(const st_tensor_t *t, float *out, size_t n)
{
    if (!t || (int64_t)n != t->numel)
        return -1;
    const uint8_t *s = t->data;
    switch (t->dtype) {
    case ST_F32:
        memcpy(out, s, n * 4);
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            out[i] = (float)d;
        }
        return 0;
    case ST_F16:
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(s[2 * i] | s[2 * i + 1] << 8);
            out[i] = t->dtype == ST_F16 ? st_f16_to_f32(h) : st_bf16_to_f32(h);
        }
        return 0;
    default:
        return -1;
    }
}

int st_tensor_to_i64(const st_tensor_t *t, int64_t *out, size_t n)
{
    if (!t || (int64_t)n != t->numel)
        return -1;
    const uint8_t *s = t->data;
    for (size_t i = 0; i < n; i++) {
        switch (t->dtype) {
        case ST_I64: memcpy(&out[i], s + 8 * i, 8); break;
        case ST_I32: { int32_t v; memcpy(&v, s + 4 * i, 4); out[i] = v; break; }
        case ST_I16: { int16_t v; memcpy(&v, s + 2 * i, 2); out[i] = v; break; }
        case ST_I8: out[i] = (int8_t)s[i]; break;
        case ST_U8:
        case ST_BOOL: out[i] = s[i]; break;
        default: return -1;
        }
    }
    return 0;
}
