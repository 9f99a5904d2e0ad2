"""Training batches through ``patrdb serve``: Client.batch against the
trainer's own rebuild from trajectories, both layouts, and the CLI's file.
Run from clients/python: ``python3 -m unittest -v``."""

import os
import struct
import subprocess
import unittest

from patrdb_client import Batch, BadRequest, NotFound, SafetensorsError, parse_safetensors
from patrdb_client.batch import TOKEN_ARRAYS, weight

from . import test_client as tc


def setUpModule():
    tc.setUpModule()


def tearDownModule():
    tc.tearDownModule()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


FLOATS = ("old_logprobs", "advantages", "coef_pos", "coef_neg", "loss_weight", "turn_rewards")


CREDITS = [(c, n) for c in ("repeat", "mean", "owner") for n in ("token-mean", "seq-mean-token-mean")]


def grow_step(test, step, groups=2):
    """Grows step of run r1 with the toy agent, prompt tokens [900+g, 901, 902] and
    policy version step+4."""
    tasks = tc.toy_worker.toy_tasks(groups)
    for g, t in enumerate(tasks):
        t.prompt_tokens = [900 + g, 901, 902]
    tc.grow(test.client, "r1", step, task_list=tasks, policy_version=step + 4)
    for g, grp in enumerate(test.client.groups("r1", step)):
        test.assertEqual(grp.prompt_tokens, [900 + g, 901, 902])


