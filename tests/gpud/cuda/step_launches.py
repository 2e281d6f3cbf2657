"""gpud_cuda_step_launches_emu: what one bf16 training step of ResNet-18
launches on the cuda backend, from the kernel emulator's trace (CUEMU_TRACE,
tests/gpud/cuemu/cuemu.h), against the counts below: a change that adds a
launch, a copy or a memset to the step (a fusion undone, a cast per op, a
transfer per step) fails here, without a GPU. The emulator cannot time a
launch; on an H100/H200 a small kernel in a recorded graph costs about
2.5 us, and the step's copies are host<->device bytes (docs/CUDA.md).

The sequence does not depend on the batch or the image size, so a batch
of 2 at 32x32 shows a step of 256 at 224x224. A step is the trace between
two optimizer launches (k_sgd_multi); the last of three is taken. When a
change moves a count on purpose, set EXPECTED to the new figures and say
why in its commit (bench/RESULTS.md keeps the table).

    step_launches.py BENCH   (bench/cuda_resnet18.c built on the emulator)
"""
import collections
import os
import subprocess
import sys
import tempfile

# kernels by name, the cuDNN graphs, the GEMMs, and the copies as
# (direction, bytes): labels and sample ids in, the bench's logits out
# (2 x 1000 floats; gpud's step reads top-k and the loss instead)
EXPECTED = {
    "kernels": 224,
    "k16_sum_slices": 60,
    "k16_chan_sums8<__nv_bfloat16>": 40,
    "k16_bn_apply8<__nv_bfloat16>": 20,
    "k16_grad_sums8<__nv_bfloat16>": 20,
    "k16_grad_apply8<__nv_bfloat16>": 20,
    "k_weights<__nv_bfloat16>": 19,
    "k_weights_back<__nv_bfloat16>": 19,
    "k_acc8<__nv_bfloat16>": 1,
    "k_sgd_multi": 1,
    "cudnn": 59,
    "cublas": 3,
    "memset": 0,
}
COPIES = sorted([("H2D", 8), ("H2D", 8), ("D2D", 8), ("D2H", 8000)])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory(prefix="ddp-step-launches-") as d:
        trace = os.path.join(d, "trace.txt")
        env = dict(os.environ, DDPIPE_TEST_EMULATED="1", CUEMU_TRACE=trace)
        p = subprocess.run([sys.argv[1], "train", "--batch", "2", "--size", "32", "--iters",
                            "2", "--warmup", "1", "--precision", "bf16"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=600)
        if p.returncode != 0:
            sys.exit("FAIL: the bench exited %d:\n%s" % (p.returncode, p.stdout[-3000:]))
        lines = open(trace).read().splitlines()
    ends = [i for i, l in enumerate(lines) if l.startswith("kernel k_sgd_multi ")]
    if len(ends) < 3:
        sys.exit("FAIL: %d optimizer launches in the trace, want 3 (warmup + 2 steps); "
                 "is CUEMU_TRACE read?" % len(ends))
    step = lines[ends[-2] + 1:ends[-1] + 1]
    got = collections.Counter()
    copies = []
    for l in step:
        w = l.split()
        if w[0] == "kernel":
            got["kernels"] += 1
            got[w[1]] += 1
        elif w[0] == "copy":
            copies.append((w[1], int(w[2])))
        else:
            got[w[0]] += 1
    bad = ["%s: %d, want %d" % (k, got[k], v) for k, v in EXPECTED.items() if got[k] != v]
    if sorted(copies) != COPIES:
        bad.append("copies %s, want %s" % (sorted(copies), COPIES))
    if bad:
        print("the step's kernels:")
        for k, v in sorted(got.items(), key=lambda kv: -kv[1]):
            print("  %5d %s" % (v, k))
        sys.exit("FAIL: ResNet-18's bf16 training step on the emulator launches other than "
                 "it did:\n  " + "\n  ".join(bad))
    print("ResNet-18 bf16 training step: %d kernels, %d cuDNN graphs, %d GEMMs, %d copies "
          "(%d bytes), no memset" % (got["kernels"], got["cudnn"], got["cublas"], len(copies),
                                     sum(b for _, b in copies)))


if __name__ == "__main__":
    main()
