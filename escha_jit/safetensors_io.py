"""A small, strict reader and writer of the safetensors format (no pickle, no extra dependency).

Layout: 8-byte little-endian header length N, N bytes of JSON ``{name: {"dtype", "shape",
"data_offsets": [begin, end]}, "__metadata__": {str: str}}``, then the raw little-endian data;
offsets count from the end of the header. Tensors are read lazily, one at a time, so a loader
touches only what it needs. Every malformation raises :class:`CheckpointError` naming the file.
"""
from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from typing import Iterable, Mapping

import torch

from .errors import CheckpointError

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2,
}
_NAMES = {v: k for k, v in DTYPES.items()}
_MAX_HEADER = 100 << 20


class SafetensorsFile:
    """Header of one safetensors file, parsed and checked on open; tensors read on demand."""

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        try:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise CheckpointError(f"{self.path}: not a safetensors file (only {size} bytes)")
                (n,) = struct.unpack("<Q", head)
                if n > min(_MAX_HEADER, size - 8):
                    raise CheckpointError(f"{self.path}: header length {n} exceeds the file ({size} bytes)")
                raw = f.read(n)
        except OSError as e:
            raise CheckpointError(f"{self.path}: cannot read: {e}") from e
        try:
            header = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            at = getattr(e, "pos", None) or getattr(e, "start", 0)     # where parsing / decoding stopped
            lo, hi = max(at - 32, 0), at + 32
            raise CheckpointError(f"{self.path}: header is not valid JSON: {e}; {n} header bytes, file "
                                  f"{size} bytes, bytes {lo}..{hi}: {raw[lo:hi]!r}") from None
        if not isinstance(header, dict):
            raise CheckpointError(f"{self.path}: header is not a JSON object")
        meta = header.pop("__metadata__", {}) or {}
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise CheckpointError(f"{self.path}: __metadata__ must map strings to strings")
        self.metadata: dict[str, str] = meta
        self._data_start = 8 + n
        data_len = size - self._data_start
        self._entries: dict[str, tuple[torch.dtype, tuple[int, ...], int, int]] = {}
        for name, e in header.items():
            self._entries[name] = self._check_entry(name, e, data_len)

    def _check_entry(self, name, e, data_len):
        where = f"{self.path}: tensor {name!r}"
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
            raise CheckpointError(f"{where}: header entry lacks dtype/shape/data_offsets", name)
        if e["dtype"] not in DTYPES:
            raise CheckpointError(f"{where}: unsupported dtype {e['dtype']!r}", name)
        shape, offs = e["shape"], e["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape)):
            raise CheckpointError(f"{where}: bad shape {shape!r}", name)
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)
                and 0 <= offs[0] <= offs[1] <= data_len):
            raise CheckpointError(f"{where}: data_offsets {offs!r} fall outside the data ({data_len} bytes)", name)
        dtype = DTYPES[e["dtype"]]
        nbytes = math.prod(shape) * dtype.itemsize
        if offs[1] - offs[0] != nbytes:
            raise CheckpointError(f"{where}: {offs[1] - offs[0]} data bytes for shape {shape} {e['dtype']} "
                                  f"(expected {nbytes})", name)
        return dtype, tuple(shape), offs[0], offs[1]

    def keys(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def dtype(self, name: str) -> torch.dtype:
        return self._entries[name][0]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._entries[name][1]

    def get(self, name: str) -> torch.Tensor:
        """The tensor ``name`` as a new CPU tensor (its own memory, writable)."""
        try:
            dtype, shape, a, b = self._entries[name]
        except KeyError:
            raise CheckpointError(f"{self.path}: no tensor {name!r}", name) from None
        buf = bytearray(b - a)
        if buf:
            with open(self.path, "rb") as f:
                f.seek(self._data_start + a)
                if f.readinto(buf) != len(buf):
                    raise CheckpointError(f"{self.path}: tensor {name!r} is truncated", name)
            return torch.frombuffer(buf, dtype=dtype).reshape(shape)
        return torch.empty(shape, dtype=dtype)


def save_file(tensors: Mapping[str, torch.Tensor], path: str | os.PathLike,
              metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (CPU or not; written contiguous, little-endian) atomically to ``path``."""
    path = os.fspath(path)
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    off = 0
    for name, t in tensors.items():
        if t.dtype not in _NAMES:
            raise TypeError(f"tensor {name!r}: dtype {t.dtype} cannot be stored in safetensors")
        data = t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)                     # align the data to 8 bytes
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            for b in blobs:
                f.write(b)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_all(path: str | os.PathLike, names: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
    f = SafetensorsFile(path)
    return {n: f.get(n) for n in (names if names is not None else f.keys())}
