#!/usr/bin/python3
"""Golden of --precision fp16's rounding (docs/FP16.md), made by Debian's
PyTorch 1.13 (run with /usr/bin/python3; any CPU):

    gen_fp16.py        (writes tests/golden/fp16_io.safetensors)

  round_x, round_y   float32 values and torch's x.to(torch.float16).float():
                     round to nearest even at 1 + 2^-11 both ways and next
                     to the ties, 65504 and the overflow tie 65520 (-> inf),
                     float max, +-inf, NaNs, the smallest normal 2^-14 and
                     the ties around it, fp16 subnormals and their ties
                     (2^-25 -> 0, 3*2^-25 -> 2^-23), float subnormals, each
                     also negated; then 4096 random bit patterns and 4096
                     random floats with |x| log-uniform in [2^-30, 2^17]
                     (where fp16 has its subnormals, normals and overflow)
                     and a random sign, from np.random.RandomState(7)
Torch's NaNs may carry another payload than fp16_round's 0x7fc00000: the
test (tests/gpud/test_fp16.c) only asks that both be NaN."""
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_parity import save_safetensors  # noqa: E402


def fp16(x):
    return x.to(torch.float16).to(torch.float32)


def rounding_cases():
    f = np.float32
    bits = [0x00000000, 0x3f800000,     # 0, 1
            0x3f801000,                 # 1 + 2^-11: a tie, rounds to even (down, 1)
            0x3f803000,                 # 1 + 3*2^-11: tie, rounds to even (up, 1 + 2^-9)
            0x3f801001, 0x3f800fff,     # just above / below the first tie
            0x3f803001, 0x3f802fff,     # and the second
            0x477fe000,                 # 65504, the largest fp16
            0x477fefff,                 # 65519.99: below the tie, 65504
            0x477ff000,                 # 65520: the tie above 65504, to even (-> inf)
            0x47800000,                 # 65536 -> inf
            0x7f7fffff,                 # float max -> inf
            0x7f800000,                 # inf
            0x7fc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff, 0x7fc00001,  # NaNs
            0x38800000,                 # 2^-14, the smallest normal fp16
            0x38800001, 0x387fffff,     # just above / below it
            0x38801000,                 # 2^-14 (1 + 2^-11): tie, down to 2^-14
            0x387fe000,                 # 1023.5 * 2^-24: tie, up to 2^-14
            0x387fdfff,                 # just below: 1023 * 2^-24
            0x387fa000,                 # 1022.5 * 2^-24: tie, down to 1022 * 2^-24
            0x33800000,                 # 2^-24, the smallest fp16 subnormal
            0x33c00000,                 # 3 * 2^-25 = 1.5 * 2^-24: tie, up to 2^-23
            0x34200000,                 # 5 * 2^-25: tie, down to 2^-23
            0x33000000,                 # 2^-25: tie, to 0
            0x33000001,                 # 2^-25 + tiny: 2^-24
            0x32ffffff, 0x32800000,     # below 2^-25: 0
            0x33c00001, 0x33bfffff,     # next to the 1.5 * 2^-24 tie
            0x00000001, 0x00400000, 0x007fffff, 0x00800000]  # float subnormals, FLT_MIN
    bits += [b ^ 0x80000000 for b in bits]   # the negatives (and NaNs of sign 1)
    rng = np.random.RandomState(7)
    rand = rng.randint(0, 2 ** 32, size=4096, dtype=np.uint64).astype(np.uint32)
    mag = np.exp2(rng.uniform(-30.0, 17.0, size=4096)).astype(f)
    sign = np.where(rng.randint(0, 2, size=4096) == 1, f(-1), f(1))
    x = np.concatenate([np.array(bits, dtype=np.uint32), rand,
                        (mag * sign).astype(f).view(np.uint32)]).view(f)
    y = fp16(torch.from_numpy(x.copy())).numpy()
    return x, y


def main():
    out = {}
    out["round_x"], out["round_y"] = rounding_cases()
    meta = {"oracle": "torch %s x.to(torch.float16).to(torch.float32)" % torch.__version__}
    save_safetensors(os.path.join(HERE, "fp16_io.safetensors"), out, meta)
    print("fp16_io.safetensors: %d values" % len(out["round_x"]))


if __name__ == "__main__":
    main()
