"""Train a torch policy on FrozenLake-as-text with PaTR through ``patrdb serve``,
and the same loop with plain GRPO at exactly the same env-step budget.

Per training step: the StepDriver opens a step of ``--tasks`` groups, a
RolloutWorker grows them (the server routes PaTR's branches: expand, survive,
prune; GRPO runs B0=8 independent walks), the driver closes the groups, the
trainer fetches the step's batch with ``Client.batch`` in the tree layout
(every token once, credit ``repeat``) and takes ``--epochs`` steps of the
clipped GRPO loss computed over the packed tree from the batch's coefficients
(none when every advantage is 0: Adam's momentum would otherwise keep moving
the weights on nothing, which collapsed a converged policy in a trial run).
Every run spends exactly ``--budget`` env steps: once spent, the environment
refuses moves and the groups it cut are not trained on.

    go build -o patrdb ./cmd/patrdb
    python3 examples/torch/train.py --patrdb ./patrdb                      # both modes, 3 seeds
    python3 examples/torch/train.py --patrdb ./patrdb --seeds 1 --steps 2  # a smoke run

Results go to ``--out`` (results.jsonl, one line per step of each run; and the
plot, patr-vs-grpo.svg); the last lines printed are each mode's final success
as mean +- sd over the seeds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import patrdb_client  # noqa: F401 - installed
except ImportError:  # run from a checkout: the client beside it
    sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from patrdb_client import Client, RolloutWorker, StepDriver  # noqa: E402

import lake as lk  # noqa: E402
import plot  # noqa: E402
from policy import Actor, Policy, TreePlan, clipped_loss, evaluate, tree_logprobs  # noqa: E402

TREES = {
    # PaTR's defaults (B0=4 branches, K=5 turns an interval, top 2 expanded into M=2
    # children, pruned 0.5 below the best), at most 16 active branches a group.
    "patr": {"b0": 4, "k": 5, "m": 2, "top_expand": 2, "delta": 0.5, "max_active": 16, "repeat_prune": 6},
    # Plain GRPO: G=8 independent walks a group, no scorer, no routing.
    "grpo": {"b0": 8, "no_scoring": True},
}


class Serve:
    """A ``patrdb serve`` child process on a free loopback port."""

    def __init__(self, binary: str, db: str):
        self.proc = subprocess.Popen([binary, "--json", "--db", db, "serve", "--addr", "127.0.0.1:0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        text = ""
        for line in self.proc.stdout:  # the --json object, printed once it listens
            text += line
            if line.startswith("}"):
                break
        try:
            self.url = json.loads(text)["url"]
        except (ValueError, KeyError):
            self.proc.kill()
            raise SystemExit(f"patrdb serve did not start: {text!r} {self.proc.stderr.read()}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.proc.stderr.close()


def train_run(client: Client, a: argparse.Namespace, mode: str, seed: int, log) -> List[Dict]:
    """One run: steps until the budget is spent (or --steps); returns one record a step."""
    torch.manual_seed(seed)
    lake = lk.Lake(a.map, slippery=a.slippery, discount=a.discount, max_turns=a.max_turns)
    policy = Policy(d=a.width, layers=a.layers)
    opt = torch.optim.Adam(policy.parameters(), lr=a.lr)
    budget = lk.Budget(a.budget)
    env = lk.Env(lake, budget, seed)
    run = f"torch-{mode}-s{seed}"
    tree = dict(TREES[mode], max_turns=a.max_turns, seed=seed)
    client.create_run(run, tree=tree, meta={"trainer": "examples/torch", "mode": mode, "map": a.map},
                      client_key=f"create-{run}")
    driver = StepDriver(client, run, poll=0.01)
    records = []
    buf = bytearray()  # every step's batch file is read into it, no fresh memory a step
    for step in range(1, a.steps + 1):
        t0 = time.monotonic()
        tasks = [lake.task(f"s{step}-t{i}") for i in range(a.tasks)]
        groups = driver.open(step, tasks, tree=tree)
        worker = RolloutWorker(client, run, Actor(policy, seed, version=step), env,
                               env.score if mode == "patr" else None, name="w", max_branches=1024, poll=0.01,
                               policy_version=step)
        worker.run(step)
        advs = driver.wait(step, timeout=600)
        keep = [g for g in groups if g not in budget.cut_groups]
        rec = {"run": run, "mode": mode, "seed": seed, "step": step, "env_steps": budget.played,
               "groups_trained": len(keep), "zero_variance_groups": sum(1 for g in keep if advs.get(g) and
                                                                        advs[g][0].zero_variance)}
        if keep:
            batch = client.batch(run, step, layout="tree", credit=a.credit, norm=a.norm, groups=keep, into=buf)
            rec.update(leaves=len(batch), tokens=len(batch["input_ids"]),
                       tree_token_ratio=float(batch.metadata["tree_token_ratio"]),
                       success=sum(1 for x in batch["row_reward"] if float(x) > 0) / max(len(batch), 1))
            # A batch whose every advantage is 0 (all groups zero-variance) has no
            # gradient: no optimiser step either, so Adam's momentum does not keep
            # moving the weights on nothing.
            epochs = a.epochs if np.any(np.asarray(batch["row_advantage"]) != 0) else 0
            plan = TreePlan(batch)
            loss = torch.zeros(())
            for _ in range(epochs):
                loss = clipped_loss(tree_logprobs(policy, plan), batch, a.clip)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
            rec["loss"] = float(loss)
            # The batch's arrays are views of buf (TreePlan and the loss copy what
            # they keep): they go before the next step's batch reuses it.
            del batch
        greedy_episodes = a.eval_episodes if a.slippery else 1  # a greedy walk on plain ice is deterministic
        rec["eval_sampled"] = evaluate(policy, lake, a.eval_episodes, greedy=False, seed=seed + 1000 * step)
        rec["eval_greedy"] = evaluate(policy, lake, greedy_episodes, greedy=True, seed=seed + 1000 * step)
        rec["seconds"] = round(time.monotonic() - t0, 3)
        records.append(rec)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(f"{run} step {step:3d}  env steps {rec['env_steps']:6d}  leaves {rec.get('leaves', 0):4d}  "
              f"rollout success {rec.get('success', 0):.3f}  eval {rec['eval_sampled']:.3f} sampled / "
              f"{rec['eval_greedy']:.3f} greedy  zero-var groups {rec['zero_variance_groups']:2d}  "
              f"{rec['seconds']:.1f} s", flush=True)
        if budget.cut_groups or (a.budget is not None and budget.left == 0):
            break
    return records


def summary(records: List[Dict], modes: List[str]) -> List[str]:
    lines = []
    for mode in modes:
        last = {}
        for r in records:
            if r["mode"] == mode:
                last[r["seed"]] = r
        if not last:
            continue
        s = [r["eval_sampled"] for r in last.values()]
        g = [r["eval_greedy"] for r in last.values()]
        e = sorted({r["env_steps"] for r in last.values()})
        sd = (lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0)
        lines.append(f"{mode}: success sampled {statistics.mean(s):.3f} ± {sd(s):.3f}, "
                     f"greedy {statistics.mean(g):.3f} ± {sd(g):.3f} (mean ± sd over {len(last)} seeds) "
                     f"at {'/'.join(map(str, e))} env steps")
        # How soon: the env steps at which each run's sampled success first reached 0.9.
        first = [min((r["env_steps"] for r in records if r["mode"] == mode and r["seed"] == seed and
                      r["eval_sampled"] >= 0.9), default=None) for seed in sorted(last)]
        reached = [x for x in first if x is not None]
        if reached:
            lines.append(f"{mode}: sampled success first >= 0.9 after {statistics.mean(reached):.0f} "
                         f"± {sd(reached):.0f} env steps ({len(reached)} of {len(first)} seeds reached it)")
    return lines


def main(argv: Optional[List[str]] = None) -> List[Dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["patr", "grpo", "both"], default="both")
    p.add_argument("--seeds", type=int, default=3, help="seeds 1..N of each mode")
    p.add_argument("--budget", type=int, default=20000, help="env steps of each run")
    p.add_argument("--steps", type=int, default=1000, help="at most this many training steps a run")
    p.add_argument("--map", choices=sorted(lk.MAPS), default="4x4")
    p.add_argument("--slippery", action="store_true")
    p.add_argument("--discount", type=float, default=0.99)
    p.add_argument("--max-turns", type=int, default=30, help="turn cap of a walk")
    p.add_argument("--tasks", type=int, default=16, help="groups a step")
    p.add_argument("--epochs", type=int, default=4, help="optimiser steps on each batch")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--clip", type=float, default=0.2)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--credit", choices=["repeat", "mean", "owner"], default="repeat")
    p.add_argument("--norm", choices=["token-mean", "seq-mean-token-mean"], default="token-mean")
    p.add_argument("--eval-episodes", type=int, default=200)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--url", help="a running patrdb serve (else one is started on --db)")
    p.add_argument("--patrdb", default=os.environ.get("PATRDB_BIN", "patrdb"), help="the patrdb binary")
    p.add_argument("--db", help="the store file (default: a temporary one)")
    p.add_argument("--out", default=os.path.join(HERE, "results"), help="folder for results.jsonl and the plot")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    modes = ["patr", "grpo"] if a.mode == "both" else [a.mode]
    os.makedirs(a.out, exist_ok=True)
    tmp = None
    server = None
    if a.url is None:
        if shutil.which(a.patrdb) is None and not os.path.exists(a.patrdb):
            raise SystemExit(f"no patrdb binary at {a.patrdb!r}: build it (go build -o patrdb ./cmd/patrdb) "
                             "and pass --patrdb ./patrdb")
        db = a.db
        if db is None:
            tmp = tempfile.mkdtemp(prefix="patrdb-torch-")
            db = os.path.join(tmp, "torch.db")
        server = Serve(a.patrdb, db)
        a.url = server.url
    records: List[Dict] = []
    try:
        client = Client(a.url, retries=5, backoff=0.1)
        with open(os.path.join(a.out, "results.jsonl"), "w") as log:
            for seed in range(1, a.seeds + 1):
                for mode in modes:
                    records += train_run(client, a, mode, seed, log)
    finally:
        if server:
            server.stop()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    for line in summary(records, modes):
        print(line)
    title = (f"FrozenLake {a.map}{' slippery' if a.slippery else ''}, torch policy, "
             f"{a.seeds} seed{'s' if a.seeds > 1 else ''}, {a.budget} env steps each")
    plot.write_svg(os.path.join(a.out, "patr-vs-grpo.svg"), records, modes, title)
    return records


if __name__ == "__main__":
    main()
