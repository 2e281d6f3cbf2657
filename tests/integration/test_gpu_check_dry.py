#!/usr/bin/python3
"""it_gpu_check_dry: scripts/gpu-check.sh, the one call a lent GPU machine
gets (docs/CUDA.md, issue 30 item 6), run whole on this CPU box against
fakes, so that a change to the script is caught here and not in a
15-minute device window:

  - a fake nvidia-smi on PATH (one "NVIDIA H200");
  - a fake bundle (scripts/gpu-bundle.sh's shape: a build tree with
    lib-bundle/) whose bench/cuda_resnet18 prints the bench line of its
    arguments (img/s derived from them, so every line differs), the profile
    and tune lines when their variables are set; bench/train_resnet18 and
    tests/gpud/test_half_store for the host CPU step likewise;
  - no Fashion-MNIST and no PyTorch with CUDA: those steps are NOT RUN;
  - a fake nvJPEG (DDPIPE_NVJPEG_LIB) whose version the record names.

Checked: the record lands in GPU_CHECK_RECORD_DIR (nothing under the
repository's bench/gpu), parses, names the machine, carries every bench
line under its key with the ratios the record computes (the tuned A/B, the
graph A/Bs, the variants' renamed precisions), the profile and tune lines,
the host CPU lines, and every step with a known result and its seconds;
the NOT RUN steps say why. Then scripts/gpu-probe.sh, the short call after
it, on the same fake bundle: every run's result lines in probe.txt under
its name (the profile's, with the host's "train profile" lines; the A/Bs
with their variables), the runs that fail here (no PyTorch) said with
their exit status, and the logs in one archive. Last scripts/gpu-nccl.sh,
the NCCL call, with a fake libnccl.so.2 (ncclGetVersion 23007) carried and
a gpud that needs one: gpud resolves the carried library first, both ctest
steps pass with it first on the path, the job is NOT RUN (no t10k); a gpud
whose old-style RPATH names another NCCL fails the call, naming it; with
--nvjpeg alone (an .xz) the library is unpacked and exported to
gpud_cuda_decode, no NCCL step runs. Takes
seconds; no GPU, no network.
"""
import json
import os
import stat
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_it import SRC, check, workdir  # noqa: E402

wd = os.path.abspath(workdir("gpu-check-dry"))
bindir = os.path.join(wd, "bin")
build = os.path.join(wd, "build-fake")
recdir = os.path.join(wd, "records")
out = os.path.join(wd, "out")


