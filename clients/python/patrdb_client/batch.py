"""Training batches as patrdb serves them: safetensors files parsed with the standard library.

A batch file (``GET /api/v1/runs/{run}/steps/{step}/batch``, ``patrdb batch``)
holds, per token, ``input_ids`` (int32), ``loss_mask`` (uint8, 1 where a row
trains the token), ``old_logprobs`` and ``advantages`` (float32, 0 where the
mask is 0), ``positions`` (int32), the loss coefficients ``coef_pos``,
``coef_neg`` and ``loss_weight`` (float32), and ``policy_versions`` (int64),
``turn_index`` (int32, -1 on prompt tokens) and ``turn_rewards`` (float32, each
turn's reward on its last action token); per row (one per leaf) ``row_leaf``,
``row_group``, ``row_status``, ``row_reward``, ``row_advantage``,
``row_policy_min``, ``row_policy_max`` and ``row_prompt_len``. The rows layout
delimits rows with ``row_offsets``; the tree layout holds every token once, in
segments (``seg_offsets``, ``seg_parent``, ``seg_group``, ``seg_node``,
``seg_owner``) with each row's last segment in ``row_segment``.

A token several leaves share is credited by the batch's ``credit`` rule:
``repeat`` (the default: every leaf trains its whole path, so the token is
trained once per leaf below it), ``mean`` (once, in the row of the smallest
leaf id, with the mean advantage of the leaves below it) or ``owner`` (once,
with that leaf's advantage). With ratio ``rho = exp(logp - old_logprobs)``, the
clipped PPO/GRPO loss normalised as the batch's ``norm`` says is, over either
layout::

    loss = sum(-coef_pos * min(rho, 1 + eps) + coef_neg * max(rho, 1 - eps))

and over the tree it equals the rows loss exactly (the Go package ``batch``
documents the derivation). ``patrdb_client.arrays`` turns a batch into the
padded arrays a verl-style trainer takes.

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

__all__ = ["Batch", "SafetensorsError", "parse_safetensors", "weight", "FORMAT", "TOKEN_ARRAYS"]

FORMAT = "patrdb-batch/2"

# The per-token arrays, in the file's order.
TOKEN_ARRAYS = ("input_ids", "loss_mask", "old_logprobs", "advantages", "positions", "coef_pos", "coef_neg",
                "loss_weight", "policy_versions", "turn_index", "turn_rewards")

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


def _f32(x: float) -> float:
    """x rounded to float32, as the Go writer rounds."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def weight(norm: str, tokens: int, rows: int, n: int) -> float:
    """The weight w_r of every trained token of a row that trains ``n`` tokens:
    1/tokens (token-mean) or 1/(rows*n) (seq-mean-token-mean), 0 when n is 0."""
    if n == 0:
        return 0.0
    if norm == "seq-mean-token-mean":
        return 1.0 / (float(rows) * float(n))
    return 1.0 / float(tokens)


class Batch:
    """One step's training batch. ``tensors`` maps each name to its array;
    ``metadata`` is the file's ``__metadata__`` (run, step, layout, credit,
    loss_norm, groups, rows, tree_token_ratio, policy versions, ...)."""

    def __init__(self, data: bytes):
        self.tensors, self.metadata = parse_safetensors(data)
        self.nbytes = len(data)
        if self.metadata.get("format") != FORMAT or self.layout not in ("rows", "tree"):
            raise SafetensorsError(f"not a {FORMAT} batch file (format {self.metadata.get('format')!r}); "
                                   "write it again with this version's patrdb batch")

    @classmethod
    def load(cls, path: str) -> "Batch":
        """Reads a file written by ``patrdb batch``."""
        with open(path, "rb") as f:
            return cls(f.read())

    @property
    def layout(self) -> str:
        return self.metadata.get("layout", "")

    @property
    def credit(self) -> str:
        return self.metadata.get("credit", "")

    @property
    def norm(self) -> str:
        return self.metadata.get("loss_norm", "")

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
        """Row ``i``'s per-token arrays as lists (``TOKEN_ARRAYS``). In the tree layout
        the row is expanded from its segments and trained as the credit rule says
        (every segment with the row's advantage under ``repeat``; the segments it owns,
        with the tree's advantage, under ``mean`` and ``owner``), its coefficients
        computed for the row: it equals the rows layout's row ``i``."""
        t = self.tensors
        if self.layout == "rows":
            lo, hi = int(t["row_offsets"][i]), int(t["row_offsets"][i + 1])
            return {n: list(t[n][lo:hi]) for n in TOKEN_ARRAYS}
        path = []
        s = int(t["row_segment"][i])
        while s >= 0:
            path.append(s)
            s = int(t["seg_parent"][s])
        out: Dict[str, List] = {n: [] for n in TOKEN_ARRAYS}
        repeat = self.credit == "repeat"
        row_adv = _f32(float(t["row_advantage"][i]))
        for s in reversed(path):
            lo, hi = int(t["seg_offsets"][s]), int(t["seg_offsets"][s + 1])
            trained = repeat or int(t["seg_owner"][s]) == i
            for n in ("input_ids", "positions", "policy_versions", "turn_index", "turn_rewards"):
                out[n].extend(t[n][lo:hi])
            for j in range(lo, hi):
                m = int(t["loss_mask"][j]) if trained else 0
                out["loss_mask"].append(m)
                out["old_logprobs"].append(float(t["old_logprobs"][j]) if m else 0.0)
                out["advantages"].append((row_adv if repeat else float(t["advantages"][j])) if m else 0.0)
        w = weight(self.norm, int(self.metadata["loss_tokens"]), int(self.metadata["loss_rows"]), sum(out["loss_mask"]))
        for m, a in zip(out["loss_mask"], out["advantages"]):
            out["coef_pos"].append(_f32(w * a) if m and a > 0 else 0.0)
            out["coef_neg"].append(_f32(w * -a) if m and a < 0 else 0.0)
            out["loss_weight"].append(_f32(w) if m else 0.0)
        return out
