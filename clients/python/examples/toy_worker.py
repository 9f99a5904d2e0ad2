"""A rollout worker you can copy: a batched policy, an environment and a
process scorer plugged into RolloutWorker, over ``patrdb serve``.

The agent is a toy (its moves are a function of the branch and the turn, so
every run grows the same trees), standing in for an inference server, an
agent environment and a reward model. Replace ``toy_act``, ``ToyEnv`` and
``toy_score`` with yours.

    patrdb serve --db run.db &
    python3 toy_worker.py --url http://127.0.0.1:7878 --demo          # driver + 2 workers, prints advantages
    python3 toy_worker.py --url ... --run toy --step 1 --name w1      # one more worker process on a step
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from typing import List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from patrdb_client import (ActRequest, Client, Move, NotFound, Observation, RolloutWorker, StepDriver,  # noqa: E402
                           Task, Turn, TurnKey)


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
    def step(self, key: TurnKey, move: Move) -> Observation:
        done = (key.branch % 1000003 + key.path) % 5 == 4
        return Observation(text=f"o{move.text}@{key.path}", reward=0.25 if move.text == "a0" else 0.0, done=done)

    def state(self) -> Optional[bytes]:
        return None  # restored from the history alone


class ToyEnv:
    def reset(self, task: Task) -> ToyEpisode:
        return ToyEpisode()

    def restore(self, task: Task, history: List[Turn], state: Optional[bytes]) -> ToyEpisode:
        return ToyEpisode()


def toy_score(task: Task, history: List[Turn]) -> float:
    """The process scorer: a value in [0,1] for a partial trajectory."""
    n = len(history) + sum(sum(t.action_tokens) for t in history)
    return (n % 11) / 10


def toy_tasks(n: int) -> List[Task]:
    return [Task(id=f"task-{i}", prompt=f"reach cell {i}") for i in range(n)]


def worker(client: Client, run: str, name: str, max_branches: int, ttl_ms: int, acks: Optional[str]) -> RolloutWorker:
    log = open(acks, "a") if acks else None

    def on_submit(subs, out):
        # One line per acknowledged submission: what the server now holds.
        if log:
            for s in subs:
                log.write(json.dumps({"node": s.node, "from": s.from_, "actions": [t.action for t in s.turns],
                                      "error": s.error}) + "\n")
            log.flush()

    return RolloutWorker(client, run, toy_act, ToyEnv(), toy_score, name=name, max_branches=max_branches,
                         ttl_ms=ttl_ms, on_submit=on_submit)


def demo(client: Client, run: str, steps: int, tasks: int, workers: int) -> None:
    try:
        client.run(run)
    except NotFound:
        client.create_run(run, tree={"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.1, "max_turns": 8},
                          client_key=f"create-{run}")
    driver = StepDriver(client, run, poll=0.02)
    for step in range(client.run(run).run.last_step + 1, steps + 1):
        driver.open(step, toy_tasks(tasks))
        ws = [worker(client, run, f"w{i}", 4, 0, None) for i in range(workers)]
        threads = [threading.Thread(target=w.run, args=(step,)) for w in ws]
        for t in threads:
            t.start()
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
    p.add_argument("--name", default="")
    p.add_argument("--max", type=int, default=4, help="branches per lease")
    p.add_argument("--ttl-ms", type=int, default=0, help="lease TTL (0: the server's default)")
    p.add_argument("--acks", help="append every acknowledged submission to this file (JSON lines)")
    p.add_argument("--demo", action="store_true", help="drive steps with in-process worker threads")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--tasks", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    client = Client(a.url, retries=2, backoff=0.05)
    if a.demo:
        demo(client, a.run, a.steps, a.tasks, a.workers)
        return
    st = worker(client, a.run, a.name, a.max, a.ttl_ms, a.acks).run(a.step)
    print(json.dumps(st.__dict__))


if __name__ == "__main__":
    main()
