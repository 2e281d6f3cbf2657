"""Read MNIST / Fashion-MNIST IDX files (optionally .gz), the way ddpipe's `idx:PREFIX` sees them.

    read_idx(path) -> numpy array (uint8 images N x H x W, or uint8 labels N)
    resolve_prefix("idx:/usr/share/datasets/fashion-mnist/t10k") -> (images_path, labels_path)
    load_prefix(prefix) -> (images uint8 [N,H,W], labels int64 [N], images_path)

IDX: big-endian; magic = 0x00 0x00 <type> <ndim>, then ndim u32 sizes, then the data.
"""

import gzip
import os
import struct

import numpy as np

_IDX_TYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
              0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        blob = f.read()
    if len(blob) < 4 or blob[0] != 0 or blob[1] != 0 or blob[2] not in _IDX_TYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic {blob[:4].hex()})")
    dtype, ndim = _IDX_TYPES[blob[2]], blob[3]
    if len(blob) < 4 + 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header")
    dims = struct.unpack_from(f">{ndim}I", blob, 4)
    start = 4 + 4 * ndim
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(blob) - start != need:
        raise ValueError(f"{path}: dims {dims} need {need} data bytes, file has {len(blob) - start}")
    return np.frombuffer(blob, dtype=dtype, offset=start).reshape(dims).astype(dtype.newbyteorder("="))


def _find(base):
    for cand in (base, base + ".gz"):
        if os.path.exists(cand):
            return cand
    raise FileNotFoundError(f"neither {base} nor {base}.gz exists")


def resolve_prefix(prefix):
    if prefix.startswith("idx:"):
        prefix = prefix[4:]
    return _find(prefix + "-images-idx3-ubyte"), _find(prefix + "-labels-idx1-ubyte")


def load_prefix(prefix):
    ipath, lpath = resolve_prefix(prefix)
    images, labels = read_idx(ipath), read_idx(lpath)
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{ipath} {images.shape} and {lpath} {labels.shape} do not pair up")
    return images, labels.astype(np.int64), ipath