def script(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


script(os.path.join(bindir, "nvidia-smi"), r"""#!/bin/sh
case "$1" in
    -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-fake)" ;;
    --query-gpu=name) echo "NVIDIA H200" ;;
    --query-gpu=driver_version) echo "570.00" ;;
    *) echo "NVIDIA H200, 570.00, 143771 MiB" ;;
esac
""")
# img/s: 100 for eval, 50 for train, +10 for bf16, +1 per variable the
# variant set: each line its own figure, so a line filed under another
# key shows in the ratios
script(os.path.join(build, "bench", "cuda_resnet18"), r"""#!/bin/sh
what=$1; prec=fp32 arch=resnet18 seg=
while [ $# -gt 0 ]; do
    [ "$1" = --precision ] && prec=$2
    [ "$1" = --arch ] && arch=$2
    [ "$1" = --segments ] && seg=" segments=$2 flushes_per_step=7.0"
    shift
done
base=100; [ "$what" = train ] && base=50
[ "$prec" = bf16 ] && base=$((base + 10))
for v in DDPIPE_CUDNN_TUNE DDPIPE_CUDNN_GRAPH DDPIPE_CUDA_GRAPHS DDPIPE_CUDA_ALGO DDPIPE_HALF_ACTIVATIONS \
         DDPIPE_CUDA_S2D DDPIPE_CUDA_COPY_THREADS DDPIPE_EVAL_OVERLAP DDPIPE_TRAIN_OVERLAP \
         DDPIPE_TRAIN_FUSE DDPIPE_CUDA_BN_ORDER DDPIPE_CUDA_BN_MASK; do
    eval "set=\${$v:-}"; [ -n "$set" ] && base=$((base + 1))
done
[ -n "${DDPIPE_CUDA_PROFILE:-}" ] && echo "ddpipe INFO cuda profile graph [0] $what: conv 1.0 ms ($arch, fake)"
[ -n "${DDPIPE_TRAIN_PROFILE:-}" ] && echo "ddpipe INFO train profile conv     forward    0.001 s (fake)"
[ -n "${DDPIPE_CUDNN_TUNE:-}" ] && echo "ddpipe INFO cuda conv tune: 1 shapes timed, 1 layers: 1.0 ms (fake)" &&
    echo "ddpipe INFO cuda conv tune layer1: engine 1 (rank 0) 1.0 ms (fake)"
echo "ddpipe-cuda $arch $what img/s=$base.0 best_img/s=$base.5 batch=256 iters=3 precision=$prec$seg"
# the backend's closing line comes after the bench line (the real one's does)
[ "$prec" = bf16 ] && echo "2026-11-30T14:24:57.360Z ddpipe INFO cuda backend: 20 cuDNN graph plans in 6.67s (fake)"
exit 0
""")
script(os.path.join(build, "bench", "train_resnet18"), r"""#!/bin/sh
echo "ddpipe resnet18-train img/s=7.0 best_img/s=7.5 batch=32 threads=16 precision=bf16 (native: amx) half=${DDPIPE_HALF_ACTIVATIONS:-1}"
""")
script(os.path.join(build, "tests", "gpud", "test_half_store"), r"""#!/bin/sh
[ "$1" = cpu ] || exit 2
echo "test_half_store cpu: all checks passed"
""")
os.makedirs(os.path.join(build, "lib-bundle"), exist_ok=True)
with open(os.path.join(build, "lib-bundle", "README"), "w") as f:
    f.write("the fake bundle's libraries\n")
bundle = os.path.join(wd, "bundle.tar.xz")
with tarfile.open(bundle, "w:xz") as t:
    # gpu-bundle.sh's archive: the tree under its absolute path, without the leading /
    t.add(build, arcname=build.lstrip("/"))

repo_records = os.path.join(SRC, "bench", "gpu")
before = sorted(os.listdir(repo_records)) if os.path.isdir(repo_records) else []
# an nvJPEG gpu-check finds (DDPIPE_NVJPEG_LIB): a fake that tells its version
fake_nvj = os.path.join(wd, "fake-nvjpeg", "libnvjpeg.so.13")
os.makedirs(os.path.dirname(fake_nvj), exist_ok=True)
with open(fake_nvj + ".c", "w") as f:
    f.write("int nvjpegGetProperty(int t, int *v) { *v = t == 0 ? 13 : t == 1 ? 3 : 2; "
            "return 0; }\n")
r = subprocess.run(["cc", "-shared", "-fPIC", "-o", fake_nvj, fake_nvj + ".c"],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
check(r.returncode == 0, "cc (the fake nvJPEG): %s" % r.stdout)
env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"], PY="",
           GPU_CHECK_RECORD_DIR=recdir, GPU_CHECK_BUDGET="300", DDPIPE_NVJPEG_LIB=fake_nvj)
# PY empty: gpu-check looks for a python with torch + CUDA and finds none here
p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-check.sh"), "--bundle", bundle,
                    "--no-cpu-suite", "--quick", "--fmnist", os.path.join(wd, "no-fmnist"),
                    "--out", out], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True, timeout=400)
print(p.stdout[-3000:], flush=True)
check(p.returncode in (0, 1), "gpu-check exited %d (0: all passed, 1: a step failed)" % p.returncode)
after = sorted(os.listdir(repo_records)) if os.path.isdir(repo_records) else []
check(after == before, "gpu-check wrote under the repository's bench/gpu: %s" % sorted(set(after) - set(before)))

recs = [f for f in os.listdir(recdir)] if os.path.isdir(recdir) else []
check(len(recs) == 1 and recs[0].endswith(".json"), "one record in %s, got %s" % (recdir, recs))
with open(os.path.join(recdir, recs[0])) as f:
    rec = json.load(f)
