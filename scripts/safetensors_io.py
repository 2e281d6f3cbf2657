"""Minimal pure-Python safetensors reader/writer (numpy + torch, no `safetensors` package).

Format (https://github.com/huggingface/safetensors):
  8 bytes   little-endian u64 N = length of the JSON header
  N bytes   UTF-8 JSON: {"__metadata__": {str: str}, NAME: {"dtype": "F32", "shape": [..],
            "data_offsets": [begin, end]}, ...}; offsets are relative to the first byte after
            the header; the header is padded with spaces so the data starts 8-byte aligned
  rest      tensor bytes, C-contiguous little-endian, here in sorted-name order, no gaps

    save(tensors, path, metadata=None)   tensors: dict name -> torch.Tensor | numpy.ndarray
    load(path) -> dict name -> torch.Tensor     (load_metadata(path) -> dict str -> str)

Writes go to PATH.tmp and are renamed, so a reader never sees half a file.
"""

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype tag -> (torch dtype, numpy little-endian dtype used for the bytes)
_DTYPES = {
    "F64": (torch.float64, np.dtype("<f8")),
    "F32": (torch.float32, np.dtype("<f4")),
    "F16": (torch.float16, np.dtype("<f2")),
    "BF16": (torch.bfloat16, np.dtype("<u2")),  # numpy has no bfloat16: move raw 16-bit words
    "I64": (torch.int64, np.dtype("<i8")),
    "I32": (torch.int32, np.dtype("<i4")),
    "I16": (torch.int16, np.dtype("<i2")),
    "I8": (torch.int8, np.dtype("i1")),
    "U8": (torch.uint8, np.dtype("u1")),
    "BOOL": (torch.bool, np.dtype("?")),
}
_TORCH_TO_TAG = {t: tag for tag, (t, _) in _DTYPES.items()}
_NUMPY_TO_TAG = {np.dtype(np.float64): "F64", np.dtype(np.float32): "F32",
                 np.dtype(np.float16): "F16", np.dtype(np.int64): "I64",
                 np.dtype(np.int32): "I32", np.dtype(np.int16): "I16",
                 np.dtype(np.int8): "I8", np.dtype(np.uint8): "U8", np.dtype(np.bool_): "BOOL"}

# A header larger than this is certainly a corrupt or hostile file (the Rust crate uses 100 MB).
_MAX_HEADER = 100 * 1000 * 1000


class SafetensorsError(ValueError):
    """The file is not valid safetensors; the message names the file and what is wrong."""


def _to_tag_and_bytes(name, value):
    """Return (dtype tag, shape list, little-endian C-order bytes) for one tensor."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        if t.dtype not in _TORCH_TO_TAG:
            raise TypeError(f"tensor {name!r}: dtype {t.dtype} is not supported by safetensors_io")
        tag = _TORCH_TO_TAG[t.dtype]
        if tag == "BF16":
            arr = t.view(torch.int16).numpy().view(np.uint16)
        else:
            arr = t.numpy()
        shape = list(t.shape)
    elif isinstance(value, np.ndarray):
        if value.dtype.newbyteorder("=") not in _NUMPY_TO_TAG and value.dtype not in _NUMPY_TO_TAG:
            raise TypeError(f"tensor {name!r}: numpy dtype {value.dtype} is not supported")
        arr = value
        tag = _NUMPY_TO_TAG[np.dtype(value.dtype.newbyteorder("="))]
        shape = list(value.shape)
    else:
        raise TypeError(f"tensor {name!r}: expected torch.Tensor or numpy.ndarray, got {type(value).__name__}")
    le = np.ascontiguousarray(arr, dtype=_DTYPES[tag][1])
    return tag, shape, le.tobytes(order="C")


def serialize(tensors, metadata=None):
    """Return the whole safetensors file as bytes."""
    if metadata is not None:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError(f"metadata must map str -> str; got {k!r}: {type(v).__name__}")
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            raise ValueError("'__metadata__' is reserved and cannot be a tensor name")
        tag, shape, data = _to_tag_and_bytes(name, tensors[name])
        header[name] = {"dtype": tag, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    return struct.pack("<Q", len(hjson)) + hjson + b"".join(chunks)


def save(tensors, path, metadata=None):
    """Write `tensors` (dict name -> torch.Tensor or numpy array) to `path` atomically."""
    blob = serialize(tensors, metadata)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _parse_header(blob, path):
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file is {len(blob)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack_from("<Q", blob, 0)
    if n > _MAX_HEADER or 8 + n > len(blob):
        raise SafetensorsError(f"{path}: header length {n} does not fit in a {len(blob)}-byte file")
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    return header, 8 + n


def load_metadata(path):
    """Return the "__metadata__" map of the file (empty dict when absent)."""
    with open(path, "rb") as f:
        blob = f.read()
    header, _ = _parse_header(blob, path)
    meta = header.get("__metadata__", {}) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise SafetensorsError(f"{path}: __metadata__ must map str -> str")
    return meta


def load(path):
    """Read a safetensors file and return dict name -> torch.Tensor (CPU, writable copies)."""
    with open(path, "rb") as f:
        blob = f.read()
    header, start = _parse_header(blob, path)
    data_len = len(blob) - start
    out = {}
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            tag, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise SafetensorsError(f"{path}: tensor {name!r} needs dtype, shape and 2 data_offsets") from None
        if tag not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r} has unsupported dtype {tag!r}")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor {name!r} has invalid shape {shape!r}")
        tdtype, npdtype = _DTYPES[tag]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if not (isinstance(b, int) and isinstance(e, int) and 0 <= b <= e <= data_len):
            raise SafetensorsError(f"{path}: tensor {name!r} offsets [{b}, {e}] outside the {data_len}-byte data")
        if e - b != count * npdtype.itemsize:
            raise SafetensorsError(f"{path}: tensor {name!r} {tag}{shape} needs {count * npdtype.itemsize} "
                                   f"bytes but its offsets span {e - b}")
        spans.append((b, e, name))
        arr = np.frombuffer(blob, dtype=npdtype, count=count, offset=start + b).reshape(shape).copy()
        if tag == "BF16":
            t = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(arr.astype(npdtype.newbyteorder("="), copy=False))
        assert t.dtype == tdtype
        out[name] = t
    # The spec requires the buffers to tile the data section exactly: no holes, no overlaps.
    pos = 0
    for b, e, name in sorted(spans):
        if b != pos:
            raise SafetensorsError(f"{path}: tensor {name!r} starts at {b}, expected {pos} (hole or overlap)")
        pos = e
    if pos != data_len:
        raise SafetensorsError(f"{path}: {data_len - pos} trailing bytes after the last tensor")
    return out
