"""--decode gpu in whole jobs without a GPU (docs/CUDA.md "Decoding on the
GPU"): the emulated gpud (tests/gpud/cuemu, DDPIPE_EMU_GPUD) with the fake
nvJPEG (tests/gpud/cuemu/fake_nvjpeg.c, DDPIPE_EMU_NVJPEG: libjpeg-turbo's
pixels, so the device's decode equals the host's bit for bit) beside the
real ddpipe, loaderd, reducerd and reporterd.

48 Fashion-MNIST test images as 40x36 colour JPEGs, one of them damaged
past decoding, evaluated by the demo WideResNet through Resize(32) +
CenterCrop(28) to one channel (PIL's L, which the device computes in its
resize), --wire jpeg --no-dct-scaling on --device cuda:
  - --decode cpu with 1 worker, --decode gpu with 1 and 2 workers: the same
    summary counts and predictions.csv byte for byte; the damaged file
    failed once, its reason in reducerd.log as with cpu;
  - each gpud's log names the (fake) nvJPEG it loaded and what its batches
    did, and its input path read the decoded batches in device memory (no
    upload of them); with batches of 16 (whole micro-batches) no batch was
    copied back to the host; the 2-worker run's batches of 20 end in short
    micro-batches, padded on the host, so theirs were (a batch the host
    reads without its copy gives other predictions);
  - training, 2 ranks, 2 epochs, --augment crop-flip, a --val set: the
    same model.safetensors bytes with --decode gpu as with cpu (each
    sample's random crop and flip drawn as on the host, the damaged file
    failed at its rank);
  - --decode gpu where nvJPEG cannot be loaded: the job fails at the
    workers' start with gpud's reason (what to install), no batch run;
  - refused by ddpipe before anything starts: --decode gpu without --wire
    jpeg, or on --device cpu.

Run by ctest as it_cuda_emu_decode."""
import glob
import os
import re
import subprocess

from ddp_it import *  # noqa: E402
from ddp_emu import remove, use_emulated_gpud

EMU_BIN = use_emulated_gpud()
NVJPEG = os.environ["DDPIPE_EMU_NVJPEG"]
wd = workdir("cuda-emu-decode")

