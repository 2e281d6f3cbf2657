#!/usr/bin/python3
"""it_gpu_bundle: scripts/gpu-bundle.sh on a fake build tree, whole and with
--gpu-only (the bundle scripts/gpu-prepare.sh makes for a device call, whose
64 MiB the tree, the bundle and the t10k files share), then gpu-check's CPU
suite step on each.

The fake tree (CMakeCache.txt with DDPIPE_CUDA=ON, CTestTestfile.cmake with
a test labelled gpu and two that are not, and copies of /bin/true as its
programs, so that they are ELF files as the bundle's selection wants):

  - the whole bundle holds every program, no gpu-only mark;
  - --gpu-only holds bin/'s programs but its tests, the gpu-labelled test's
    program, and the programs the device scripts name under $BUILD
    (bench/cuda_resnet18, bench/step_bytes, bench/train_resnet18,
    tests/gpud/test_half_store, tests/gpud/cuda/test_cuda_bf16), and the
    mark; not the CPU tests' programs, bin/test_*, nor another bench;
  - gpu-check (a fake nvidia-smi, a zero time budget: every timed step NOT
    RUN) runs the CPU suite from the whole bundle (the fake CPU tests pass)
    and says NOT RUN for it, naming --gpu-only, from the other; the mark
    of an earlier --gpu-only bundle does not stay when a whole one is
    unpacked over it; gpu-check does not warn that NCCL is missing when
    the bundle holds gpud_cuda_nccl's program (a bundle has no
    CMakeCache.txt to say so);
  - in this build (with the cuda backend), every program the device
    scripts name under $BUILD (or gpu-e2e.sh's $BIN) exists: the list
    scripts/gpu-programs.sh --required gives, the one gpu-bundle.sh keeps
    (but those only looked for).
Takes seconds; no GPU, no network.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("FAIL: " + what, flush=True)


wd = tempfile.mkdtemp(prefix="ddp-gpu-bundle-")
build = os.path.join(wd, "build-gpu")
programs = ["bin/gpud", "bin/ddpipe", "bin/loaderd", "bin/test_tally",
            "bench/cuda_resnet18", "bench/step_bytes", "bench/train_resnet18", "bench/xsum_bench",
            "tests/gpud/test_half_store", "tests/gpud/test_arena",
            "tests/gpud/cuda/test_cuda_bf16", "tests/gpud/cuda/test_cuda_open",
            "tests/gpud/cuda/test_cuda_nccl",
            "tests/loaderd/test_resize"]
for p in programs:
    os.makedirs(os.path.dirname(os.path.join(build, p)), exist_ok=True)
    shutil.copy("/bin/true", os.path.join(build, p))
with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
    f.write("DDPIPE_CUDA:STRING=ON\n")
with open(os.path.join(build, "CTestTestfile.cmake"), "w") as f:
    for name, prog, label in (("gpud_cuda_open", "tests/gpud/cuda/test_cuda_open", "gpu"),
                              ("gpud_cuda_nccl", "tests/gpud/cuda/test_cuda_nccl", "gpu"),
                              ("gpud_arena", "tests/gpud/test_arena", "gpud"),
                              ("loaderd.resize", "tests/loaderd/test_resize", "loaderd")):
        f.write('add_test(%s "%s")\nset_tests_properties(%s PROPERTIES LABELS "%s")\n' % (
            name, os.path.join(build, prog), name, label))


def members(bundle):
    with tarfile.open(bundle) as t:
        names = t.getnames()
    prefix = build.lstrip("/") + "/"
    return {n[len(prefix):] for n in names if n.startswith(prefix)}


def bundle(*args):
    out = os.path.join(wd, "b%d.tar.xz" % len(os.listdir(wd)))
    r = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-bundle.sh")] + list(args) + [build, out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    print(r.stdout, flush=True)
    check(r.returncode == 0, "gpu-bundle.sh %s exited %d" % (" ".join(args), r.returncode))
    return out


whole = bundle()
slim = bundle("--gpu-only")
w, s = members(whole), members(slim)
check(set(programs) <= w and "bundle-gpu-only" not in w,
      "the whole bundle: every program, no mark; missing %s" % sorted(set(programs) - w))
want = {"bin/gpud", "bin/ddpipe", "bin/loaderd", "bench/cuda_resnet18", "bench/step_bytes",
        "bench/train_resnet18", "tests/gpud/test_half_store", "tests/gpud/cuda/test_cuda_bf16",
        "tests/gpud/cuda/test_cuda_open", "tests/gpud/cuda/test_cuda_nccl", "bundle-gpu-only"}
check(want <= s, "--gpu-only lacks %s" % sorted(want - s))
unwanted = {"bin/test_tally", "bench/xsum_bench", "tests/gpud/test_arena", "tests/loaderd/test_resize"}
check(not (unwanted & s), "--gpu-only holds the CPU suite's programs %s" % sorted(unwanted & s))
check("CTestTestfile.cmake" in s and any(m.startswith("lib-bundle") for m in s),
      "--gpu-only keeps ctest's files and lib-bundle/: %s" % sorted(s))

# gpu-check's CPU suite step on each bundle
fakebin = os.path.join(wd, "fakebin")
os.makedirs(fakebin)
smi = os.path.join(fakebin, "nvidia-smi")
with open(smi, "w") as f:
    f.write("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-fake)'\n")
os.chmod(smi, os.stat(smi).st_mode | stat.S_IXUSR)


def steps_of(b, tag):
    recdir = os.path.join(wd, "rec-" + tag)
    env = dict(os.environ, PATH=fakebin + ":" + os.environ["PATH"], PY="", GPU_CHECK_BUDGET="0",
               GPU_CHECK_RECORD_DIR=recdir)
    r = subprocess.run(["sh", os.path.join(SRC, "scripts", "gpu-check.sh"), "--bundle", b, "--quick",
                        "--fmnist", os.path.join(wd, "no-fmnist"), "--out", os.path.join(wd, "gc-" + tag)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    recs = os.listdir(recdir) if os.path.isdir(recdir) else []
    if len(recs) != 1:
        print(r.stdout[-3000:], flush=True)
        check(False, "%s: one record, got %s (exit %d)" % (tag, recs, r.returncode))
        return {}
    with open(os.path.join(recdir, recs[0])) as f:
        steps = json.load(f)["steps"]
    return {x["step"]: x for x in steps}


st = steps_of(slim, "slim")
got = st.get("ctest (CPU suite)", {})
check(got.get("result") == "not-run" and "--gpu-only" in got.get("reason", ""),
      "--gpu-only bundle: the CPU suite NOT RUN naming --gpu-only; got %s" % got)
# a bundle carries no CMakeCache.txt: its NCCL test's program says NCCL was built
check("NCCL" not in st, "a bundle with gpud_cuda_nccl's program: no NCCL warning; got %s" % st.get("NCCL"))
got = steps_of(whole, "whole").get("ctest (CPU suite)", {})
check(got.get("result") == "pass", "the whole bundle (over the slim one): the CPU suite ran; got %s" % got)

# the programs the device scripts name under $BUILD exist in this build
# (with the cuda backend: its test programs are the device's), so a renamed
# target fails here and not in a device call
build_here = os.path.dirname(os.environ.get("DDPIPE_BIN", ""))
if build_here and os.path.exists(os.path.join(build_here, "tests/gpud/cuda/test_cuda_open")):
    # the list gpu-bundle.sh --gpu-only keeps, but those only looked for
    # ([ -x "$BUILD/..." ]: gpud_cuda_nccl's, built with NCCL)
    named = set(subprocess.run(["sh", os.path.join(SRC, "scripts/gpu-programs.sh"), "--required"],
                               check=True, capture_output=True, text=True).stdout.split())
    missing = sorted(p for p in named if not os.access(os.path.join(build_here, p), os.X_OK))
    check(named and not missing, "programs scripts/gpu-*.sh name that %s lacks: %s (named: %s)" % (
        build_here, missing, sorted(named)))
    print("the device scripts name %d programs, all built: %s" % (len(named), " ".join(sorted(named))))
else:
    print("no cuda backend in this build: the device scripts' programs not looked for")

shutil.rmtree(wd, ignore_errors=True)
print("it_gpu_bundle: %s" % ("FAILED (%d)" % failures if failures else "all checks passed"))
sys.exit(1 if failures else 0)
