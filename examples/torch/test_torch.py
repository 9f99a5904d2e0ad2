"""The loss over the packed tree is the loss over the rows, checked with torch
against a real ``patrdb serve``:

- for random logits, every credit rule and both normalisations, the gradient of
  the tree loss (from the batch's coefficients) equals the gradient of the rows
  loss (computed from loss_mask and advantages, as verl aggregates it) within
  1e-5 relative, on steps grown by this example's lake agent (one action token a
  turn, three observation tokens) and by the client's toy agent (three action
  tokens a turn, none observed);
- under ``repeat``, the tree loss of the example's transformer has the gradient
  of GRPO over every leaf's full trajectory, read from the API and run as an
  independent sample;
- train.py trains end to end for two steps, and both modes stop at exactly the
  env-step budget.

Run from the repository root: ``python3 -m unittest discover -s examples/torch -v``
(PATRDB_BIN names the patrdb binary; otherwise it is built with go).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "clients", "python", "examples"))
try:
    import patrdb_client  # noqa: F401 - installed
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from patrdb_client import Client, RolloutWorker, StepDriver  # noqa: E402
from patrdb_client.arrays import row_token_index  # noqa: E402

import lake as lk  # noqa: E402
import toy_worker  # noqa: E402
import train  # noqa: E402
from policy import Actor, Policy, TreePlan, clipped_loss, sequence, tree_logprobs  # noqa: E402

CREDITS = [(c, n) for c in ("repeat", "mean", "owner") for n in ("token-mean", "seq-mean-token-mean")]
EPS = 0.2
BIN = None
BUILD = None


def setUpModule():
    global BIN, BUILD
    BIN = os.environ.get("PATRDB_BIN")
    if not BIN:
        BUILD = tempfile.mkdtemp(prefix="patrdb-bin-")
        BIN = os.path.join(BUILD, "patrdb")
        subprocess.run(["go", "build", "-o", BIN, "./cmd/patrdb"], cwd=REPO, check=True)


def tearDownModule():
    if BUILD:
        shutil.rmtree(BUILD, ignore_errors=True)


def rows_loss(logp, rows, norm):
    """The clipped loss over the rows layout as a verl-style trainer computes it: per
    token -min(rho*A, clip(rho)*A) on loss_mask, then token-mean (over every trained
    token) or seq-mean-token-mean (each row's mean, then the mean over rows that
    train a token)."""
    mask = torch.tensor(np.asarray(rows["loss_mask"]), dtype=torch.float64)
    adv = torch.tensor(np.asarray(rows["advantages"]), dtype=torch.float64)
    old = torch.tensor(np.asarray(rows["old_logprobs"]), dtype=torch.float64)
    rho = torch.exp(logp - old)
    tok = -torch.minimum(rho * adv, rho.clamp(1 - EPS, 1 + EPS) * adv) * mask
    if norm == "token-mean":
        return tok.sum() / mask.sum()
    off = np.asarray(rows["row_offsets"])
    seqs = [tok[off[i]:off[i + 1]].sum() / mask[off[i]:off[i + 1]].sum()
            for i in range(len(off) - 1) if mask[off[i]:off[i + 1]].sum() > 0]
    return torch.stack(seqs).mean()


def rel(a, b):
    return float((a - b).norm() / b.norm())


class Served(unittest.TestCase):
    """One server and three grown steps for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="patrdb-torch-test-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, ignore_errors=True)
        cls.serve = train.Serve(BIN, os.path.join(cls.dir, "t.db"))
        cls.addClassCleanup(cls.serve.stop)  # also when what follows fails
        cls.client = Client(cls.serve.url, retries=5, backoff=0.1)
        # The lake agent, under PaTR's routing, untrained: prefixes shared by
        # expansion, pruned and truncated leaves.
        torch.manual_seed(7)
        cls.lake = lk.Lake("4x4", max_turns=12)
        cls.policy = Policy().double()
        with torch.no_grad():  # leaning down and right, so some walks reach the goal
            cls.policy.head.bias.copy_(torch.tensor([-2.0, 2.0, 2.0, -2.0]))
        tree = dict(train.TREES["patr"], max_turns=12, seed=3)
        cls.client.create_run("lake", tree=tree, client_key="create-lake")
        driver = StepDriver(cls.client, "lake", poll=0.01)
        driver.open(1, [cls.lake.task(f"t{i}") for i in range(8)], tree=tree)
        env = lk.Env(cls.lake, lk.Budget(None), 3)
        RolloutWorker(cls.client, "lake", Actor(cls.policy, 3, 1), env, env.score, name="lake-worker", max_branches=256,
                      poll=0.01, policy_version=1).run(1)
        driver.wait(1, timeout=120)
        # The client's toy agent: three action tokens a turn.
        toy = {"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.1, "repeat_prune": 0, "max_turns": 8}
        cls.client.create_run("toy", tree=toy, client_key="create-toy")
        driver = StepDriver(cls.client, "toy", poll=0.01)
        tasks = toy_worker.toy_tasks(3)
        for t in tasks:
            t.prompt_tokens = [40, 41, 42]
        driver.open(1, tasks)
        RolloutWorker(cls.client, "toy", toy_worker.toy_act, toy_worker.ToyEnv(), toy_worker.toy_score,
                      name="toy-worker", max_branches=64, poll=0.01).run(1)
        driver.wait(1, timeout=120)


class TreeLossTest(Served):
    def test_gradient_of_the_tree_loss_is_the_rows_loss_gradient(self):
        gen = torch.Generator().manual_seed(11)
        for run in ("lake", "toy"):
            for credit, norm in CREDITS:
                name = f"{run} {credit} {norm}"
                rows = self.client.batch(run, 1, credit=credit, norm=norm)
                tree = self.client.batch(run, 1, layout="tree", credit=credit, norm=norm)
                _, idx = row_token_index(tree)
                ids = np.asarray(tree["input_ids"])
                self.assertEqual(list(ids[idx]), list(np.asarray(rows["input_ids"])), name)
                self.assertGreater(float(tree.metadata["tree_token_ratio"]), 1.2, name)
                # Random logits over 8 classes at every tree token; a token's logprob
                # is its class's (id mod 8). Every copy of a token in the rows is the
                # same tree token, so the rows loss reads the same numbers.
                z = (3 * torch.randn(len(ids), 8, dtype=torch.float64, generator=gen)).requires_grad_()
                cls = torch.as_tensor(ids % 8, dtype=torch.long)
                logp = z.log_softmax(-1).gather(1, cls[:, None])[:, 0]
                want = rows_loss(logp[torch.as_tensor(idx)], rows, norm)
                g_rows, = torch.autograd.grad(want, z, retain_graph=True)
                got = clipped_loss(logp, tree, EPS)
                g_tree, = torch.autograd.grad(got, z)
                rho = torch.exp(logp - torch.tensor(np.asarray(tree["old_logprobs"]), dtype=torch.float64))
                action = torch.as_tensor(np.asarray(tree["loss_mask"]) == 1)
                self.assertTrue(bool((rho[action] > 1 + EPS).any() and (rho[action] < 1 - EPS).any()), name)
                self.assertGreater(float(g_rows.norm()), 0, name)
                self.assertLess(rel(g_tree, g_rows), 1e-5, name)
                self.assertLess(abs(float(got - want)), 1e-5 * abs(float(want)), name)

    def test_repeat_trains_every_leaf_as_an_independent_sample(self):
        torch.manual_seed(5)
        policy = Policy().double()
        policy.load_state_dict(self.policy.state_dict())
        with torch.no_grad():  # move off the sampling policy, so ratios leave 1 and clip
            for p in policy.parameters():
                p.add_(0.05 * torch.randn_like(p))
        # The leaves as a trainer without patrdb's batch holds them: each one's
        # whole trajectory, prompt first, with its GRPO advantage.
        seqs, acts, olds, advs = [], [], [], []
        for g in self.client.groups("lake", 1):
            adv = {a.leaf: a.advantage for a in self.client.advantages("lake", step=1, group=g.id)}
            for n in sorted(self.client.tree("lake", g.id).nodes, key=lambda n: n.id):
                if n.status not in ("completed", "pruned", "truncated"):
                    continue
                turns = self.client.trajectory("lake", n.id).turns
                seqs.append(sequence(g.prompt_tokens, turns))
                at, old = [], []
                k = len(g.prompt_tokens)
                for t in turns:
                    at.append(k)
                    old += list(t.action_logprobs)
                    k += len(t.action_tokens) + len(t.observation_tokens)
                acts.append(at)
                olds.append(old)
                advs.append(adv[n.id])
        self.assertGreater(len(seqs), 12)
        for norm in ("token-mean", "seq-mean-token-mean"):
            logits, _ = policy.rows_forward(seqs)
            per_leaf = []
            for i, (at, old) in enumerate(zip(acts, olds)):
                a = torch.tensor([lk.ACTION_IDS.index(seqs[i][j]) for j in at])
                lp = logits[i, torch.tensor(at) - 1].log_softmax(-1).gather(1, a[:, None])[:, 0]
                rho = torch.exp(lp - torch.tensor(old, dtype=torch.float64))
                A = advs[i]
                per_leaf.append(-torch.minimum(rho * A, rho.clamp(1 - EPS, 1 + EPS) * A))
            if norm == "token-mean":
                want = torch.cat(per_leaf).sum() / sum(len(x) for x in per_leaf)
            else:
                want = torch.stack([x.mean() for x in per_leaf if len(x)]).mean()
            g_want = torch.autograd.grad(want, list(policy.parameters()))
            tree = self.client.batch("lake", 1, layout="tree", credit="repeat", norm=norm)
            got = clipped_loss(tree_logprobs(policy, TreePlan(tree)), tree, EPS)
            g_got = torch.autograd.grad(got, list(policy.parameters()))
            flat = lambda gs: torch.cat([g.reshape(-1) for g in gs])  # noqa: E731
            self.assertGreater(float(flat(g_want).norm()), 0)
            self.assertLess(rel(flat(g_got), flat(g_want)), 1e-5, norm)
            # The other rules train a shared prefix once: not this gradient.
            mean = self.client.batch("lake", 1, layout="tree", credit="mean", norm=norm)
            g_mean = torch.autograd.grad(clipped_loss(tree_logprobs(policy, TreePlan(mean)), mean, EPS),
                                         list(policy.parameters()))
            self.assertGreater(rel(flat(g_mean), flat(g_want)), 1e-3, norm)


class TrainTest(unittest.TestCase):
    def test_two_steps_end_to_end_and_an_exact_budget(self):
        out = tempfile.mkdtemp(prefix="patrdb-torch-train-")
        try:
            common = ["--patrdb", BIN, "--seeds", "1", "--tasks", "4", "--eval-episodes", "10", "--max-turns", "12",
                      "--out", out]
            recs = train.main(common + ["--steps", "2"])
            for mode in ("patr", "grpo"):
                rs = [r for r in recs if r["mode"] == mode]
                self.assertEqual([r["step"] for r in rs], [1, 2], mode)
                self.assertTrue(all(r["leaves"] > 0 and r["env_steps"] > 0 and r["groups_trained"] == 4 for r in rs))
            self.assertTrue(os.path.getsize(os.path.join(out, "patr-vs-grpo.svg")) > 1000)
            recs = train.main(common + ["--budget", "300"])
            for mode in ("patr", "grpo"):
                last = [r for r in recs if r["mode"] == mode][-1]
                self.assertEqual(last["env_steps"], 300, mode)
                self.assertLess(last["groups_trained"], 4, f"{mode}: the budget cut none of the last step's groups")
        finally:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
