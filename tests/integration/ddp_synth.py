"""Synthesised weights for the integration tests: the numpy twin of synth()
in tests/golden/gen_parity.py (and of tests/gpud/synth.h), bit for bit, and
a float32 safetensors writer. A golden commits only the manifest (names
and shapes); the test rebuilds the very file PyTorch used. numpy only."""
import json
import os
import struct

import numpy as np


def _fnv1a32(name):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return h


def _uniform(name, n):
    i = np.arange(n, dtype=np.uint64)
    x = (np.uint64(_fnv1a32(name)) + i * np.uint64(2654435761)) & np.uint64(0xffffffff)
    for _ in range(2):
        x ^= x >> np.uint64(16)
        x = (x * np.uint64(0x45d9f3b)) & np.uint64(0xffffffff)
    x ^= x >> np.uint64(16)
    return x.astype(np.float64) / 4294967296.0


def synth(name, shape):
    n = int(np.prod(shape)) if len(shape) else 1
    u = _uniform(name, n)
    if name.endswith("running_var"):
        v = 0.5 + 1.5 * u
    elif name.endswith("running_mean") or name.endswith(".bias"):
        v = 0.2 * (u - 0.5)
    elif len(shape) == 1:
        v = 0.5 + u
    else:
        a = np.sqrt(6.0 / float(np.prod(shape[1:])))
        v = (2.0 * u - 1.0) * a
    return v.astype(np.float32).reshape(shape)


def write_weights(path, manifest):
    """manifest: [[name, shape], ...] -> a float32 safetensors file at path."""
    header, blobs, off = {}, [], 0
    for name, shape in sorted(manifest):
        data = synth(name, tuple(shape)).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)
