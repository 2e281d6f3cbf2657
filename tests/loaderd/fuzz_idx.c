/* fuzz_idx — libFuzzer target for the IDX reader (plain and gzip): any
 * byte string is refused with a reason or yields exactly the declared
 * payload, and nothing is allocated on the header's word alone.
 *   CC=clang cmake -DDDPIPE_FUZZ=ON ... && ./fuzz_idx -max_total_time=60 corpus_idx */
#include "common/idx.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
unsigned long fuzz_accepted; /* inputs that parsed (the replay checks seeds) */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int ndims = 1; ndims <= IDX_MAX_DIMS; ndims++) {
        char err[256] = "";
        idx_file_t f;
        if (idx_parse_buffer(data, size, "fuzz", ndims, &f, err, sizeof err) != 0) {
            if (!err[0] || f.data)
                abort(); /* a refusal says why and keeps nothing */
            continue;
        }
        size_t n = 1;
        for (int d = 0; d < f.ndims; d++)
            n *= f.dims[d];
        if (f.ndims != ndims || n != f.len || !f.data || f.len > IDX_MAX_BYTES)
            abort();
        volatile uint8_t sink = f.data[0] ^ f.data[f.len - 1]; /* every byte is there */
        (void)sink;
        fuzz_accepted++;
        idx_file_free(&f);
    }
    return 0;
}