check(rec["gpu"] == "NVIDIA H200" and rec["gpu_count"] == 1 and rec["driver"] == "570.00",
      "the machine: %r, %r, %r" % (rec["gpu"], rec["gpu_count"], rec["driver"]))
check(rec.get("nvjpeg") == {"version": "13.3.2", "path": fake_nvj},
      "the record's nvJPEG (the one gpu-check found): %r" % (rec.get("nvjpeg"),))

steps = rec["steps"]
known = {"pass", "fail", "not-run", "info", "warn"}
check(steps and all(s["result"] in known and isinstance(s.get("at_s"), int) for s in steps),
      "every step with a known result and its seconds: %s" % [s for s in steps if s["result"] not in known
                                                              or not isinstance(s.get("at_s"), int)][:3])
by = {s["step"]: s for s in steps}
check(rec["failed_steps"] == sum(s["result"] == "fail" for s in steps),
      "failed_steps %s against %d failed steps" % (rec["failed_steps"], sum(s["result"] == "fail" for s in steps)))
for name, why in (("e2e eval/train", "no Fashion-MNIST"), ("ctest (CPU suite)", "--no-cpu-suite"),
                  ("e2e bitwise training W = 1, 2, 3", "no Fashion-MNIST"),
                  ("bench torch eval", "no python with torch")):
    check(by.get(name, {}).get("result") == "not-run" and why in by[name]["reason"],
          "%s: not run because %r; got %s" % (name, why, by.get(name)))
# the fake bundle has no gpud_cuda_nccl program (nor CMakeCache.txt)
check(by.get("NCCL", {}).get("result") == "warn", "no NCCL test in the bundle: warned; got %s" % by.get("NCCL"))
for name in ("bench ddpipe eval fp32", "bench ddpipe train bf16", "bench ddpipe train bf16 tuned",
             "bench ddpipe train bf16 profile", "cpu host: native bf16 on 16-bit activations"):
    check(by.get(name, {}).get("result") == "pass", "%s passed on the fakes: %s" % (name, by.get(name)))

bench = rec["bench"]
ev, tr = bench["eval"]["img_s"], bench["train"]["img_s"]
check(ev["ddpipe fp32"]["img_s"] == 100.0 and ev["ddpipe bf16"]["img_s"] == 110.0 and
      tr["ddpipe fp32"]["img_s"] == 50.0 and tr["ddpipe bf16"]["img_s"] == 60.0,
      "the default bench lines under their keys: eval %s, train %s" % (sorted(ev), sorted(tr)))
# the variants: renamed precisions, their own figures (one variable more each)
for fig, key, want in ((tr, "ddpipe bf16-tuned", 61.0), (ev, "ddpipe bf16-tuned", 111.0),
                       (ev, "ddpipe fp32-graphs-off", 101.0), (ev, "ddpipe fp32-cudnn-graph-off", 101.0),
                       (ev, "ddpipe bf16-inturn", 111.0), (tr, "ddpipe bf16-inturn", 61.0),
                       (tr, "ddpipe bf16-unfused", 61.0), (tr, "ddpipe bf16-bn-order-fwd", 61.0),
                       (tr, "ddpipe bf16-bn-mask-off", 61.0),
                       (tr, "ddpipe fp32-cudnn-graph-off", 51.0)):
    check(key in fig and fig[key]["img_s"] == want, "%s: want img/s %s, got %s" % (key, want, fig.get(key)))
r50 = bench.get("resnet50 train", {}).get("img_s", {})
check(r50.get("ddpipe bf16", {}).get("img_s") == 60.0, "ResNet-50's line under its own key: %s" % r50)
check(rec["cudnn_tuned"]["train_bf16"]["tuned_over_heuristics"] == round(61.0 / 60.0, 3),
      "the tuned A/B ratio: %s" % rec["cudnn_tuned"])
check(rec["cuda_graphs_eval_fp32"]["on_over_off"] == round(100.0 / 101.0, 3),
      "the graphs A/B ratio: %s" % rec["cuda_graphs_eval_fp32"])
