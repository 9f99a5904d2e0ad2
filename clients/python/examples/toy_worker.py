"""A rollout worker you can copy: a batched policy, an environment and a
process scorer plugged into RolloutWorker, over ``patrdb serve``; and a
verifier that delivers deferred outcome rewards (and remote process scores).

The agent is a toy (its moves are a function of the branch and the turn, so
every run grows the same trees), standing in for an inference server, an
agent environment, a reward model and a test-suite verifier. Replace
``toy_act``, ``ToyEnv``, ``toy_score`` and ``toy_reward`` with yours.

    patrdb serve --db run.db &
    python3 toy_worker.py --url http://127.0.0.1:7878 --demo          # driver + 2 workers, prints advantages
    python3 toy_worker.py --url ... --run toy --step 1 --name w1      # one more worker process on a step
    python3 toy_worker.py --url ... --step 1 --slow-tool 2 --defer-rewards --verifier
                                     # tools of 0-2 s, rewards left pending and delivered by a verifier thread
    python3 toy_worker.py --url ... --step 1 --verifier-only          # a verifier process, no worker
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import threading
import time
from typing import List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from patrdb_client import (ActRequest, Client, Move, NotFound, Observation, RolloutWorker, StepDriver,  # noqa: E402
                           Task, Turn, TurnKey, Verifier)


def toy_act(requests: List[ActRequest]) -> List[Move]:
    """The batched policy: one call for every branch that needs a turn (where a
    trainer calls vLLM's generate with token ids and logprobs)."""
    moves = []
    for r in requests:
        h = r.key.branch % 1000003
        moves.append(Move(text=f"a{(h + 3 * r.key.path) % 4}", tokens=[r.key.path, h % 1000, 7],
                          logprobs=[-0.5, -0.25, -1.0]))
    return moves


class ToyEpisode:
    def __init__(self, slow: float = 0.0):
        self.slow = slow

    def step(self, key: TurnKey, move: Move) -> Observation:
        if self.slow:
            # A tool call of random length (the same for the same turn, so a
            # rerun is slow in the same places).
            time.sleep(random.Random(f"{key.seed}/{key.branch}/{key.path}/{key.attempt}").uniform(0, self.slow))
        done = (key.branch % 1000003 + key.path) % 5 == 4
        return Observation(text=f"o{move.text}@{key.path}", reward=0.25 if move.text == "a0" else 0.0, done=done)

    def state(self) -> Optional[bytes]:
        return None  # restored from the history alone


class ToyEnv:
    """The environment; ``slow`` makes each step a tool call of 0 to ``slow`` seconds."""

    def __init__(self, slow: float = 0.0):
        self.slow = slow

    def reset(self, task: Task) -> ToyEpisode:
        return ToyEpisode(self.slow)

    def restore(self, task: Task, history: List[Turn], state: Optional[bytes]) -> ToyEpisode:
        return ToyEpisode(self.slow)


def toy_score(task: Task, history: List[Turn]) -> float:
    """The process scorer: a value in [0,1] for a partial trajectory."""
    n = len(history) + sum(sum(t.action_tokens) for t in history)
    return (n % 11) / 10


def toy_reward(task: Task, history: List[Turn]) -> float:
    """The verifier's outcome reward of a finished trajectory: here the sum of
    its turns' rewards, what the server records when a worker gives none, so a
    step with deferred rewards ends with the same advantages as one without."""
    return sum(t.reward for t in history)


def toy_tasks(n: int) -> List[Task]:
    return [Task(id=f"task-{i}", prompt=f"reach cell {i}") for i in range(n)]


def worker(client: Client, run: str, name: str, max_branches: int, ttl_ms: int, acks: Optional[str],
           slow: float = 0.0, defer_rewards: bool = False, each_turn: bool = False, concurrency: int = 0,
           policy_version: int = 0) -> RolloutWorker:
    log = open(acks, "a") if acks else None
    lock = threading.Lock()

    def on_submit(subs, out):
        # One line per acknowledged submission: what the server now holds.
        if log:
            with lock:
                for s in subs:
                    log.write(json.dumps({"node": s.node, "from": s.from_, "actions": [t.action for t in s.turns],
                                          "error": s.error}) + "\n")
                log.flush()

    return RolloutWorker(client, run, toy_act, ToyEnv(slow), toy_score, name=name, max_branches=max_branches,
                         ttl_ms=ttl_ms, on_submit=on_submit, defer_rewards=defer_rewards, each_turn=each_turn,
                         concurrency=concurrency, policy_version=policy_version)


def verifier(client: Client, run: str) -> Verifier:
    """Delivers deferred rewards, and process scores when the run has remote_scores."""
    return Verifier(client, run, reward_fn=toy_reward, score_fn=toy_score)


class Background:
    """Runs fn on a thread; join() returns its result or raises its exception."""

    def __init__(self, fn, *args):
        self.result, self.error = None, None
        self.thread = threading.Thread(target=self._run, args=(fn,) + args, daemon=True)
        self.thread.start()

    def _run(self, fn, *args):
        try:
            self.result = fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to join
            self.error = e

    def join(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.result


def demo(client: Client, run: str, steps: int, tasks: int, workers: int, slow: float = 0.0,
         defer_rewards: bool = False) -> None:
    try:
        client.run(run)
    except NotFound:
        client.create_run(run, tree={"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.1, "max_turns": 8},
                          client_key=f"create-{run}")
    driver = StepDriver(client, run, poll=0.02)
    for step in range(client.run(run).run.last_step + 1, steps + 1):
        driver.open(step, toy_tasks(tasks))
        ws = [worker(client, run, f"w{i}", 4, 0, None, slow=slow, defer_rewards=defer_rewards)
              for i in range(workers)]
        threads = [Background(w.run, step) for w in ws]
        if defer_rewards:
            threads.append(Background(verifier(client, run).run, step))
        advantages = driver.wait(step, timeout=120)
        for t in threads:
            t.join()
        calls = sum(w.stats.policy_calls for w in ws)
        turns = sum(w.stats.turns for w in ws)
        print(f"step {step}: {len(advantages)} groups, {turns} turns in {calls} policy calls "
              f"(largest batch {max(w.stats.max_batch for w in ws)})")
        for g, advs in sorted(advantages.items()):
            print(f"  group {g}: " + " ".join(f"{a.leaf}:{a.outcome:g}/{a.advantage:+.2f}" for a in advs))
        client.put_checkpoint(run, step, uri=f"file:///ckpt/{run}/{step}", client_key=f"{run}/ckpt/{step}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--run", default="toy")
    p.add_argument("--step", type=int, default=1)
    p.add_argument("--name", default="", help="the worker's name (default: py-<pid>); leases are bound to it")
    p.add_argument("--max", type=int, default=4, help="branches held at once")
    p.add_argument("--ttl-ms", type=int, default=0, help="lease TTL (0: the server's default); renewed every 0.4 TTL")
    p.add_argument("--acks", help="append every acknowledged submission to this file (JSON lines)")
    p.add_argument("--slow-tool", type=float, default=0.0, metavar="SECONDS",
                   help="each env step is a tool call of a random 0 to SECONDS")
    p.add_argument("--defer-rewards", action="store_true", help="end branches with their reward pending")
    p.add_argument("--verifier", action="store_true",
                   help="also run a verifier in this process (deferred rewards, remote scores)")
    p.add_argument("--verifier-only", action="store_true", help="run only a verifier, no worker")
    p.add_argument("--each-turn", action="store_true", help="submit every turn as it is sampled")
    p.add_argument("--concurrency", type=int, default=0, help="env steps and scorer calls at once (0: --max)")
    p.add_argument("--policy-version", type=int, default=0, help="the version of the weights the worker samples with")
    p.add_argument("--demo", action="store_true", help="drive steps with in-process worker threads")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--tasks", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    client = Client(a.url, retries=2, backoff=0.05)
    if a.demo:
        demo(client, a.run, a.steps, a.tasks, a.workers, a.slow_tool, a.defer_rewards)
        return
    if a.verifier_only:
        print(json.dumps({"verifier": verifier(client, a.run).run(a.step).__dict__}))
        return
    v = Background(verifier(client, a.run).run, a.step) if a.verifier else None
    st = worker(client, a.run, a.name or f"py-{os.getpid()}", a.max, a.ttl_ms, a.acks, slow=a.slow_tool,
                defer_rewards=a.defer_rewards, each_turn=a.each_turn, concurrency=a.concurrency,
                policy_version=a.policy_version).run(a.step)
    out = dict(st.__dict__)
    if v is not None:
        out["verifier"] = v.join().__dict__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
