"""The frame: a submit's body and a lease's answer without JSON text for the
turns' bulk (docs/json.md, the rollout wire; servers of API 1.7 on).

A frame is the message's JSON object with each turn's action, action_tokens,
action_logprobs, observation and observation_tokens left out, padded with
spaces to a multiple of 4 bytes, after its length as a little-endian u32;
then those five members of every turn in document order, each a u32 byte
length and the bytes (texts UTF-8, arrays little-endian 4-byte words), then
zero bytes up to a multiple of 4. Neither end writes base64 or escapes a
text, and every array starts 4-byte aligned.
"""

from __future__ import annotations

import array
import base64
import json
import struct
import sys
from typing import Any, Dict, List, Mapping, Sequence

FRAME_TYPE = "application/x-patrdb-frame"

# A turn's members carried after the JSON part, in order: (name, array kind
# or None for a text).
BULK = (("action", None), ("action_tokens", "I"), ("action_logprobs", "f"), ("observation", None),
        ("observation_tokens", "I"))

_U32 = struct.Struct("<I")


def _words(values: Any, kind: str) -> bytes:
    """An array's little-endian 4-byte words: from a sequence of numbers, an
    array.array, or a packed (base64) string a caller built by hand."""
    if isinstance(values, str):
        return base64.b64decode(values)
    a = values if isinstance(values, array.array) and values.typecode == kind else array.array(kind, values)
    if sys.byteorder != "little":
        a = array.array(kind, a)
        a.byteswap()
    return a.tobytes()


def _bare_turn(t: Any, bulk: List[bytes]) -> Dict[str, Any]:
    """The turn's JSON without its bulk members, which go to ``bulk``."""
    get = t.get if isinstance(t, Mapping) else (lambda name, default=None: getattr(t, name, default))
    for name, kind in BULK:
        v = get(name)
        if kind is None:
            b = (v or "").encode("utf-8")
        else:
            b = _words(v, kind) if v is not None and len(v) else b""
        bulk.append(_U32.pack(len(b)))
        bulk.append(b)
        if len(b) % 4:
            bulk.append(bytes(4 - len(b) % 4))
    out: Dict[str, Any] = {"reward": float(get("reward", 0.0) or 0.0), "done": bool(get("done", False))}
    if get("policy_version"):
        out["policy_version"] = int(get("policy_version"))
    return out


def submit_frame(body: Mapping[str, Any]) -> bytes:
    """A submit body (``{"client_key", "submissions"}``, each submission's
    ``turns`` Turn records or mappings) as a frame."""
    bulk: List[bytes] = []
    subs = []
    for s in body["submissions"]:
        s = dict(s)
        if s.get("turns"):
            s["turns"] = [_bare_turn(t, bulk) for t in s["turns"]]
        subs.append(s)
    head = json.dumps({**body, "submissions": subs}, allow_nan=False, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 4)
    return b"".join([_U32.pack(len(head)), head] + bulk)


def read_lease_frame(raw: bytes) -> Dict[str, Any]:
    """A lease answer's frame as the JSON answer's object (token arrays as
    lists). ValueError when it does not parse."""
    if len(raw) < 4:
        raise ValueError(f"a frame of {len(raw)} bytes")
    (n,) = _U32.unpack_from(raw, 0)
    if n > len(raw) - 4 or n % 4:
        raise ValueError(f"its JSON part is {n} bytes, the frame holds {len(raw) - 4} (a multiple of 4 expected)")
    head = json.loads(raw[4:4 + n])
    at = 4 + n
    for lease in head.get("leases") or ():
        for t in lease.get("history") or ():
            for name, kind in BULK:
                if at + 4 > len(raw):
                    raise ValueError(f"it ends at byte {len(raw)}, before a turn's {name}")
                (size,) = _U32.unpack_from(raw, at)
                at += 4
                padded = size + (-size % 4)
                if at + padded > len(raw):
                    raise ValueError(f"a turn's {name} of {size} bytes runs past the frame's end")
                b = raw[at:at + size]
                at += padded
                t[name] = b.decode("utf-8") if kind is None else _unpack(b, kind)
    if at != len(raw):
        raise ValueError(f"{len(raw) - at} bytes after the last turn")
    return head


def _unpack(b: bytes, kind: str) -> Sequence[Any]:
    if len(b) % 4:
        raise ValueError(f"an array of {len(b)} bytes, not whole 4-byte words")
    a = array.array(kind)
    a.frombytes(b)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tolist()