check(len(rec["cudnn_tune_train_bf16"]) == 1 and len(rec["cudnn_tune_shapes_train_bf16"]) == 1 and
      rec["cuda_profile_train_bf16"], "the tune and profile lines: %s, %s, %s" % (
          rec["cudnn_tune_train_bf16"], rec["cudnn_tune_shapes_train_bf16"], rec["cuda_profile_train_bf16"]))
# ResNet-50's profile under its own key, its line from a resnet50 run (the fake prints its arch)
check(by.get("bench ddpipe resnet50 train bf16 profile", {}).get("result") == "pass" and
      rec.get("cuda_profile_resnet50_train_bf16") and
      all("(resnet50, fake)" in l for l in rec["cuda_profile_resnet50_train_bf16"]) and
      not any("resnet50" in l for l in rec["cuda_profile_train_bf16"]),
      "ResNet-50's profile: %s, %s; ResNet-18's %s" % (
          by.get("bench ddpipe resnet50 train bf16 profile"), rec.get("cuda_profile_resnet50_train_bf16"),
          rec["cuda_profile_train_bf16"]))
tags = [l.split(":")[0] for l in rec["cpu_host"]]
check(tags == ["default", "native-any-layout", "native-fp32-buffers", "emulated"],
      "the host CPU lines, tagged: %s" % rec["cpu_host"])
check("half=0" in rec["cpu_host"][2], "the fp32-buffers variant ran with its variable: %s" % rec["cpu_host"][2])
print("gpu-check dry run: exit %d, %d steps (%d pass, %d fail, %d not run), record %s" % (
    p.returncode, len(steps), sum(s["result"] == "pass" for s in steps),
    sum(s["result"] == "fail" for s in steps), sum(s["result"] == "not-run" for s in steps), recs[0]))

# gpu-probe.sh on the same bundle
pout = os.path.join(wd, "probe")
p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-probe.sh"), "--bundle", bundle,
                    "--out", pout, "--py", os.path.join(bindir, "no-python")],
                   env=dict(env, PROBE_STEP_S="60"), stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=400)
print(p.stdout[-2000:], flush=True)
check(p.returncode == 0, "gpu-probe exited %d" % p.returncode)
probe = open(os.path.join(pout, "probe.txt")).read().splitlines()
names = {l.split(":")[0] for l in probe}
for want in ("profile-eval", "profile-train", "default-eval", "default-train", "copy1-eval",
             "copy1-train", "s2d0-eval", "graphs0-eval", "graphs0-train", "inturn-eval",
             "mb16-eval", "mb16-inturn-eval", "inturn-train", "unfused-train", "torch-eval",
             "torch-train", "profile-r50-train", "r50-train", "r50-unfused-train",
             "torch-r50-train", "torch-r50-det-train", "r50-tuned-train", "torch-compile-train",
             "segments8-train"):
    check(want in names, "probe.txt has %s's lines: %s" % (want, sorted(names)))
def lines(name):
    return [l for l in probe if l.startswith(name + ":")]
check(any("cuda profile graph" in l for l in lines("profile-train")) and
      any("train profile" in l for l in lines("profile-train")),
      "the training profile with the host's lines: %s" % lines("profile-train"))
# the variants ran with their variables (the fake adds 1 to img/s per variable set)
for name, want in (("default-train", "img/s=60.0"), ("graphs0-train", "img/s=61.0"),
                   ("s2d0-eval", "img/s=111.0"), ("copy1-eval", "img/s=111.0"),
                   ("inturn-eval", "img/s=111.0"), ("mb16-eval", "img/s=110.0"),
                   ("mb16-inturn-eval", "img/s=111.0"), ("inturn-train", "img/s=61.0"),
                   ("unfused-train", "img/s=61.0"), ("r50-train", "img/s=60.0"),
                   ("r50-unfused-train", "img/s=61.0"), ("r50-tuned-train", "img/s=61.0")):
    check(any(want in l for l in lines(name)), "%s: want %s, got %s" % (name, want, lines(name)))
check(any("img/s=60.0" in l and "segments=8 flushes_per_step=" in l
          for l in lines("segments8-train")),
      "the pass in 8 segments: %s" % lines("segments8-train"))
check(any("cuda conv tune: " in l for l in lines("r50-tuned-train")),
      "the tuned ResNet-50 run's tune summary: %s" % lines("r50-tuned-train"))
