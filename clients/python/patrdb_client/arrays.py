"""numpy arrays for trainers: a step's batch as the padded arrays a verl-style
trainer consumes, and the tree layout's predecessor index and attention mask
for one that packs the tree.

This module needs numpy (the rest of the client does not)::

    from patrdb_client import Client
    from patrdb_client.arrays import padded

    b = Client(url).batch("run", step)              # rows or tree layout
    p = padded(b)                                   # dict of numpy arrays, one row per leaf
    loss_mask, adv = p["response_mask"], p["advantages"]

``padded`` splits each row into its prompt (the group's prompt tokens,
``row_prompt_len`` of them) and its response (every turn after it: action
tokens, then observation tokens), left-pads the prompts and right-pads the
responses, as verl's ``DataProto`` holds them. Field by field (B rows, P the
longest prompt or ``max_prompt_len``, R the longest response or
``max_response_len``):

==================  ==========  =========================================================
``prompts``         [B, P] i64  prompt token ids, left-padded with ``pad_token_id``
``responses``       [B, R] i64  response token ids, right-padded with ``pad_token_id``
``input_ids``       [B, P+R]    ``prompts`` then ``responses``
``attention_mask``  [B, P+R]    1 on real tokens, 0 on padding
``position_ids``    [B, P+R]    ``max(cumsum(attention_mask) - 1, 0)``, verl's rule: the
                                batch's ``positions`` on real tokens
``response_mask``   [B, R] f32  the batch's ``loss_mask``: 1 on the action tokens the row
                                trains under the batch's credit rule, 0 on observation
                                tokens (the environment wrote them), padding and tokens
                                another row trains
``old_log_probs``   [B, R] f32  the sampling policy's logprob of each trained token
``advantages``      [B, R] f32  the credit rule's advantage of each trained token
``coef_pos``,       [B, R] f32  the loss coefficients: with ``rho = exp(logp -
``coef_neg``,                   old_log_probs)``, ``sum(-coef_pos * min(rho, 1+eps) +
``loss_weight``                 coef_neg * max(rho, 1-eps))`` is the clipped loss already
                                normalised (``batch.norm``), and ``loss_weight`` weighs any
                                other per-token term (KL, entropy) the same way
``policy_versions`` [B, R] i64  the policy version that sampled each token's turn (for
                                importance correction across weight updates)
``turn_index``      [B, R] i32  the token's turn on the path (0 = first), -1 on padding
``turn_rewards``    [B, R] f32  each turn's reward on its last action token
``prompt_lengths``  [B] i64     real prompt tokens per row
``response_lengths`` [B] i64    real response tokens per row
``row_leaf``, ``row_group``,    per row, as the batch holds them
``row_reward``, ``row_advantage``
==================  ==========  =========================================================

A tree-layout batch is expanded to its rows first (``expand``), exactly as the
server's rows layout would have them.
"""

from __future__ import annotations

from typing import Dict, Optional

try:
    import numpy as np
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError("patrdb_client.arrays needs numpy (apt-get install python3-numpy, or pip install numpy)") from e

from .batch import TOKEN_ARRAYS, Batch, weight

__all__ = ["expand", "padded", "row_token_index", "tree_predecessors", "tree_attention_mask", "group_spans"]


def _segment_paths(batch: Batch):
    """Each row's segments from its prompt to its last one."""
    parent = np.asarray(batch["seg_parent"])
    for last in np.asarray(batch["row_segment"]):
        path = []
        s = int(last)
        while s >= 0:
            path.append(s)
            s = int(parent[s])
        path.reverse()
        yield path


def row_token_index(batch: Batch):
    """For a tree-layout batch: (offsets, index), where row i's tokens in the rows
    layout are tree tokens ``index[offsets[i]:offsets[i+1]]``."""
    if batch.layout != "tree":
        raise ValueError("row_token_index takes a tree-layout batch")
    so = np.asarray(batch["seg_offsets"], dtype=np.int64)
    parts, offsets = [], [0]
    for path in _segment_paths(batch):
        for s in path:
            parts.append(np.arange(so[s], so[s + 1], dtype=np.int64))
        offsets.append(offsets[-1] + sum(int(so[s + 1] - so[s]) for s in path))
    index = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return np.asarray(offsets, dtype=np.int64), index


