"""Training batches through ``patrdb serve``: Client.batch against the
trainer's own rebuild from trajectories, both layouts, and the CLI's file.
Run from clients/python: ``python3 -m unittest -v``."""

import os
import struct
import subprocess
import unittest

from patrdb_client import Batch, BadRequest, NotFound, SafetensorsError, parse_safetensors

from . import test_client as tc


def setUpModule():
    tc.setUpModule()


def tearDownModule():
    tc.tearDownModule()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class BatchTest(tc.ServedTest):
    def grow_step(self, step, groups=2):
        tasks = tc.toy_worker.toy_tasks(groups)
        for g, t in enumerate(tasks):
            t.prompt_tokens = [900 + g, 901, 902]
        tc.grow(self.client, "r1", step, task_list=tasks)
        for g, grp in enumerate(self.client.groups("r1", step)):
            self.assertEqual(grp.prompt_tokens, [900 + g, 901, 902])

    def rebuild(self, step):
        """What a trainer builds by hand: one row per leaf from its trajectory, each
        shared turn trainable only in the row of the smallest leaf id."""
        rows = []
        for g in self.client.groups("r1", step):
            tree = self.client.tree("r1", g.id)
            advs = {a.leaf: a.advantage for a in self.client.advantages("r1", step=step, group=g.id)}
            owner = {}
            for n in sorted(tree.nodes, key=lambda n: n.id):
                if n.status not in ("completed", "pruned", "truncated"):
                    continue
                row = {"input_ids": list(g.prompt_tokens), "loss_mask": [0] * len(g.prompt_tokens)}
                row["old_logprobs"] = [0.0] * len(g.prompt_tokens)
                row["advantages"] = [0.0] * len(g.prompt_tokens)
                for pt in self.client.trajectory("r1", n.id).turns:
                    own = owner.setdefault((pt.node, pt.index), n.id) == n.id
                    for i, tok in enumerate(pt.action_tokens):
                        row["input_ids"].append(tok)
                        row["loss_mask"].append(1 if own else 0)
                        row["old_logprobs"].append(f32(pt.action_logprobs[i]) if own else 0.0)
                        row["advantages"].append(f32(advs[n.id]) if own else 0.0)
                    for tok in pt.observation_tokens:
                        row["input_ids"].append(tok)
                        row["loss_mask"].append(0)
                        row["old_logprobs"].append(0.0)
                        row["advantages"].append(0.0)
                row["positions"] = list(range(len(row["input_ids"])))
                rows.append((n.id, row))
        return rows

    def test_rows_and_tree_equal_the_trajectories(self):
        self.grow_step(1)
        want = self.rebuild(1)
        rows = self.client.batch("r1", 1)
        tree = self.client.batch("r1", 1, layout="tree")
        self.assertEqual((rows.run, rows.step, rows.layout, tree.layout), ("r1", 1, "rows", "tree"))
        try:
            import numpy
            self.assertIsInstance(rows["input_ids"], numpy.ndarray)
            self.assertEqual((rows["input_ids"].dtype, rows["old_logprobs"].dtype), (numpy.int32, numpy.float32))
        except ImportError:
            self.assertIsInstance(rows["input_ids"], memoryview)
            self.assertEqual((rows["input_ids"].format, rows["old_logprobs"].format), ("i", "f"))
        self.assertEqual(len(rows), len(want))
        self.assertEqual([int(x) for x in rows["row_leaf"]], [leaf for leaf, _ in want])
        for i, (leaf, row) in enumerate(want):
            got = {k: [float(x) if k in ("old_logprobs", "advantages") else int(x) for x in v]
                   for k, v in rows.row(i).items()}
            self.assertEqual(got, row, f"row {i} (leaf {leaf})")
            self.assertEqual({k: list(v) for k, v in tree.row(i).items()}, {k: list(v) for k, v in rows.row(i).items()})
        self.assertLess(len(tree["input_ids"]), len(rows["input_ids"]))
        self.assertGreater(float(tree.metadata["tree_token_ratio"]), 1.0)
        self.assertEqual(tree.metadata["tokens_packed"], str(len(tree["input_ids"])))
        # Filters: pruned leaves left out, one group only.
        pruned = sum(1 for s in rows["row_status"] if int(s) == 1)
        self.assertEqual(len(self.client.batch("r1", 1, exclude_pruned=True)), len(want) - pruned)
        first = int(rows["row_group"][0])
        one = self.client.batch("r1", 1, groups=[first])
        self.assertEqual({int(g) for g in one["row_group"]}, {first})

    def test_cli_file_equals_the_served_batch(self):
        self.grow_step(1, groups=1)
        out = os.path.join(self.dir, "b.safetensors")
        # The server owns the file: the CLI finds it through <db>.serve.
        subprocess.run([tc.BIN, "--db", self.db, "--timeout", "5s", "batch", "r1", "--step", "1", "--layout", "tree",
                        "--out", out], check=True, capture_output=True)
        served = self.client.fetch("GET", "/api/v1/runs/r1/steps/1/batch", query={"layout": "tree"})[1]
        with open(out, "rb") as f:
            self.assertEqual(f.read(), served)
        b = Batch.load(out)
        self.assertEqual(b.metadata["layout"], "tree")
        self.assertEqual(int(b["input_ids"][0]), 900)

    def test_loads_with_the_safetensors_package(self):
        try:
            from safetensors.numpy import load
        except ImportError:
            self.skipTest("the safetensors package is not installed")
        self.grow_step(1, groups=1)
        for layout in ("rows", "tree"):
            data = self.client.fetch("GET", "/api/v1/runs/r1/steps/1/batch", query={"layout": layout})[1]
            theirs, ours = load(data), Batch(data)
            self.assertEqual(set(theirs), set(ours.tensors))
            for name, arr in theirs.items():
                self.assertEqual(list(arr), list(ours[name]), name)

    def test_errors(self):
        self.grow_step(1, groups=1)
        with self.assertRaises(NotFound):
            self.client.batch("r1", 9)
        with self.assertRaises(BadRequest):
            self.client.batch("r1", 1, layout="packed")
        with self.assertRaises(NotFound):
            self.client.batch("nope", 1)
        data = self.client.fetch("GET", "/api/v1/runs/r1/steps/1/batch")[1]
        for bad in (data[:-1], data[:7], b"\xff" * 8 + data[8:], data[:8] + b"[" + data[9:]):
            with self.assertRaises(SafetensorsError):
                parse_safetensors(bad)


if __name__ == "__main__":
    unittest.main()