for name in ("torch-eval", "torch-r50-det-train", "torch-compile-train"):
    check(any("exit" in l for l in lines(name)), "the PyTorch run's failure said: %s" % lines(name))
with tarfile.open(os.path.join(pout, "logs.tar.gz")) as t:
    logs = sorted(os.path.basename(n) for n in t.getnames() if n.endswith(".log"))
check("graphs0-train.log" in logs and "profile-eval.log" in logs, "the logs archived: %s" % logs)
print("gpu-probe dry run: %d lines in probe.txt, %d logs archived" % (len(probe), len(logs)))

# the probe's budget: past it no step starts, and each says so
pout0 = os.path.join(wd, "probe0")
p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-probe.sh"), "--bundle", bundle,
                    "--out", pout0, "--py", os.path.join(bindir, "no-python")],
                   env=dict(env, PROBE_STEP_S="60", PROBE_BUDGET="0"), stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=400)
check(p.returncode == 0, "gpu-probe with no budget exited %d" % p.returncode)
probe0 = open(os.path.join(pout0, "probe.txt")).read().splitlines()
check(probe0 and all("not run: probe budget" in l or l == "ncu: not on PATH" for l in probe0) and
      any(l.startswith("default-train:") for l in probe0) and any(l.startswith("ctest:") for l in probe0),
      "with PROBE_BUDGET=0 every step said not run: %s" % probe0[:5])
print("gpu-probe with no budget: %d steps not run" % len(probe0))

# scripts/gpu-nccl.sh, the NCCL call after them (docs/CUDA.md "NCCL in
# gpud"), on the same bundle: gpud here is a small ELF program needing
# libnccl.so.2, the carried library a fake whose ncclGetVersion says 23007,
# ctest a fake that prints what the test would and the library path it got
fake = os.path.join(wd, "fake-nccl")
os.makedirs(os.path.join(fake, "other"), exist_ok=True)
with open(os.path.join(fake, "nccl.c"), "w") as f:
    f.write("int ncclGetVersion(int *v) { *v = VERSION; return 0; }\n")
with open(os.path.join(fake, "gpud.c"), "w") as f:
    f.write("int ncclGetVersion(int *v);\nint main(void) { int v; return ncclGetVersion(&v); }\n")


