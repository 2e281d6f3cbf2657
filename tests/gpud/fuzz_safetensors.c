/* fuzz_safetensors — libFuzzer target for the safetensors reader: any byte
 * string is either refused with a message or yields tensors whose every
 * claimed byte lies inside the buffer and whose conversions succeed.
 *   CC=clang cmake -DDDPIPE_FUZZ=ON ... && ./fuzz_safetensors -max_total_time=60 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    safetensors_t *st = safetensors_open_buffer(data, size, "fuzz", err, sizeof err);
    if (!st) {
        if (!err[0])
            abort();   /* a refusal must say why */
        return 0;
    }
    for (size_t i = 0; i < safetensors_count(st); i++) {
        const st_tensor_t *t = safetensors_at(st, i);
        if (safetensors_get(st, t->name) != t)
            abort();   /* lookup by name finds every tensor */
        size_t n = (size_t)t->numel;
        if (n > (1u << 20))
            continue;
        if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 ||
            t->dtype == ST_F64) {
            float *f = malloc((n ? n : 1) * sizeof *f);
            if (f && st_tensor_to_f32(t, f, n) != 0)
                abort();
            free(f);
        } else {
            int64_t *v = malloc((n ? n : 1) * sizeof *v);
            if (v && st_tensor_to_i64(t, v, n) != 0)
                abort();
            free(v);
        }
    }
    safetensors_destroy(&st);
    return 0;
}
