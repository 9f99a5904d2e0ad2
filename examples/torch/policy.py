"""A small causal transformer policy over lake.py's tokens, and the clipped
GRPO/PPO loss computed once over a batch's packed tree.

The policy reads the whole sequence (prompt, then each turn's action and
observation) and scores the next action from its output at the token before
it. The same forward pass runs over padded rows (sampling, evaluation) or over
the packed tree of a step's batch (training): there each token attends to the
tokens of its own sequence only (``tree_attention_mask``) at the positions the
batch gives, so every token's output is the one it has in each row.
"""

from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from patrdb_client import ActRequest, Batch, Move
from patrdb_client.arrays import tree_predecessors

import lake as lk


class Block(nn.Module):
    """Pre-LayerNorm self-attention and MLP; ``allowed[b, i, j]`` says whether token i
    may attend to token j."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        att = att.masked_fill(~allowed[:, None], float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, d))
        return x + self.mlp(self.ln2(x))

    def forward_tree(self, x: torch.Tensor, plan: "TreePlan") -> torch.Tensor:
        """The same over a packed tree x [T, d]: each segment's tokens attend to the
        tokens of its ancestor segments and causally to their own, one segment at a
        time, so the work is the tokens times their sequence's length, not T^2."""
        T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(T, 3, self.heads, d // self.heads).unbind(1)
        ys = []
        for lo, hi, keys, allowed in plan.segments:
            att = torch.einsum("nhd,mhd->hnm", q[lo:hi], k[keys]) / math.sqrt(d // self.heads)
            att = att.masked_fill(~allowed, float("-inf")).softmax(-1)
            ys.append(torch.einsum("hnm,mhd->nhd", att, v[keys]))
        x = x + self.proj(torch.cat(ys).reshape(T, d))
        return x + self.mlp(self.ln2(x))


class Policy(nn.Module):
    def __init__(self, d: int = 64, heads: int = 4, layers: int = 2, max_len: int = 1024):
        super().__init__()
        self.tok = nn.Embedding(len(lk.WORDS), d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, len(lk.ACTIONS))  # logits over the four action tokens

    def forward(self, ids: torch.Tensor, pos: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """Action logits [B, T, 4] at every token (the next action's, read at the token before it)."""
        x = self.tok(ids) + self.pos(pos)
        for b in self.blocks:
            x = b(x, allowed)
        return self.head(self.ln(x))

    def tree_forward(self, plan: "TreePlan") -> torch.Tensor:
        """Action logits [T, 4] at every token of a packed tree."""
        x = self.tok(plan.ids) + self.pos(plan.positions)
        for b in self.blocks:
            x = b.forward_tree(x, plan)
        return self.head(self.ln(x))

    def rows_forward(self, seqs: Sequence[Sequence[int]]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Logits of right-padded rows under a causal mask, and each row's length."""
        lens = torch.tensor([len(s) for s in seqs])
        T = int(lens.max())
        ids = torch.zeros(len(seqs), T, dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
        ar = torch.arange(T)
        real = ar[None, :] < lens[:, None]
        # A padding token attends to itself, so no row of the softmax is empty.
        allowed = (ar[None, :, None] >= ar[None, None, :]) & real[:, None, :] | torch.eye(T, dtype=torch.bool)[None]
        return self(ids, ar[None].expand(len(seqs), T), allowed), lens


def sequence(prompt: Sequence[int], history: Sequence) -> List[int]:
    out = list(prompt)
    for t in history:
        out += list(t.action_tokens) + list(t.observation_tokens)
    return out


class Actor:
    """RolloutWorker's batched policy: one forward pass for every branch that needs a
    turn, the action drawn from the turn key's uniform (so a branch samples the same
    action whatever else is in the batch), its logprob recorded."""

    def __init__(self, policy: Policy, seed: int, version: int = 0):
        self.policy, self.seed, self.version = policy, seed, version

    @torch.no_grad()
    def __call__(self, requests: List[ActRequest]) -> List[Move]:
        seqs = [sequence(r.task.prompt_tokens, r.history) for r in requests]
        logits, lens = self.policy.rows_forward(seqs)
        logp = logits[torch.arange(len(seqs)), lens - 1].log_softmax(-1).double()
        moves = []
        for r, lp in zip(requests, logp):
            a = sample(lp, lk.key_uniform(self.seed, r.key))
            moves.append(Move(text=lk.ACTIONS[a], tokens=[lk.ACTION_IDS[a]], logprobs=[min(float(lp[a]), 0.0)],
                              policy_version=self.version))
        return moves


def sample(logp: torch.Tensor, u: float) -> int:
    """Inverse-CDF draw of an action from its log-probabilities."""
    cdf = np.cumsum(np.exp(logp.numpy()))
    return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(cdf) - 1))


# ACTION_OF[token id] is the action a token names (0 for a token that names none).
ACTION_OF = torch.zeros(len(lk.WORDS), dtype=torch.long)
ACTION_OF[lk.ACTION_IDS] = torch.arange(len(lk.ACTIONS))


class TreePlan:
    """What a forward pass over a tree-layout batch needs, computed once per batch:
    token ids and positions, and per non-empty segment its token range, the tokens
    its queries attend to (its ancestors', then its own) and the causal mask."""

    def __init__(self, batch: Batch):
        self.ids = torch.as_tensor(np.asarray(batch["input_ids"], dtype=np.int64))
        self.positions = torch.as_tensor(np.asarray(batch["positions"], dtype=np.int64))
        self.pred = torch.as_tensor(tree_predecessors(batch))
        self.is_action = torch.as_tensor(np.asarray(batch["loss_mask"]) == 1) & (self.pred >= 0)
        so = np.asarray(batch["seg_offsets"], dtype=np.int64)
        parent = np.asarray(batch["seg_parent"], dtype=np.int64)
        path: List[np.ndarray] = []  # each segment's ancestors' tokens, root first
        self.segments = []
        for s in range(len(parent)):
            before = path[parent[s]] if parent[s] >= 0 else np.zeros(0, dtype=np.int64)
            own = np.arange(so[s], so[s + 1])
            path.append(np.concatenate([before, own]))
            if len(own):
                n, m = len(own), len(before)
                allowed = torch.arange(m + n)[None, :] <= (m + torch.arange(n))[:, None]
                self.segments.append((int(so[s]), int(so[s + 1]), torch.as_tensor(path[s]), allowed))


def tree_logprobs(policy: Policy, plan: TreePlan) -> torch.Tensor:
    """Every tree token's logprob under the policy (0 where the token is no action),
    from one forward pass over the packed tree: action token t is scored by the
    output at the token before it in its sequences."""
    logits = policy.tree_forward(plan)
    lp = logits[plan.pred.clamp(min=0)].log_softmax(-1).gather(1, ACTION_OF[plan.ids][:, None])[:, 0]
    return torch.where(plan.is_action, lp, torch.zeros_like(lp))


def clipped_loss(logp: torch.Tensor, batch: Batch, eps: float) -> torch.Tensor:
    """The clipped GRPO/PPO loss from the batch's coefficients, over either layout:
    sum(-coef_pos * min(rho, 1+eps) + coef_neg * max(rho, 1-eps)), already normalised
    by the batch's norm; equal over the packed tree to the rows loss."""
    old, pos, neg = (torch.tensor(np.asarray(batch[n]), dtype=logp.dtype)
                     for n in ("old_logprobs", "coef_pos", "coef_neg"))
    rho = torch.exp(logp - old)
    return (-pos * rho.clamp(max=1 + eps) + neg * rho.clamp(min=1 - eps)).sum()


@torch.no_grad()
def evaluate(policy: Policy, lake: lk.Lake, episodes: int, greedy: bool, seed: int) -> float:
    """Success rate over episodes played with the policy alone (no store): the share
    that reach the goal within the lake's turn cap."""
    prompt = lk.tokens(lake.prompt_words())
    seqs = [list(prompt) for _ in range(episodes)]
    pos = [lake.start] * episodes
    live, won = list(range(episodes)), 0
    for t in range(lake.max_turns):
        if not live:
            break
        logits, lens = policy.rows_forward([seqs[i] for i in live])
        logp = logits[torch.arange(len(live)), lens - 1].log_softmax(-1).double()
        still = []
        for i, lp in zip(live, logp):
            a = int(lp.argmax()) if greedy else sample(lp, lk.uniform(seed, i, t, 1))
            pos[i] = lake.move(pos[i], a, lk.uniform(seed, i, t, 2))
            seqs[i] += [lk.ACTION_IDS[a]] + lk.tokens(lake.observation_words(pos[i]))
            if lake.tile(pos[i]) == "G":
                won += 1
            elif lake.tile(pos[i]) != "H":
                still.append(i)
        live = still
    return won / episodes
