#!/usr/bin/python3
"""l2_order_model: what the 16-bit BatchNorm's pass order can save, by a
model of the device's L2, not a measurement (the measurement is gpu-check's
A/B `ddpipe bf16-bn-order-fwd`, DDPIPE_CUDA_BN_ORDER=0, on a device).

   python3 bench/l2_order_model.py [--arch resnet18|resnet50] [--batch 256] [--l2-mib 50]

The model: an LRU cache of --l2-mib MiB in 1 MiB lines. Each pass walks
its tensors side by side (their lines interleaved in proportion to their
sizes), forward or backward; every line a pass reads that is not cached
is read from HBM; what a pass writes is cached too (write-allocate). A
BatchNorm's chain in a training step, as gpud/cuda/cuda_bn16_kernels.cu
runs it: forward, the conv writes x, the mean's sums read x, the
variance's read x, the normalising pass reads x (and the block end's
residual) and writes y, the next conv reads y; backward, the dgrad conv
writes g, the gradient sums read x, the ReLU's output y (where it has
one) and g and (block ends) store dy', the apply reads x and dy' (or y
and g) and writes gx, the next dgrad reads gx. It prints, for all passes
forward (DDPIPE_CUDA_BN_ORDER=0) and for the alternation, the HBM bytes
the BatchNorm passes read in a step, and what that saves at 3.3 TB/s
(an H200's HBM3e rate a streaming kernel reaches, about 70 % of its
4.8). An H100/H200's L2 is not an LRU of one pool (two partitions, its
own replacement): read the saving as what the order can give at best.
"""
import argparse
from collections import OrderedDict

MIB = 1 << 20


def bn_layers(arch, n):
    """(elements of the BatchNorm's input, has a ReLU of its own, is a
    block end whose residual it adds) for every BatchNorm in order."""
    out = [(n * 64 * 112 * 112, True, False)]   # the stem
    sides = (56, 28, 14, 7)
    if arch == "resnet18":
        for i, width in enumerate((64, 128, 256, 512)):
            s = sides[i]
            for b in range(2):
                out.append((n * width * s * s, True, False))
                out.append((n * width * s * s, False, True))
                if i > 0 and b == 0:
                    out.append((n * width * s * s, False, False))   # the downsample's
        return out
    for i, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        s = sides[i]
        for b in range(blocks):
            s_in = sides[i - 1] if i > 0 and b == 0 else s   # v1.5: the stride in the 3x3
            out.append((n * width * s_in * s_in, True, False))
            out.append((n * width * s * s, True, False))
            out.append((n * width * 4 * s * s, False, True))       # the block end
            if b == 0:
                out.append((n * width * 4 * s * s, False, False))  # the downsample's
    return out


class Cache:
    def __init__(self, lines):
        self.lines, self.lru, self.hbm = lines, OrderedDict(), 0

    def touch(self, key, read, count):
        if key in self.lru:
            self.lru.move_to_end(key)
        else:
            if read and count:
                self.hbm += MIB
            self.lru[key] = 1
            if len(self.lru) > self.lines:
                self.lru.popitem(last=False)


def walk(cache, streams, rev, count):
    """streams: (name, bytes, read) walked side by side; rev: backwards."""
    n = [max(1, b // MIB) for _, b, _ in streams]
    total = max(n)
    for step in range(total):
        for (name, _, read), k in zip(streams, n):
            i = step * k // total
            if (step + 1) * k // total == i and step != total - 1:
                continue
            j = k - 1 - i if rev else i
            cache.touch((name, j), read, count)


def step_bytes(layers, l2_mib, alternate):
    cache = Cache(l2_mib)
    for li, (elems, relu, end) in enumerate(layers):
        b = elems * 2   # 16-bit activations
        x, y, g, gx, r, d = ("x", li), ("y", li), ("g", li), ("gx", li), ("r", li), ("d", li)
        fwd_rev = (True, False, True) if alternate else (False, False, False)
        walk(cache, [(x, b, False)], False, False)                  # the conv writes x
        walk(cache, [(x, b, True)], fwd_rev[0], True)               # the mean's sums
        walk(cache, [(x, b, True)], fwd_rev[1], True)               # the variance's
        walk(cache, [(x, b, True)] + ([(r, b, True)] if end else []) + [(y, b, False)],
             fwd_rev[2], True)                                      # normalise (+ residual)
        walk(cache, [(y, b, True)], False, False)                   # the next conv reads y
    for li, (elems, relu, end) in reversed(list(enumerate(layers))):
        b = elems * 2
        x, y, g, gx, d = ("x", li), ("y", li), ("g", li), ("gx", li), ("d", li)
        walk(cache, [(g, b, False)], False, False)                  # the dgrad conv writes g
        sums = [(x, b, True), (g, b, True)] + ([(y, b, True)] if relu or end else [])
        if end:
            sums.append((d, b, False))                              # dy' stored
        walk(cache, sums, alternate, True)
        app = [(x, b, True), (d, b, True)] if end else [(x, b, True), (g, b, True)] + (
            [(y, b, True)] if relu else [])
        walk(cache, app + [(gx, b, False)], False, True)            # the apply
        walk(cache, [(gx, b, True)], False, False)                  # the next dgrad reads gx
    return cache.hbm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="resnet18", choices=("resnet18", "resnet50"))
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--l2-mib", type=int, default=50)
    ap.add_argument("--hbm-tbs", type=float, default=3.3)
    a = ap.parse_args()
    layers = bn_layers(a.arch, a.batch)
    fwd = step_bytes(layers, a.l2_mib, False)
    alt = step_bytes(layers, a.l2_mib, True)
    save = fwd - alt
    print("%s batch %d, %d BatchNorms, L2 %d MiB (LRU model): the BatchNorm passes read %.2f GB "
          "from HBM all forward, %.2f GB alternating: %.2f GB less, %.2f ms a step at %.1f TB/s" % (
              a.arch, a.batch, len(layers), a.l2_mib, fwd / 1e9, alt / 1e9, save / 1e9,
              save / (a.hbm_tbs * 1e12) * 1e3, a.hbm_tbs))


if __name__ == "__main__":
    main()
