"""patrdb_client.arrays against the served rows layout: the tree expanded to rows,
verl-style padding, and the tree's predecessors and attention masks.
Run from clients/python: ``python3 -m unittest -v``."""

import unittest

from . import test_batch as tb
from . import test_client as tc

try:
    import numpy as np
    from patrdb_client.arrays import (expand, group_spans, padded, row_token_index, tree_attention_mask,
                                      tree_predecessors)
except ImportError:  # pragma: no cover - depends on the machine
    np = None


def setUpModule():
    tc.setUpModule()


def tearDownModule():
    tc.tearDownModule()


@unittest.skipIf(np is None, "numpy is not installed")
class ArraysTest(tc.ServedTest):
    def setUp(self):
        super().setUp()
        tb.grow_step(self, 1)

    def test_expand_equals_the_rows_layout(self):
        for credit, norm in tb.CREDITS:
            rows = self.client.batch("r1", 1, credit=credit, norm=norm)
            tree = self.client.batch("r1", 1, layout="tree", credit=credit, norm=norm)
            got, want = expand(tree), expand(rows)
            for name, arr in want.items():
                self.assertEqual(got[name].dtype, arr.dtype, f"{credit} {norm}: {name}")
                self.assertEqual(got[name].tobytes(), arr.tobytes(), f"{credit} {norm}: {name}")

    def test_padded(self):
        rows = self.client.batch("r1", 1)
        p = padded(rows, pad_token_id=-7)
        self.assertEqual({k: v.tobytes() for k, v in padded(self.client.batch("r1", 1, layout="tree"),
                                                              pad_token_id=-7).items()},
                         {k: v.tobytes() for k, v in p.items()})
        B, P = p["prompts"].shape
        R = p["responses"].shape[1]
        self.assertEqual(B, len(rows))
        self.assertEqual(p["input_ids"].shape, (B, P + R))
        for i in range(B):
            row = rows.row(i)
            n, pl = len(row["input_ids"]), int(rows["row_prompt_len"][i])
            rl = n - pl
            self.assertEqual((int(p["prompt_lengths"][i]), int(p["response_lengths"][i])), (pl, rl))
            self.assertEqual(list(p["prompts"][i]), [-7] * (P - pl) + [int(x) for x in row["input_ids"][:pl]])
            self.assertEqual(list(p["responses"][i]), [int(x) for x in row["input_ids"][pl:]] + [-7] * (R - rl))
            self.assertEqual(list(p["attention_mask"][i]), [0] * (P - pl) + [1] * n + [0] * (R - rl))
            real = p["attention_mask"][i] == 1
            self.assertEqual(list(p["position_ids"][i][real]), [int(x) for x in row["positions"]])
            for name, src, pad in (("response_mask", "loss_mask", 0), ("old_log_probs", "old_logprobs", 0),
                                   ("advantages", "advantages", 0), ("coef_pos", "coef_pos", 0),
                                   ("coef_neg", "coef_neg", 0), ("loss_weight", "loss_weight", 0),
                                   ("policy_versions", "policy_versions", 0), ("turn_index", "turn_index", -1),
                                   ("turn_rewards", "turn_rewards", 0)):
                self.assertEqual([float(x) for x in p[name][i]], [float(x) for x in row[src][pl:]] + [pad] * (R - rl),
                                 f"row {i} {name}")
        self.assertGreater(float(p["response_mask"].sum()), 0)
        self.assertEqual(float(p["response_mask"].sum()), float(rows.metadata["loss_tokens"]))
        wide = padded(rows, max_prompt_len=P + 2, max_response_len=R + 3)
        self.assertEqual(wide["input_ids"].shape, (B, P + R + 5))
        with self.assertRaises(ValueError):
            padded(rows, max_response_len=R - 1)

    def test_tree_predecessors_and_attention(self):
        tree = self.client.batch("r1", 1, layout="tree")
        offsets, idx = row_token_index(tree)
        pred = tree_predecessors(tree)
        spans = group_spans(tree)
        self.assertEqual(len(spans), len(set(int(g) for g in tree["row_group"])))
        masks = {g: (lo, tree_attention_mask(tree, s0, s1)) for g, s0, s1, lo, _ in spans}
        for i in range(len(tree)):
            toks = idx[offsets[i]:offsets[i + 1]]
            self.assertEqual(int(pred[toks[0]]), -1)
            self.assertEqual(list(pred[toks[1:]]), list(toks[:-1]), f"row {i}")
            lo, mask = masks[int(tree["row_group"][i])]
            for k, t in enumerate(toks):
                self.assertEqual(sorted(np.nonzero(mask[t - lo])[0] + lo), sorted(toks[:k + 1]), f"row {i} token {k}")


if __name__ == "__main__":
    unittest.main()
