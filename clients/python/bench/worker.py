"""Wall time of one RolloutWorker growing a step whose tools are slow: 16 tasks
x 4 branches (64 at once), 2 turns each, every env step a 100 ms tool call,
no scoring. Measured with the worker's env steps concurrent (concurrency 64)
against the same worker stepping one env at a time (concurrency 1, the anchor,
in the same run, rounds interleaved), and against the per-branch bound (each
branch's 2 tool calls one after the other: 0.2 s). Medians of 5 rounds with
min-max.

    python3 clients/python/bench/worker.py [--bin PATH] [--rounds 5] [--tool 0.1]

Builds the CLI with ``go build`` unless --bin is given (bench/served.py).
"""

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from patrdb_client import Client, Move, Observation, RolloutWorker, Task  # noqa: E402
from served import served  # noqa: E402

TASKS, B0, TURNS = 16, 4, 2


class Episode:
    def __init__(self, tool):
        self.tool = tool

    def step(self, key, move):
        time.sleep(self.tool)  # the tool call
        return Observation(f"o{key.path}", reward=float(key.node % 2))

    def state(self):
        return None


class Env:
    def __init__(self, tool):
        self.tool = tool

    def reset(self, task):
        return Episode(self.tool)

    def restore(self, task, history, state):
        return Episode(self.tool)


def act(reqs):
    return [Move(f"m{r.key.path}", [r.key.path], [-0.5]) for r in reqs]


def grow(c, run, tool, concurrency):
    c.create_run(run, tree={"b0": B0, "k": TURNS, "max_turns": TURNS, "no_scoring": True}, client_key=run)
    c.open_step(run, 1, [Task(f"t{i}") for i in range(TASKS)], client_key=run + "/open")
    w = RolloutWorker(c, run, act, Env(tool), name="bench", max_branches=TASKS * B0, concurrency=concurrency)
    t0 = time.perf_counter()
    w.run(1)
    took = time.perf_counter() - t0
    assert w.stats.turns == TASKS * B0 * TURNS, w.stats
    return took, w.stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tool", type=float, default=0.1, help="seconds per env step")
    a = ap.parse_args()
    with served(a.bin) as url:
        c = Client(url)
        walls = {1: [], TASKS * B0: []}
        calls = []
        for r in range(a.rounds):  # interleaved, so drift hits both alike
            for conc in walls:
                took, st = grow(c, f"r{r}-c{conc}", a.tool, conc)
                walls[conc].append(took)
                if conc > 1:
                    calls.append(st.policy_calls)
        bound = TURNS * a.tool
        for conc, xs in walls.items():
            print(f"concurrency {conc}: median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f}); "
                  f"{statistics.median(xs) / bound:.2f}x the per-branch bound of {bound:.2f} s")
        ratios = [s / f for s, f in zip(walls[1], walls[TASKS * B0])]
        print(f"concurrency 1 / concurrency {TASKS * B0}: median {statistics.median(ratios):.1f}x "
              f"(min {min(ratios):.1f}, max {max(ratios):.1f}); policy calls per step: median "
              f"{statistics.median(calls)} for {TASKS * B0 * TURNS} turns")

if __name__ == "__main__":
    main()
