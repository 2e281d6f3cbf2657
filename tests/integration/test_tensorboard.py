"""--tensorboard DIR (issue 15 item 6): a small `ddpipe train` (2 epochs with
validation) and a `ddpipe eval` write TensorBoard event files. This test
reads them with its own reader of the TFRecord format (length, masked
CRC32C of the length, the bytes, masked CRC32C of the bytes: every CRC is
checked) and of the Event / Summary protocol buffers, the way TensorBoard's
event_file_loader does: the first event is file_version "brain.Event:2";
per epoch loss/top1/top5 of train and val (and lr) equal metrics.csv's
values (as float32); the eval writes loss/eval and top1/eval equal to
summary.json's. A corrupted byte makes the reader fail (the check can fail)."""
import csv
import glob
import os
import struct
from ddp_it import *

wd = workdir("tensorboard")


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(raw):
    at = 0
    while at < len(raw):
        head = raw[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", raw[at + 8:at + 12])
        if hc != masked(head):
            raise ValueError("length CRC mismatch at byte %d" % at)
        body = raw[at + 12:at + 12 + n]
        (bc,) = struct.unpack("<I", raw[at + 12 + n:at + 16 + n])
        if len(body) != n or bc != masked(body):
            raise ValueError("data CRC mismatch at byte %d" % at)
        yield body
        at += 16 + n


def varint(b, i):
    v = s = 0
    while True:
        x = b[i]
        i += 1
        v |= (x & 0x7F) << s
        s += 7
        if not x & 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def read_events(path):
    """[(step, tag, value)] and the file_version."""
    out, version = [], None
    for body in records(read(path, "rb")):
        step, summary = 0, None
        for f, wt, v in fields(body):
            if f == 2:
                step = v
            elif f == 3:
                version = v.decode()
            elif f == 5:
                summary = v
        if summary is None:
            continue
        for f, wt, v in fields(summary):
            if f != 1:
                continue
            tag = value = None
            for g, wt2, x in fields(v):
                if g == 1:
                    tag = x.decode()
                elif g == 2 and wt2 == 5:
                    (value,) = struct.unpack("<f", x)
            out.append((step, tag, value))
    return out, version


def f32(x):
    return struct.unpack("<f", struct.pack("<f", float(x)))[0]


def one_file(d):
    files = glob.glob(os.path.join(d, "events.out.tfevents.*"))
    check(len(files) == 1, "want one event file in %s, got %r" % (d, files))
    return files[0]


# training: per epoch scalars equal metrics.csv
train = idx_subset("train", 0, 192)
val = idx_subset("t10k", 0, 64)
out = os.path.join(wd, "train")
tb = os.path.join(wd, "tb-train")
run_train(train, out, 1, ["--epochs", "2", "--seed", "1", "--tensorboard", tb], val=val)
path = one_file(tb)
events, version = read_events(path)
check(version == "brain.Event:2", "file_version %r" % version)
got = {(s, t): v for s, t, v in events}
with open(os.path.join(out, "metrics.csv")) as f:
    rows = list(csv.DictReader(f))
check(rows, "no metrics.csv rows")
for r in rows:
    e, ph = int(r["epoch"]), r["phase"]
    for key in ("loss", "top1", "top5"):
        want = f32(r[key])
        have = got.get((e, "%s/%s" % (key, ph)))
        check(have is not None and abs(have - want) <= 1e-6 * max(1, abs(want)),
              "epoch %d %s/%s: TensorBoard %r, metrics.csv %r" % (e, key, ph, have, want))
    if ph == "train":
        check(abs(got.get((e, "lr"), -1) - f32(r["lr"])) <= 1e-9, "epoch %d lr: %r vs %r" % (
            e, got.get((e, "lr")), r["lr"]))
print("train: %d scalars; per-epoch loss/top1/top5/lr equal metrics.csv" % len(events), flush=True)

# a corrupted byte is caught by the CRCs
raw = bytearray(read(path, "rb"))
raw[len(raw) // 2] ^= 0x40
bad = os.path.join(wd, "corrupt.tfevents")
with open(bad, "wb") as f:
    f.write(raw)
try:
    read_events(bad)
    fail("a corrupted event file read without a CRC error")
except ValueError as e:
    print("corrupted copy refused: %s" % e, flush=True)

# eval: loss/eval and top1/eval equal summary.json
data = jpeg_folder()
out = os.path.join(wd, "eval")
tb = os.path.join(wd, "tb-eval")
run_eval(data, out, 1, extra=["--tensorboard", tb])
events, version = read_events(one_file(tb))
s = summary(out)
got = {t: v for _, t, v in events}
check(abs(got.get("top1/eval", -1) - f32(s["top1"])) <= 1e-6 and
      abs(got.get("loss/eval", -1) - f32(s["loss"])) <= 1e-5 * max(1, s["loss"]),
      "eval: TensorBoard top1 %r loss %r, summary %r %r" % (got.get("top1/eval"),
                                                            got.get("loss/eval"), s["top1"], s["loss"]))
print("eval: top1/eval and loss/eval equal summary.json")
print("1 passed, 0 failed")