def cc(*args):
    r = subprocess.run(["cc"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check(r.returncode == 0, "cc %s: %s" % (" ".join(args), r.stdout))


carried = os.path.join(fake, "libnccl.so.2")
other = os.path.join(fake, "other", "libnccl.so.2")
cc("-shared", "-fPIC", "-DVERSION=23007", "-Wl,-soname,libnccl.so.2", "-o", carried, os.path.join(fake, "nccl.c"))
cc("-shared", "-fPIC", "-DVERSION=22803", "-Wl,-soname,libnccl.so.2", "-o", other, os.path.join(fake, "nccl.c"))
gpud = os.path.join(build, "bin", "gpud")
os.makedirs(os.path.dirname(gpud), exist_ok=True)
cc("-o", gpud, os.path.join(fake, "gpud.c"), other)   # needs libnccl.so.2 (its soname)
script(os.path.join(bindir, "ctest"), r"""#!/bin/sh
t=$(echo "$2" | tr -d '^$')
echo "1: LD_LIBRARY_PATH=$LD_LIBRARY_PATH DDPIPE_NVJPEG_LIB=${DDPIPE_NVJPEG_LIB:-}"
[ "$t" = gpud_cuda_nccl ] && echo "1: test_cuda_nccl: two ranks on one GPU (NCCL 23007 loaded)"
echo "1: $t: all checks passed"
echo "1/1 Test #1: $t ....   Passed    0.10 sec"
""")


def gpu_nccl(nout, libs=None):
    """gpu-nccl.sh with the carried fake, no t10k: its process and nccl.txt's lines"""
    p = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-nccl.sh"), "--bundle", bundle] +
                       (libs or ["--nccl", carried]) +
                       ["--fmnist", os.path.join(wd, "no-fmnist"), "--out", nout],
                       env=dict(env, NCCL_STEP_S="60"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=400)
    print(p.stdout[-2000:], flush=True)
    return p, open(os.path.join(nout, "nccl.txt")).read().splitlines()


nout = os.path.join(wd, "nccl")
p, nccl_lines = gpu_nccl(nout)
got = {l[8:41].strip(): (l[:8].strip(), l[41:]) for l in nccl_lines}
check(p.returncode == 0, "gpu-nccl exited %d with the carried library loaded" % p.returncode)
check(got.get("nccl loaded", ("",))[0] == "PASS" and "version code 23007" in got["nccl loaded"][1] and
      os.path.join(nout, "lib", "libnccl.so.2") in got["nccl loaded"][1],
      "gpud loads the carried library, version 23007: %s" % (got.get("nccl loaded"),))
for t in ("gpud_cuda_nccl", "gpud_cuda_collective"):
    check(got.get(t, ("",))[0] == "PASS", "%s passed: %s" % (t, got.get(t)))
check("two ranks on one GPU" in got["gpud_cuda_nccl"][1], "the two ranks' line said: %s" % (got["gpud_cuda_nccl"],))
log = open(os.path.join(nout, "logs", "gpud_cuda_nccl.log")).read()
check("LD_LIBRARY_PATH=" + os.path.join(nout, "lib") + ":" in log,
      "the tests ran with the carried library first on the path: %s" % log[:300])
check(got.get("gpud + NCCL 2-process training", ("",))[0] == "NOTRUN",
      "no t10k here: the job not run: %s" % (got.get("gpud + NCCL 2-process training"),))
check(os.path.exists(os.path.join(nout, "logs.tar.gz")), "the logs archived")
# a gpud whose RPATH (old style: before LD_LIBRARY_PATH) names another NCCL:
# the call fails and says which library gpud resolves instead
cc("-o", gpud, os.path.join(fake, "gpud.c"), other,
   "-Wl,--disable-new-dtags,-rpath," + os.path.dirname(other))
p, nccl_lines = gpu_nccl(os.path.join(wd, "nccl2"))
loaded = [l for l in nccl_lines if "nccl loaded" in l]
check(p.returncode == 1 and loaded and loaded[0].startswith("FAIL") and other in loaded[0] and
      "22803" in loaded[0], "another NCCL resolved: exit %d, %s" % (p.returncode, loaded))
print("gpu-nccl dry run: %s; with another NCCL first: %s" % (got["nccl loaded"][1], loaded))

# --nvjpeg alone (--decode gpu's library, as .xz): unpacked beside the
# others, exported to gpud_cuda_decode; the e2e JPEG job fails here (no
# ddpipe in the fake bundle) and says so; no NCCL step runs
nv = os.path.join(fake, "libnvjpeg.so.13")
with open(nv, "wb") as f:
    f.write(b"not really nvJPEG")
subprocess.run(["xz", "-kf", nv], check=True)
nout3 = os.path.join(wd, "nccl3")
p, lines = gpu_nccl(nout3, ["--nvjpeg", nv + ".xz"])
got = {l[8:41].strip(): (l[:8].strip(), l[41:]) for l in lines}
want_lib = os.path.join(nout3, "lib", "libnvjpeg.so.13")
check(open(want_lib, "rb").read() == b"not really nvJPEG", "the carried nvJPEG unpacked")
check(got.get("gpud_cuda_decode", ("",))[0] == "PASS", "gpud_cuda_decode: %s" % (got.get("gpud_cuda_decode"),))
log = open(os.path.join(nout3, "logs", "gpud_cuda_decode.log")).read()
check("DDPIPE_NVJPEG_LIB=" + want_lib in log, "gpud_cuda_decode ran with the carried nvJPEG: %s" % log[:300])
check(got.get("e2e-jpeg --decode gpu", ("",))[0] == "FAIL" and p.returncode == 1,
      "the e2e JPEG job cannot run here and says so: exit %d, %s" % (p.returncode, got.get("e2e-jpeg --decode gpu")))
check(not any("nccl" in k for k in got), "no NCCL step without --nccl: %s" % list(got))
print("gpu-nccl --nvjpeg dry run: %s" % (got["gpud_cuda_decode"],))
