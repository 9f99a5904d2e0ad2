"""Tests of the Python client against a real ``patrdb serve``.

The suite builds the CLI with ``go build -o`` (or uses $PATRDB_BIN), starts
``patrdb serve`` on a free loopback port per test, and drives whole PaTR
groups through it. Run from clients/python: ``python3 -m unittest -v``.
"""

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from patrdb_client import (BadRequest, Client, Conflict, NotFound, TreeRollout, Turn,  # noqa: E402
                           Unauthorized)

REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
BIN = None
BUILD_DIR = None


def setUpModule():
    global BIN, BUILD_DIR
    BIN = os.environ.get("PATRDB_BIN")
    if BIN:
        return
    BUILD_DIR = tempfile.mkdtemp(prefix="patrdb-bin-")
    BIN = os.path.join(BUILD_DIR, "patrdb")
    subprocess.run(["go", "build", "-o", BIN, "./cmd/patrdb"], cwd=REPO, check=True)


def tearDownModule():
    if BUILD_DIR:
        shutil.rmtree(BUILD_DIR, ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A ``patrdb serve`` child process on a fixed loopback port."""

    def __init__(self, db, port=None, extra=()):
        self.db, self.port, self.extra = db, port or free_port(), list(extra)
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([BIN, "--db", self.db, "serve", "--addr", f"127.0.0.1:{self.port}"] + self.extra,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("serving "):
            self.proc.kill()
            raise RuntimeError(f"serve said {line!r}: {self.proc.stderr.read()}")
        return self

    def stop(self, sig=signal.SIGINT):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)
        if self.proc:
            self.proc.stdout.close()
            self.proc.stderr.close()
        code = self.proc.returncode if self.proc else None
        self.proc = None
        return code


def toy_env():
    """A deterministic corridor: the action is a move, "right" 3 times in a
    row reaches the goal (reward 1); a path of 6 turns without it ends (0)."""

    def act(history):
        n = len(history)
        # Branches differ by the parity of their history length and content.
        move = "right" if (n + sum(len(t.action) for t in history)) % 3 != 1 else "down"
        done = (len(history) >= 2 and all(t.action == "right" for t in history[-2:]) and move == "right") or n + 1 >= 6
        goal = done and move == "right" and all(t.action == "right" for t in history[-2:])
        return Turn(action=move, observation=f"cell {n + 1}", action_tokens=[n, n + 1], action_logprobs=[-0.5, -0.25],
                    observation_tokens=[7], reward=1.0 if goal else 0.0, done=done)

    def score(history):
        return min(1.0, sum(1 for t in history if t.action == "right") / 4)

    return act, score


def grpo(rewards, eps=1e-6):
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if std <= 1e-12 * max(1.0, max(abs(r) for r in rewards)):
        return [0.0] * len(rewards), mean, 0.0
    return [(r - mean) / (std + eps) for r in rewards], mean, std


class ServedTest(unittest.TestCase):
    tree = {"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.3, "repeat_prune": 0, "max_turns": 6}

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="patrdb-py-")
        self.db = os.path.join(self.dir, "patr.db")
        self.server = Server(self.db).start()
        self.client = Client(self.server.url, retries=5, backoff=0.1)
        self.client.create_run("r1", tree=self.tree, meta={"trainer": "python"}, client_key="create-r1")

    def tearDown(self):
        if self.server.proc:
            self.assertEqual(self.server.stop(), 0)
        shutil.rmtree(self.dir, ignore_errors=True)

    def last_seq(self, run="r1"):
        return self.client.run(run).events


class WholeGroupTest(ServedTest):
    def test_a_patr_group_driven_from_python(self):
        act, score = toy_env()
        r = TreeRollout.open(self.client, "r1", 1, task="corridor", prompt="go right")
        self.assertEqual(len(r.active), 3)
        advs = r.grow(act, score, k=2, max_turns=6)

        tree = self.client.tree("r1", r.group.id)
        self.assertEqual(tree.group.status, "closed")
        statuses = {n.status for n in tree.nodes}
        self.assertIn("expanded", statuses)
        leaves = sorted((n for n in tree.nodes if n.status in ("completed", "truncated", "pruned")), key=lambda n: n.id)
        self.assertEqual([a.leaf for a in advs], [n.id for n in leaves])
        self.assertEqual({n.id: n.reward for n in leaves}, r.leaves)
        # The advantages are GRPO's over the leaves' outcome rewards.
        want, mean, std = grpo([n.reward for n in leaves])
        for a, w in zip(advs, want):
            self.assertAlmostEqual(a.advantage, w, places=9)
            self.assertAlmostEqual(a.mean, mean, places=12)
        # A child's trajectory starts with its parent's turns, stored once.
        child = next(n for n in tree.nodes if n.parent)
        traj = self.client.trajectory("r1", child.id)
        self.assertEqual(traj.inherited, child.base)
        self.assertEqual(traj.turns[0].node, traj.segments[0].node)
        self.assertEqual(len(traj.turns), child.base + child.turns)
        self.assertEqual(traj.turns[0].action_tokens, [0, 1])
        self.assertAlmostEqual(traj.turns[0].action_logprobs[1], -0.25)
        stats = self.client.stats("r1").runs[0]
        self.assertGreater(stats.prefix_sharing, 1.0)
        # Every read endpoint answers with typed records.
        self.assertEqual(self.client.health().status, "ok")
        self.assertEqual([s.run.id for s in self.client.runs()], ["r1"])
        self.assertEqual(self.client.run("r1").run.config["tree"]["b0"], 3)
        self.assertEqual(self.client.steps("r1")[0].leaves, len(leaves))
        self.assertEqual(self.client.groups("r1", 1)[0].task, "corridor")
        self.assertEqual(self.client.frontier("r1"), [])
        self.assertEqual(self.client.rubrics("r1"), [])
        self.assertEqual(len(self.client.advantages("r1", step=1)), len(leaves))
        self.assertEqual(self.client.node("r1", child.id).node.parent, child.parent)
        events = list(self.client.iter_events("r1", page=7))
        self.assertEqual([e.seq for e in events], list(range(1, len(events) + 1)))
        ck = self.client.put_checkpoint("r1", 1, inline=b"\x00policy", meta={"lr": "0.1"})
        self.assertEqual(ck.run.last_step, 1)
        self.assertEqual(self.client.checkpoint("r1").inline, b"\x00policy")

    def test_shaped_close(self):
        act, score = toy_env()
        r = TreeRollout.open(self.client, "r1", 1)
        while not r.done:
            for b in r.active:
                t = act(b.history)
                r.append(b.node, [t])
                if t.done:
                    r.finish(b.node, t.reward)
            if not r.done:
                r.route({b.node: score(b.history) for b in r.active})
        leaves = sorted(r.leaves)
        centred = {leaf: (0.5 if i % 2 else -0.5) for i, leaf in enumerate(leaves)}
        advs = r.close(rubric_scores=centred, lambda_=0.2)
        totals = [r.leaves[leaf] + 0.2 * centred[leaf] for leaf in leaves]
        want, _, _ = grpo(totals)
        for a, w, t in zip(advs, want, totals):
            self.assertAlmostEqual(a.total, t, places=12)
            self.assertAlmostEqual(a.advantage, w, places=9)
            self.assertEqual(a.lambda_, 0.2)


class ReadmeTest(ServedTest):
    def test_the_readme_loop_runs(self):
        """The verl-style loop of README.md, run as written with stand-ins for
        the policy, the environment and the process reward model."""
        with open(os.path.join(HERE, "..", "README.md")) as f:
            readme = f.read()
        blocks = readme.split("```python\n")
        code = next(b.split("```")[0] for b in blocks if "def rollout_step" in b)

        class Out:
            def __init__(self, text, n):
                self.text, self.token_ids, self.logprobs = text, [n, n + 1], [-0.1, -0.2]

        class Policy:
            updates = []

            def generate(self, batch):
                return [Out("right" if (len(h) + len(p)) % 3 else "down", len(h)) for p, h in batch]

            def update(self, batch):
                self.updates.append(batch)

            def digest(self):
                return "sha256:0"

        class Obs:
            def __init__(self, n):
                self.text, self.token_ids = f"cell {n}", [n]

        class Envs:
            def step(self, task, hist, action):
                rights = sum(t.action == "right" for t in hist) + (action == "right")
                return Obs(len(hist)), (1.0 if rights >= 4 else 0.0), rights >= 4

        class Prm:
            def score(self, prompt, history):
                return min(1.0, sum(t.action == "right" for t in history) / 4)

        class Task:
            def __init__(self, i):
                self.id, self.prompt = f"task-{i}", f"walk right {i}"

        self.client.create_run("swe-1", tree={"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.3, "max_turns": 8},
                               client_key="create-swe-1")
        policy = Policy()
        ns = {"c": self.client, "TreeRollout": TreeRollout, "Turn": Turn, "policy": policy, "envs": Envs(),
              "prm": Prm(), "last_step": 0, "total_steps": 2, "sample_tasks": lambda step: [Task(0), Task(1)]}
        exec(code, ns)
        self.assertEqual(len(policy.updates), 2)
        self.assertEqual(self.client.run("swe-1").run.last_step, 2)
        for st in self.client.steps("swe-1"):
            self.assertEqual(st.closed_groups, 2)
            self.assertGreater(st.leaves, 4)
        turns, adv = policy.updates[0][0]
        self.assertTrue(turns and isinstance(adv, float))
        self.assertEqual(self.client.frontier("swe-1"), [])


class RubricTest(ServedTest):
    def test_rubric_buffer_lifecycle(self):
        self.client.create_run("arbor", tree={"b0": 4, "k": 1}, rubric={"consolidate_at": 2, "active": 1, "lambda": 0.5},
                               client_key="create-arbor")

        def group(step, rewards):
            self.assertEqual(self.client.activate("arbor", step).step, step)
            r = TreeRollout.open(self.client, "arbor", step)
            for b, rw in zip(r.active, rewards):
                r.append(b.node, [Turn(f"answer {b.node}", "ok", done=True)])
                r.finish(b.node, rw)
            return r

        r1 = group(1, [0, 1, 0, 1])
        rew = dict(r1.leaves)
        by_reward = lambda n: "a" if rew[n.a] > rew[n.b] else ("b" if rew[n.a] < rew[n.b] else "tie")
        drafts = [{"text": "the answer names the capital city"}, {"text": "the answer cites the second source document"}]
        answers = self.client.shape_answers(
            "arbor", r1.group.id, judge=by_reward, induce=lambda need: drafts,
            consolidate=lambda need: [{"text": "the answer is grounded in the documents",
                                       "absorbs": [d.id for d in need.drafts]}])
        r1.close(pool=answers)
        public = self.client.rubrics("arbor", "public")
        self.assertEqual(len(public), 1)
        self.assertEqual(len(public[0].parents), 2)

        r2 = group(2, [0, 0, 0, 0])
        self.assertEqual([x.id for x in self.client.active_rubrics("arbor", 2).active], [public[0].id])
        answers = self.client.shape_answers("arbor", r2.group.id, judge=lambda n: "a" if n.a < n.b else "b")
        advs = r2.close(pool=answers)
        self.assertTrue(all(a.zero_variance and not a.zero_variance_after for a in advs))
        self.assertGreater(advs[0].advantage, 0)
        self.assertLess(advs[-1].advantage, 0)
        self.assertEqual(self.client.steps("arbor")[1].unlocked, 1)


class RestartTest(ServedTest):
    def test_server_restart_mid_run(self):
        act, score = toy_env()
        r = TreeRollout.open(self.client, "r1", 1, task="corridor")
        # One interval: two turns on each root, then routing.
        for b in r.active:
            r.append(b.node, [act(b.history), act(b.history + [act(b.history)])])
        scores0 = {b.node: score(b.history) for b in r.active}
        first = r.route(scores0)
        # Half of the next interval, then the server dies without warning.
        half = r.active[0]
        r.append(half.node, [act(half.history)])
        self.assertEqual(self.server.stop(signal.SIGKILL), -signal.SIGKILL)
        self.assertTrue(os.path.exists(self.db + ".serve"), "kill -9 leaves the address file")
        self.server.start()  # same port, same file

        # The trainer restarts too: it resumes from the frontier.
        resumed = TreeRollout.resume(self.client, "r1", r.group.id)
        self.assertEqual(sorted(resumed.branches), sorted(r.branches))
        self.assertEqual(resumed.interval, 1)
        for node, b in r.branches.items():
            self.assertEqual([t.action for t in resumed.branches[node].history], [t.action for t in b.history])
            self.assertEqual(resumed.branches[node].own_turns, b.own_turns)
        # Requests the old trainer had sent are answered as before, unwritten.
        seq = self.last_seq()
        replay = self.client.open_group("r1", 1, "corridor", "", client_key="r1/s1/g0/open")
        self.assertEqual(replay.group.id, r.group.id)
        rerouted = self.client.route("r1", r.group.id, scores0, interval=0, client_key=f"r1/g{r.group.id}/i0/route")
        self.assertEqual(rerouted, first)
        self.assertEqual(self.last_seq(), seq)
        self.assertEqual(first.interval, 0)

        advs = resumed.grow(act, score, k=2, max_turns=6)
        tree = self.client.tree("r1", r.group.id)
        leaves = [n for n in tree.nodes if n.status in ("completed", "truncated", "pruned")]
        self.assertEqual(len(advs), len(leaves))
        self.assertEqual(tree.group.status, "closed")
        self.assertEqual(self.client.frontier("r1"), [])

    def test_client_retries_across_a_restart(self):
        # The server goes away between two writes and comes back on the same
        # port; the client's retries carry the write over the gap, once.
        r = TreeRollout.open(self.client, "r1", 1)
        node = r.active[0].node
        self.server.stop()
        import threading
        threading.Timer(0.4, self.server.start).start()
        r.append(node, [Turn(action="a", observation="o")])
        time.sleep(0.1)
        info = self.client.node("r1", node).node
        self.assertEqual(info.turns, 1)


class BadInputTest(ServedTest):
    def setUp(self):
        super().setUp()
        self.r = TreeRollout.open(self.client, "r1", 1)
        self.a, self.b, self.c = [b.node for b in self.r.active]

    def assertRefused(self, exc, fn, *args, **kw):
        seq = self.last_seq()
        with self.assertRaises(exc) as cm:
            fn(*args, **kw)
        self.assertEqual(self.last_seq(), seq, "a refused request wrote")
        self.assertTrue(cm.exception.message)
        self.assertNotIn("\n", cm.exception.message)
        return cm.exception

    def raw(self, path, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else body.encode()
        return self.client.raw("POST", path, data, content_type=content_type)

    def test_bad_inputs_are_4xx_and_write_nothing(self):
        g = f"/api/v1/runs/r1/groups/{self.r.group.id}"
        n = f"/api/v1/runs/r1/nodes/{self.a}"
        cases = [
            (BadRequest, g + "/route", '{"client_key":"x","scores":[{"node":%d,"score":NaN}]}' % self.a),
            (BadRequest, g + "/route", '{"client_key":"x","scores":[{"node":%d,"score":0.5}' % self.a),
            (BadRequest, g + "/route", '{"client_key":"x","scores":[{"node":%d,"score":"high"}]}' % self.a),
            (BadRequest, g + "/route", '{"client_key":"x","scores":[],"extra":1}'),
            (BadRequest, n + "/turns", '{"from":0,"turns":[{"action":"a","observation":"o"}]}'),
            (BadRequest, n + "/turns", '{"client_key":"x","from":0,"turns":[{"action":"a","observation":"o","reward":Infinity}]}'),
            (NotFound, "/api/v1/runs/r1/nodes/999/turns", '{"client_key":"x","from":0,"turns":[{"action":"a"}]}'),
            (NotFound, "/api/v1/runs/nope/groups", '{"client_key":"x","step":1}'),
        ]
        for exc, path, body in cases:
            with self.subTest(body=body):
                self.assertRefused(exc, self.raw, path, body)
        self.assertRefused(BadRequest, self.raw, g + "/close", '{"client_key":"x"}', content_type="text/plain")

    def test_client_side_and_server_side_checks(self):
        # Scores outside [0,1]: refused by the server.
        self.assertRefused(BadRequest, self.client.route, "r1", self.r.group.id, {self.a: 1.5, self.b: 0.5, self.c: 0.5})
        self.assertRefused(BadRequest, self.client.route, "r1", self.r.group.id, {self.a: -0.1, self.b: 0.5, self.c: 0.5})
        # Not every active branch scored.
        self.assertRefused(BadRequest, self.client.route, "r1", self.r.group.id, {self.a: 0.5})
        # NaN never leaves the client (JSON has no NaN).
        seq = self.last_seq()
        with self.assertRaises(ValueError):
            self.client.route("r1", self.r.group.id, {self.a: float("nan")})
        with self.assertRaises(ValueError):
            self.client.finish("r1", self.a, float("inf"))
        self.assertEqual(self.last_seq(), seq)
        # Unknown ids.
        self.assertRefused(NotFound, self.client.finish, "r1", 999, 1.0)
        self.assertRefused(NotFound, self.client.close_group, "r1", 999)
        self.assertRefused(NotFound, self.client.trajectory, "r1", 999)
        # State conflicts.
        self.assertRefused(Conflict, self.client.close_group, "r1", self.r.group.id)
        self.assertRefused(Conflict, self.client.append_turns, "r1", self.a, 3, [Turn("a", "o")])
        self.assertRefused(Conflict, self.client.route, "r1", self.r.group.id, {self.a: 0.5, self.b: 0.5, self.c: 0.5}, interval=4)
        self.assertRefused(BadRequest, self.client.finish, "r1", self.a, 1.0, status="expanded")
        self.assertRefused(BadRequest, self.client.create_run, "bad id")
        self.assertRefused(BadRequest, self.client.create_run, "r2", tree={"k": 0})
        self.assertRefused(Conflict, self.client.create_run, "r1")

    def test_idempotent_retry(self):
        t = [Turn("a", "o", reward=0.5)]
        first = self.client.append_turns("r1", self.a, 0, t, client_key="k-1")
        seq = self.last_seq()
        second = self.client.append_turns("r1", self.a, 0, t, client_key="k-1")
        self.assertEqual(first, second)
        self.assertEqual(self.last_seq(), seq)
        # The same key for a different request is a conflict.
        self.assertRefused(Conflict, self.client.append_turns, "r1", self.a, 1, t, client_key="k-1")


class TokenTest(unittest.TestCase):
    def test_token_required_off_loopback(self):
        d = tempfile.mkdtemp(prefix="patrdb-py-")
        try:
            db = os.path.join(d, "patr.db")
            bad = subprocess.run([BIN, "--db", db, "serve", "--addr", f"0.0.0.0:{free_port()}"], capture_output=True, text=True, timeout=30)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("--token-file", bad.stderr)
            self.assertEqual(bad.stderr.count("\n"), 1)
            tok = os.path.join(d, "token")
            with open(tok, "w") as f:
                f.write("python-test-token-0123456789\n")
            os.chmod(tok, 0o600)
            port = free_port()
            s = Server(db, port=port, extra=["--token-file", tok])
            s.proc = subprocess.Popen([BIN, "--db", db, "serve", "--addr", f"0.0.0.0:{port}", "--token-file", tok],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertTrue(s.proc.stdout.readline().startswith("serving "))
            with self.assertRaises(Unauthorized):
                Client(s.url, retries=0).runs()
            self.assertEqual(Client(s.url, token="python-test-token-0123456789").runs(), [])
            self.assertEqual(s.stop(), 0)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
