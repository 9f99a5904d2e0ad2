"""Training batches as patrdb serves them: safetensors files parsed with the standard library.

A batch file (``GET /api/v1/runs/{run}/steps/{step}/batch``, ``patrdb batch``)
holds, per token, ``input_ids`` (int32), ``loss_mask`` (uint8, 1 on action
tokens), ``old_logprobs`` and ``advantages`` (float32, 0 where the mask is 0)
and ``positions`` (int32); per row (one per leaf) ``row_leaf``, ``row_group``,
``row_status``, ``row_reward``, ``row_advantage``, ``row_policy_min`` and
``row_policy_max``. The rows layout delimits rows with ``row_offsets``; the
tree layout holds every token once, in segments (``seg_offsets``,
``seg_parent``, ``seg_group``, ``seg_node``, ``seg_owner``) with each row's
last segment in ``row_segment``. A prefix shared by several rows is trainable
only in the row of the smallest leaf id (``seg_owner`` in the tree).

Arrays are numpy arrays (views of the file's bytes) when numpy is
importable, ``memoryview`` objects cast to the element type otherwise.
"""

from __future__ import annotations

import array
import json
import struct
import sys
from typing import Any, Dict, List, Tuple

try:  # numpy is optional: the client needs only the standard library
    import numpy as _np
except ImportError:  # pragma: no cover - depends on the machine
    _np = None

__all__ = ["Batch", "SafetensorsError", "parse_safetensors"]

# dtype -> (struct/array format, numpy dtype, size)
_DTYPES = {"U8": ("B", "<u1", 1), "I32": ("i", "<i4", 4), "I64": ("q", "<i8", 8),
           "F32": ("f", "<f4", 4), "F64": ("d", "<f8", 8)}

_MAX_HEADER = 100 << 20


class SafetensorsError(ValueError):
    """The bytes are not a valid safetensors file (or not a batch)."""


def _array(buf: memoryview, dtype: str) -> Any:
    fmt, np_dtype, _ = _DTYPES[dtype]
    if _np is not None:
        return _np.frombuffer(buf, dtype=np_dtype)
    if sys.byteorder == "little":
        return buf.cast(fmt)
    a = array.array(fmt, bytes(buf))
    a.byteswap()
    return memoryview(a)


def parse_safetensors(data: bytes) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Parses a whole safetensors file into ({name: array}, metadata).

    Refuses an unknown dtype, a shape that does not match its offsets, and
    tensors that overlap, leave gaps or run past the end."""
    if len(data) < 8:
        raise SafetensorsError(f"{len(data)} bytes is shorter than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > _MAX_HEADER or n > len(data) - 8:
        raise SafetensorsError(f"header length {n} exceeds the file ({len(data)} bytes)")
    try:
        header = json.loads(bytes(data[8:8 + n]))
    except ValueError as e:
        raise SafetensorsError(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(data)[8 + n:]
    spans = []
    tensors: Dict[str, Any] = {}
    for name, e in header.items():
        try:
            dtype, shape, (begin, end) = e["dtype"], list(e["shape"]), e["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"tensor {name!r}: malformed entry") from None
        if dtype not in _DTYPES:
            raise SafetensorsError(f"tensor {name!r}: dtype {dtype!r} is not one of {sorted(_DTYPES)}")
        count = 1
        for s in shape:
            count *= s
        if not (0 <= begin <= end <= len(body)) or end - begin != count * _DTYPES[dtype][2]:
            raise SafetensorsError(f"tensor {name!r}: offsets [{begin}, {end}] do not hold shape {shape} of {dtype}")
        arr = _array(body[begin:end], dtype)
        if _np is not None and len(shape) != 1:
            arr = arr.reshape(shape)
        tensors[name] = arr
        spans.append((begin, end, name))
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise SafetensorsError(f"tensor {name!r} starts at {begin}, want {at} (no gaps or overlaps)")
        at = end
    if at != len(body):
        raise SafetensorsError(f"tensors end at {at} of {len(body)} data bytes")
    return tensors, {str(k): str(v) for k, v in meta.items()}


class Batch:
    """One step's training batch. ``tensors`` maps each name to its array;
    ``metadata`` is the file's ``__metadata__`` (run, step, layout, groups,
    rows, tree_token_ratio, policy versions, ...)."""

    def __init__(self, data: bytes):
        self.tensors, self.metadata = parse_safetensors(data)
        self.nbytes = len(data)
        if self.metadata.get("format") != "patrdb-batch/1" or self.layout not in ("rows", "tree"):
            raise SafetensorsError(f"not a patrdb batch file (format {self.metadata.get('format')!r})")

    @classmethod
    def load(cls, path: str) -> "Batch":
        """Reads a file written by ``patrdb batch``."""
        with open(path, "rb") as f:
            return cls(f.read())

    @property
    def layout(self) -> str:
        return self.metadata.get("layout", "")

    @property
    def run(self) -> str:
        return self.metadata.get("run", "")

    @property
    def step(self) -> int:
        return int(self.metadata.get("step", "0"))

    def __len__(self) -> int:
        return len(self.tensors["row_leaf"])

    def __getitem__(self, name: str) -> Any:
        return self.tensors[name]

    def row(self, i: int) -> Dict[str, List]:
        """Row ``i`` as lists: input_ids, loss_mask, old_logprobs, advantages, positions.
        In the tree layout the row is expanded from its segments, masked where
        it does not own them, so it equals the rows layout's row ``i``."""
        t = self.tensors
        names = ("input_ids", "loss_mask", "old_logprobs", "advantages", "positions")
        if self.layout == "rows":
            lo, hi = int(t["row_offsets"][i]), int(t["row_offsets"][i + 1])
            return {n: list(t[n][lo:hi]) for n in names}
        path = []
        s = int(t["row_segment"][i])
        while s >= 0:
            path.append(s)
            s = int(t["seg_parent"][s])
        out: Dict[str, List] = {n: [] for n in names}
        for s in reversed(path):
            lo, hi = int(t["seg_offsets"][s]), int(t["seg_offsets"][s + 1])
            owned = int(t["seg_owner"][s]) == i
            for n in names:
                if owned or n in ("input_ids", "positions"):
                    out[n].extend(t[n][lo:hi])
                else:
                    out[n].extend([0] * (hi - lo))
        return out
