"""The HTTP + Python side of bench/batchbench: times Client.batch (rows and
tree, and rows into one bytearray reused across calls) against the per-leaf
JSON path on a running server, alternating, and prints the per-repetition
times as JSON.

    python3 client_bench.py URL RUN STEP REPS
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))

from patrdb_client import Client  # noqa: E402
from patrdb_client import batch as batchmod  # noqa: E402

LEAF = ("completed", "pruned", "truncated")


class CountingClient(Client):
    """Counts requests and response bytes. Token arrays travel as JSON
    numbers, as they did before the packed wire (API 1.5): the path a
    trainer took before the batch endpoint existed."""

    requests = 0
    nbytes = 0

    def packed(self):
        return False

    def fetch(self, *args, **kwargs):
        status, body = super().fetch(*args, **kwargs)
        self.requests += 1
        self.nbytes += len(body)
        return status, body


def per_leaf(c, run, step):
    """A trainer's batch from the per-leaf JSON reads: token lists per row."""
    rows = []
    for g in c.groups(run, step):
        tree = c.tree(run, g.id)
        advs = {a.leaf: a.advantage for a in c.advantages(run, step=step, group=g.id)}
        for n in sorted(tree.nodes, key=lambda n: n.id):
            if n.status not in LEAF:
                continue
            traj = c.trajectory(run, n.id)
            a = advs.get(n.id, 0.0)
            ids = list(g.prompt_tokens)
            mask = [0] * len(ids)
            lp = [0.0] * len(ids)
            adv = [0.0] * len(ids)
            for pt in traj.turns:
                k = len(pt.action_tokens)
                ids.extend(pt.action_tokens)
                mask.extend([1] * k)
                lp.extend(pt.action_logprobs or [0.0] * k)
                adv.extend([a] * k)
                o = len(pt.observation_tokens)
                ids.extend(pt.observation_tokens)
                mask.extend([0] * o)
                lp.extend([0.0] * o)
                adv.extend([0.0] * o)
            rows.append((ids, mask, lp, adv))
    return rows


def main():
    url, run, step, reps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    c = CountingClient(url, timeout=600)
    want = per_leaf(c, run, step)
    requests, nbytes = c.requests, c.nbytes
    b = c.batch(run, step)
    if len(b) != len(want) or len(b["input_ids"]) != sum(len(r[0]) for r in want):
        raise SystemExit(f"batch has {len(b)} rows, the per-leaf path {len(want)}")
    out = {"batch": [], "into": [], "tree": [], "perleaf": [], "requests": requests, "json_bytes": nbytes,
           "numpy": batchmod._np is not None}
    # A trainer's buffer, kept from step to step: its pages are mapped by the
    # call above, as they are after a trainer's first step. Each call's batch
    # is dropped when fn returns, so the next may reuse the buffer.
    buf = bytearray()
    c.batch(run, step, into=buf)
    sides = [("batch", lambda: c.batch(run, step)), ("into", lambda: c.batch(run, step, into=buf)),
             ("tree", lambda: c.batch(run, step, layout="tree")), ("perleaf", lambda: per_leaf(c, run, step))]
    for rep in range(reps):
        for k in range(len(sides)):
            name, fn = sides[(k + rep) % len(sides)]
            t0 = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - t0)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