def expand(batch: Batch) -> Dict[str, np.ndarray]:
    """The rows layout's per-token arrays (``TOKEN_ARRAYS``) and ``row_offsets``, from
    a batch of either layout: a tree batch expanded as its credit rule trains each row,
    equal to what the server sends for ``layout="rows"``."""
    if batch.layout == "rows":
        out = {n: np.asarray(batch[n]) for n in TOKEN_ARRAYS}
        out["row_offsets"] = np.asarray(batch["row_offsets"])
        return out
    offsets, idx = row_token_index(batch)
    nrows = len(batch)
    row_of = np.repeat(np.arange(nrows), np.diff(offsets))
    seg_of = np.repeat(np.arange(len(batch["seg_parent"])), np.diff(np.asarray(batch["seg_offsets"])))
    out = {n: np.asarray(batch[n])[idx] for n in ("input_ids", "positions", "policy_versions", "turn_index",
                                                    "turn_rewards")}
    mask = np.asarray(batch["loss_mask"])[idx]
    if batch.credit != "repeat":
        mask = mask * (np.asarray(batch["seg_owner"])[seg_of[idx]] == row_of)
    trained = mask != 0
    out["loss_mask"] = mask.astype(np.uint8)
    out["old_logprobs"] = np.where(trained, np.asarray(batch["old_logprobs"])[idx], np.float32(0))
    if batch.credit == "repeat":
        adv = np.asarray(batch["row_advantage"]).astype(np.float32)[row_of]
    else:
        adv = np.asarray(batch["advantages"])[idx]
    adv = np.where(trained, adv, np.float32(0)).astype(np.float32)
    out["advantages"] = adv
    n = np.bincount(row_of, weights=trained, minlength=nrows).astype(np.int64)
    w = np.array([weight(batch.norm, int(batch.metadata["loss_tokens"]), int(batch.metadata["loss_rows"]), int(k))
                  for k in n], dtype=np.float64)[row_of]
    a = adv.astype(np.float64)
    out["coef_pos"] = np.where(trained & (a > 0), w * a, 0.0).astype(np.float32)
    out["coef_neg"] = np.where(trained & (a < 0), w * -a, 0.0).astype(np.float32)
    out["loss_weight"] = np.where(trained, w, 0.0).astype(np.float32)
    out["row_offsets"] = offsets
    return out


def padded(batch: Batch, pad_token_id: int = 0, max_prompt_len: Optional[int] = None,
           max_response_len: Optional[int] = None) -> Dict[str, np.ndarray]:
    """The batch as verl-style padded arrays, one row per leaf (see the module's table).
    A prompt or response longer than ``max_prompt_len`` / ``max_response_len`` raises
    ValueError: nothing is cut silently."""
    rows = expand(batch)
    off = rows["row_offsets"]
    plen = np.asarray(batch["row_prompt_len"], dtype=np.int64)
    total = np.diff(off)
    rlen = total - plen
    B = len(plen)
    P = int(plen.max()) if B else 0
    R = int(rlen.max()) if B else 0
    for name, have, cap in (("prompt", P, max_prompt_len), ("response", R, max_response_len)):
        if cap is not None:
            if have > cap:
                raise ValueError(f"a {name} of {have} tokens is longer than max_{name}_len={cap}")
    P = max_prompt_len if max_prompt_len is not None else P
    R = max_response_len if max_response_len is not None else R
    out: Dict[str, np.ndarray] = {
        "prompts": np.full((B, P), pad_token_id, dtype=np.int64),
        "responses": np.full((B, R), pad_token_id, dtype=np.int64),
    }
    resp = {"response_mask": ("loss_mask", np.float32, 0), "old_log_probs": ("old_logprobs", np.float32, 0),
            "advantages": ("advantages", np.float32, 0), "coef_pos": ("coef_pos", np.float32, 0),
            "coef_neg": ("coef_neg", np.float32, 0), "loss_weight": ("loss_weight", np.float32, 0),
            "policy_versions": ("policy_versions", np.int64, 0), "turn_index": ("turn_index", np.int32, -1),
            "turn_rewards": ("turn_rewards", np.float32, 0)}
    for name, (_, dtype, fill) in resp.items():
        out[name] = np.full((B, R), fill, dtype=dtype)
    mask = np.zeros((B, P + R), dtype=np.int64)
    ids = rows["input_ids"]
    for i in range(B):
        lo, p, r = int(off[i]), int(plen[i]), int(rlen[i])
        out["prompts"][i, P - p:] = ids[lo:lo + p]
        out["responses"][i, :r] = ids[lo + p:lo + p + r]
        mask[i, P - p:P + r] = 1
        for name, (src, _, _) in resp.items():
            out[name][i, :r] = rows[src][lo + p:lo + p + r]
    out["input_ids"] = np.concatenate([out["prompts"], out["responses"]], axis=1)
    out["attention_mask"] = mask
    out["position_ids"] = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
    out["prompt_lengths"], out["response_lengths"] = plen, rlen
    for name in ("row_leaf", "row_group", "row_reward", "row_advantage"):
        out[name] = np.asarray(batch[name])
    return out