try:
    data = os.path.join(wd, "data")
    subprocess.run([os.path.join(BIN, "ddpipe-mkjpeg"), "idx:%s/t10k" % FMNIST, data,
                    "--count", "48", "--size", "40x36", "--rgb"], check=True,
                   stdout=subprocess.DEVNULL)
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(data) for f in fs
                   if f.endswith(".jpg"))
    check(len(files) == 48, "%d JPEGs made, want 48" % len(files))
    bad = files[7]
    open(bad, "wb").write(b"\xff\xd8\xff\xe0 not a jpeg at all\xff\xd9")
    base = ["--device", "cuda", "--wire", "jpeg", "--no-dct-scaling", "--resize", "32",
            "--crop", "28", "--predictions", "all"]
    env = {"DDPIPE_NVJPEG_LIB": NVJPEG}
    runs = {}
    for decode, w, bs in (("cpu", 1, 16), ("gpu", 1, 16), ("gpu", 2, 20)):
        out = os.path.join(wd, "eval-%s-w%d" % (decode, w))
        run_eval(data, out, workers=w, batch=bs, timeout=600, env=env,
                 extra=base + ["--decode", decode])
        runs[decode, w] = out
        s = summary(out)
        check(s["planned"] == 48 and s["samples"] == 47 and s["failed"] == 1,
              "%s: planned %s samples %s failed %s, want 48/47/1" % (out, s["planned"],
                                                                    s["samples"], s["failed"]))
        red = read(os.path.join(out, "logs", "reducerd.log"))
        check(os.path.basename(bad) in red, "%s: reducerd.log does not name %s" % (out, bad))
        views = copies = 0
        for g in range(w):
            log = read(os.path.join(out, "logs", "gpud.%d.log" % g))
            if decode == "gpu":
                check("decode gpu: nvJPEG 13." in log and NVJPEG in log,
                      "%s: gpud %d does not name the nvJPEG it loaded" % (out, g))
                m = re.search(r"images by nvJPEG.*; (\d+) input writes read the decoded batch "
                              r"in device memory; (\d+) batches copied back for the host", log)
                check(m, "%s: gpud %d has no decode summary" % (out, g))
                views += int(m.group(1)) if m else 0
                copies += int(m.group(2)) if m else 0
            else:
                check("decode gpu" not in log, "%s: --decode cpu touched nvJPEG" % out)
        # the input path normalised the decoded batches where they were
        # made, no upload of theirs (cuda_input.c, cu_decode_device_view)
        check(decode == "cpu" or views > 0, "%s: no input write read a decoded batch in device "
              "memory" % out)
        # the host reads a decoded batch only to pad a short micro-batch
        # (the default micro-batch is 16): copied back then, never else
        check(decode == "cpu" or (copies == 0) == (bs % 16 == 0),
              "%s: %d decoded batches copied back to the host with batches of %d" %
              (out, copies, bs))
    ref = runs["cpu", 1]
    for key in (("gpu", 1), ("gpu", 2)):
        check(read(os.path.join(runs[key], "predictions.csv")) ==
              read(os.path.join(ref, "predictions.csv")),
              "--decode %s with %d worker(s): predictions.csv differs from --decode cpu's" % key)
        check_counts(runs[key], counts(ref), "--decode %s, %d worker(s)" % key)
    print("--decode gpu (emulated, fake nvJPEG): predictions and counts equal to cpu's, 1 and "
          "2 workers", flush=True)

    # training: 2 ranks, 2 epochs, random crops and flips (--augment crop-flip)
    # drawn per sample as on the host, the files again as a --val set each
    # epoch; the damaged file fails at its rank in both; the weights equal
    # bit for bit
    tr = va = data   # the same 48 files: every class in both
    flags = ["--device", "cuda", "--wire", "jpeg", "--resize", "32",
             "--crop", "28", "--epochs", "2", "--batch-size", "8", "--seed", "7", "--lr",
             "0.05", "--augment", "crop-flip"]
    trained = {}
    for decode in ("cpu", "gpu"):
        out = os.path.join(wd, "train-" + decode)
        run_train(tr, out, 2, flags + ["--decode", decode], val=va, timeout=600, env=env)
        trained[decode] = out
    d, name = weights_diff(os.path.join(trained["cpu"], "model.safetensors"),
                           os.path.join(trained["gpu"], "model.safetensors"))
    check(d == 0, "training: %s differs by %.3g between --decode cpu and gpu" % (name, d))
    logs = [read(p) for p in glob.glob(os.path.join(trained["gpu"], "logs", "gpud*.log"))]
    check(len(logs) == 2 and all("images by nvJPEG" in l for l in logs),
          "training with --decode gpu: a gpud log lacks the decoder's summary")
    print("--decode gpu training (emulated): the weights equal --decode cpu's bit for bit",
          flush=True)

    # no nvJPEG: gpud says so at its start and the job fails
    out = os.path.join(wd, "eval-no-nvjpeg")
    p = run_eval(data, out, workers=1, batch=16, timeout=300, expect_rc=None,
                 env={"DDPIPE_NVJPEG_LIB": os.path.join(wd, "no-such-libnvjpeg.so.13")},
                 extra=base + ["--decode", "gpu"])
    check(p.returncode != 0, "the job ran without nvJPEG (exit 0)")
    log = read(os.path.join(out, "logs", "gpud.0.log"))
    check("cannot load nvJPEG" in log and "DDPIPE_NVJPEG_LIB" in log,
          "gpud's log does not say nvJPEG is missing and what to do:\n%s" % log[-2000:])

    # refused before anything starts
    for extra, want in ((["--device", "cuda", "--decode", "gpu"], "add --wire jpeg"),
                        (["--wire", "jpeg", "--decode", "gpu"], "add --device cuda")):
        p = run_eval(data, os.path.join(wd, "refused"), workers=1, batch=16, expect_rc=2,
                     extra=extra)
        check(want in p.stderr, "ddpipe eval %s: stderr lacks '%s': %s" % (" ".join(extra),
                                                                        want, p.stderr))
finally:
    remove(EMU_BIN)
