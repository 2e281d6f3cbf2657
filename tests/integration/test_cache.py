"""--cache (issue 14 item 5): training samples kept decoded so the epochs
after the first decode no file, with the same pixels as without it. A copy
of 997 Fashion-MNIST JPEGs in class folders, --limit 256, 2 epochs:

  crop      --augment crop-flip (RandomResizedCrop: the whole decoded image
            is kept): --cache memory and --cache DIR give weights equal bit
            for bit to the run without a cache; loaderd counts 256 misses
            (epoch 1) and 256 hits (epoch 2);
  reuse     the same DIR again: the earlier run's samples are taken up, 512
            hits and no miss, the same weights;
  changed   one file's mtime changes: that sample misses in both epochs
            (its entry is for the old file), the rest hit, the same weights;
  fixed     --augment flip (no crop: the resized, cropped sample is kept
            before the flip): the same weights with and without the cache.

Counts, not speed: bench/cache_bench.sh measures the epochs' throughput."""
import os
import re
import shutil
from ddp_it import *

wd = workdir("cache")
data = os.path.join(wd, "images")
if not os.path.isdir(data):
    shutil.copytree(jpeg_folder(), data)
N = 256
base_flags = ["--epochs", "2", "--seed", "4", "--limit", str(N), "--batch-size", "32",
              "--lr", "0.01"]


def run(name, extra):
    out = os.path.join(wd, name)
    run_train(data, out, 1, base_flags + extra)
    return out


def cache_counts(out):
    text = read(os.path.join(out, "logs", "loaderd.log"))
    m = re.search(r"--cache: (\d+) hits, (\d+) misses", text)
    check(m is not None, "%s: loaderd logged no cache counts:\n%s" % (out, text[-1500:]))
    return int(m.group(1)), int(m.group(2))


def same(a, b, what):
    d, name = weights_diff(os.path.join(a, "model.safetensors"), os.path.join(b, "model.safetensors"))
    check(d == 0, "%s: %s differs by %.3g from the run without a cache" % (what, name, d))


crop = ["--augment", "crop-flip"]
plain = run("crop-plain", crop)
mem = run("crop-memory", crop + ["--cache", "memory"])
same(plain, mem, "crop, --cache memory")
check(cache_counts(mem) == (N, N), "crop, memory: hits/misses %r, want (%d, %d)" % (cache_counts(mem), N, N))
cdir = os.path.join(wd, "cache-dir")
shutil.rmtree(cdir, ignore_errors=True)
d1 = run("crop-dir", crop + ["--cache", cdir])
same(plain, d1, "crop, --cache DIR")
check(cache_counts(d1) == (N, N), "crop, DIR: hits/misses %r" % (cache_counts(d1),))
print("crop: memory and DIR caches give the same weights; %d misses then %d hits" % (N, N), flush=True)

d2 = run("crop-reuse", crop + ["--cache", cdir])
same(plain, d2, "reuse")
check(cache_counts(d2) == (2 * N, 0), "reuse: hits/misses %r, want (%d, 0)" % (cache_counts(d2), 2 * N))
check("taken up" in read(os.path.join(d2, "logs", "loaderd.log")), "reuse: no 'taken up' line")
print("reuse: the next run decodes nothing (%d hits)" % (2 * N), flush=True)

# one file changes (its mtime): its entry no longer counts
first = sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))[0]
f = os.path.join(data, first, sorted(os.listdir(os.path.join(data, first)))[0])
st = os.stat(f)
os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
d3 = run("crop-changed", crop + ["--cache", cdir])
same(plain, d3, "changed")
hits, misses = cache_counts(d3)
check(misses in (0, 2) and hits + misses == 2 * N,
      "changed: hits/misses %r, want 2 misses if the file is among the %d (else 0)" % ((hits, misses), N))
print("changed: %d misses for the touched file, the rest hit" % misses, flush=True)

fixed = ["--augment", "flip"]
p2 = run("fixed-plain", fixed)
m2 = run("fixed-memory", fixed + ["--cache", "memory"])
same(p2, m2, "fixed, --cache memory")
check(cache_counts(m2) == (N, N), "fixed: hits/misses %r" % (cache_counts(m2),))
print("fixed: the same weights with the resized samples kept")
print("1 passed, 0 failed")