def tree_predecessors(batch: Batch) -> np.ndarray:
    """For a tree-layout batch: per token, the index of the token before it in every
    sequence that holds it (the previous token of its segment, or the last token of
    its parent segment), -1 for the first token of a prompt. A next-token model scores
    token t with its output at ``tree_predecessors(b)[t]``."""
    if batch.layout != "tree":
        raise ValueError("tree_predecessors takes a tree-layout batch")
    so = np.asarray(batch["seg_offsets"], dtype=np.int64)
    parent = np.asarray(batch["seg_parent"], dtype=np.int64)
    pred = np.arange(-1, int(so[-1]) - 1, dtype=np.int64)
    first = so[:-1][so[1:] > so[:-1]]
    segs = np.nonzero(so[1:] > so[:-1])[0]
    # The first token of a segment follows its parent's last token; an empty
    # parent segment (a prompt without tokens) passes its own predecessor on.
    last = np.full(len(parent), -1, dtype=np.int64)
    for s in range(len(parent)):
        last[s] = so[s + 1] - 1 if so[s + 1] > so[s] else (last[parent[s]] if parent[s] >= 0 else -1)
    pred[first] = np.where(parent[segs] >= 0, last[np.maximum(parent[segs], 0)], -1)
    return pred


def group_spans(batch: Batch):
    """For a tree-layout batch: [(group, seg_lo, seg_hi, lo, hi)], each group's
    segments [seg_lo, seg_hi) and tree tokens [lo, hi). A group's segments are
    contiguous, and its tokens attend only to each other."""
    if batch.layout != "tree":
        raise ValueError("group_spans takes a tree-layout batch")
    so = np.asarray(batch["seg_offsets"], dtype=np.int64)
    groups = np.asarray(batch["seg_group"])
    out, start = [], 0
    for s in range(1, len(groups) + 1):
        if s == len(groups) or groups[s] != groups[start]:
            out.append((int(groups[start]), start, s, int(so[start]), int(so[s])))
            start = s
    return out


def tree_attention_mask(batch: Batch, seg_lo: int, seg_hi: int) -> np.ndarray:
    """For a tree-layout batch, the causal attention mask over the tokens of segments
    [seg_lo, seg_hi) (a group's, from ``group_spans``), which must hold every ancestor
    of each of them: ``mask[i, j]`` is True when the span's token j is in the sequence
    of its token i at or before it — in i's segment up to i, or in an ancestor
    segment — so attention over the packed tree sees exactly what it sees in a row."""
    so = np.asarray(batch["seg_offsets"], dtype=np.int64)
    parent = np.asarray(batch["seg_parent"], dtype=np.int64)
    n = seg_hi - seg_lo
    anc = np.eye(n, dtype=bool)
    for k in range(n):
        p = int(parent[seg_lo + k])
        if p >= 0:
            if p < seg_lo:
                raise ValueError(f"segment {seg_lo + k}'s parent {p} is outside [{seg_lo}, {seg_hi})")
            anc[k] |= anc[p - seg_lo]
    seg = np.repeat(np.arange(n), np.diff(so[seg_lo:seg_hi + 1]))
    tok = np.arange(len(seg))
    return anc[seg[:, None], seg[None, :]] & (tok[None, :] <= tok[:, None])
