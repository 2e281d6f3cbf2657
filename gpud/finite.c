/* finite — the first non-finite float of an array (see finite.h). */
#include "gpud/finite.h"

#include "common/errbuf.h"

#include <string.h>

#define BLOCK 256   /* checked branch-free, then searched only when bad */

/* NaN and +-inf are the F32 values whose exponent bits are all ones. */
static int bad_bits(const unsigned char *p)
{
    uint32_t u;
    memcpy(&u, p, sizeof u);   /* unaligned data, no aliasing trouble */
    return (u & 0x7f800000u) == 0x7f800000u;
}

int64_t finite_first_bad(const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i += BLOCK) {
        size_t k = n - i < BLOCK ? n - i : BLOCK;
        int bad = 0;
        for (size_t j = 0; j < k; j++)
            bad |= bad_bits(p + 4 * (i + j));
        for (size_t j = 0; bad && j < k; j++)
            if (bad_bits(p + 4 * (i + j)))
                return (int64_t)(i + j);
    }
    return -1;
}

int finite_check(const char *name, const void *data, size_t n, char *err, size_t errlen)
{
    int64_t i = finite_first_bad(data, n);
    if (i < 0)
        return 0;
    float v;
    memcpy(&v, (const unsigned char *)data + 4 * (size_t)i, sizeof v);
    err_set(err, errlen, "%s: element %lld of %zu is %g", name, (long long)i, n, (double)v);
    return -1;
}