class BatchTest(tc.ServedTest):
    def grow_step(self, step, groups=2):
        grow_step(self, step, groups)

    def rebuild(self, step, credit="repeat", norm="token-mean"):
        """What a trainer builds by hand from trajectories: one row per leaf, each shared
        turn trained as the credit rule says, the loss coefficients normalised by norm."""
        leaves, sharers, owner = [], {}, {}
        for g in self.client.groups("r1", step):
            tree = self.client.tree("r1", g.id)
            advs = {a.leaf: a.advantage for a in self.client.advantages("r1", step=step, group=g.id)}
            for n in sorted(tree.nodes, key=lambda n: n.id):
                if n.status not in ("completed", "pruned", "truncated"):
                    continue
                turns = self.client.trajectory("r1", n.id).turns
                leaves.append((n.id, g, advs[n.id], turns))
                for pt in turns:
                    owner.setdefault((pt.node, pt.index), len(leaves) - 1)
                    sharers.setdefault((pt.node, pt.index), []).append(len(leaves) - 1)

        def trains(r, k):
            return credit == "repeat" or owner[k] == r

        def adv_of(r, k):
            if credit == "mean":
                return f32(sum(leaves[s][2] for s in sharers[k]) / len(sharers[k]))
            return f32(leaves[r][2])

        trained = [sum(len(pt.action_tokens) for pt in turns if trains(r, (pt.node, pt.index)))
                   for r, (_, _, _, turns) in enumerate(leaves)]
        n_tokens, n_rows = sum(trained), sum(1 for n in trained if n)
        rows = []
        for r, (leaf, g, _, turns) in enumerate(leaves):
            w = weight(norm, n_tokens, n_rows, trained[r])
            row = {k: [] for k in TOKEN_ARRAYS}

            def add(tok, version, turn, reward=0.0, lp=None, a=0.0):
                row["input_ids"].append(tok)
                row["policy_versions"].append(version)
                row["turn_index"].append(turn)
                row["turn_rewards"].append(reward)
                row["loss_mask"].append(0 if lp is None else 1)
                row["old_logprobs"].append(0.0 if lp is None else lp)
                row["advantages"].append(a)
                row["coef_pos"].append(f32(w * a) if lp is not None and a > 0 else 0.0)
                row["coef_neg"].append(f32(-w * a) if lp is not None and a < 0 else 0.0)
                row["loss_weight"].append(f32(w) if lp is not None else 0.0)

            for tok in g.prompt_tokens:
                add(tok, 0, -1)
            for ti, pt in enumerate(turns):
                k = (pt.node, pt.index)
                for i, tok in enumerate(pt.action_tokens):
                    last = f32(pt.reward) if i == len(pt.action_tokens) - 1 else 0.0
                    if trains(r, k):
                        add(tok, pt.policy_version, ti, last, f32(pt.action_logprobs[i]), adv_of(r, k))
                    else:
                        add(tok, pt.policy_version, ti, last)
                for tok in pt.observation_tokens:
                    add(tok, pt.policy_version, ti)
            row["positions"] = list(range(len(row["input_ids"])))
            rows.append((leaf, row))
        return rows

    def as_lists(self, row):
        return {k: [float(x) if k in FLOATS else int(x) for x in v] for k, v in row.items()}

    def test_rows_and_tree_equal_the_trajectories(self):
        self.grow_step(1)
        for credit, norm in CREDITS:
            want = self.rebuild(1, credit, norm)
            rows = self.client.batch("r1", 1, credit=credit, norm=norm)
            tree = self.client.batch("r1", 1, layout="tree", credit=credit, norm=norm)
            self.assertEqual((rows.run, rows.step, rows.layout, tree.layout, rows.credit, tree.norm),
                             ("r1", 1, "rows", "tree", credit, norm))
            self.assertEqual(len(rows), len(want))
            self.assertEqual([int(x) for x in rows["row_leaf"]], [leaf for leaf, _ in want])
            for i, (leaf, row) in enumerate(want):
                self.assertEqual(self.as_lists(rows.row(i)), row, f"{credit} {norm}: row {i} (leaf {leaf})")
                self.assertEqual(self.as_lists(tree.row(i)), row, f"{credit} {norm}: tree row {i} (leaf {leaf})")
            self.assertEqual(int(rows.metadata["loss_tokens"]), sum(sum(r["loss_mask"]) for _, r in want))
        rows = self.client.batch("r1", 1)
        tree = self.client.batch("r1", 1, layout="tree")
        try:
            import numpy
            self.assertIsInstance(rows["input_ids"], numpy.ndarray)
            self.assertEqual((rows["input_ids"].dtype, rows["old_logprobs"].dtype), (numpy.int32, numpy.float32))
        except ImportError:
            self.assertIsInstance(rows["input_ids"], memoryview)
            self.assertEqual((rows["input_ids"].format, rows["old_logprobs"].format), ("i", "f"))
        self.assertEqual(rows.credit, "repeat")
        self.assertEqual([int(x) for x in rows["row_prompt_len"]], [3] * len(rows))
        self.assertEqual({int(x) for x in rows["policy_versions"]}, {0, 5})
        self.assertGreater(sum(1 for x in rows["turn_rewards"] if float(x) == 0.25), 0)
        self.assertLess(len(tree["input_ids"]), len(rows["input_ids"]))
        self.assertGreater(float(tree.metadata["tree_token_ratio"]), 1.0)
        self.assertEqual(tree.metadata["tokens_packed"], str(len(tree["input_ids"])))
        # Filters: pruned leaves left out, one group only.
        pruned = sum(1 for s in rows["row_status"] if int(s) == 1)
        self.assertEqual(len(self.client.batch("r1", 1, exclude_pruned=True)), len(rows) - pruned)
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

    def test_into_a_reused_buffer(self):
        """into= reads each batch into the caller's bytearray: the same arrays as a
        fresh read, the buffer resized to each, and refused while the last batch in it
        is still viewed."""
        self.grow_step(1)
        self.grow_step(2, groups=1)
        buf = bytearray(b"left over from before")
        for step, layout in ((1, "rows"), (2, "tree"), (1, "tree")):
            want = self.client.batch("r1", step, layout=layout)
            got = self.client.batch("r1", step, layout=layout, into=buf)
            self.assertEqual(got.metadata, want.metadata)
            self.assertEqual(set(got.tensors), set(want.tensors))
            for name in want.tensors:
                self.assertEqual(list(got[name]), list(want[name]), f"step {step} {layout}: {name}")
            self.assertEqual(len(buf), want.nbytes)
            # The arrays are views of the buffer: while one lives, the next read
            # into it is refused, and the buffer keeps the batch.
            before = bytes(buf)
            with self.assertRaises(BufferError):
                self.client.batch("r1", step, layout=layout, into=buf)
            self.assertEqual(bytes(buf), before, "a refused call changed the buffer")
            del got
        with self.assertRaises(TypeError):
            self.client.batch("r1", 1, into=bytes(10))
        with self.assertRaises(NotFound):
            self.client.batch("r1", 9, into=buf)

    def test_errors(self):
        self.grow_step(1, groups=1)
        with self.assertRaises(NotFound):
            self.client.batch("r1", 9)
        with self.assertRaises(BadRequest):
            self.client.batch("r1", 1, layout="packed")
        with self.assertRaises(BadRequest):
            self.client.batch("r1", 1, credit="sum")
        with self.assertRaises(BadRequest):
            self.client.batch("r1", 1, norm="seq-mean")
        with self.assertRaises(NotFound):
            self.client.batch("nope", 1)
        data = self.client.fetch("GET", "/api/v1/runs/r1/steps/1/batch")[1]
        for bad in (data[:-1], data[:7], b"\xff" * 8 + data[8:], data[:8] + b"[" + data[9:]):
            with self.assertRaises(SafetensorsError):
                parse_safetensors(bad)


if __name__ == "__main__":
    unittest.main()
