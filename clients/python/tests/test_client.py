"""Tests of the Python client against a real ``patrdb serve``.

The suite builds the CLI with ``go build -o`` (or uses $PATRDB_BIN), starts
``patrdb serve`` on a free loopback port per test, and grows whole steps
through it with the example's toy agent. Run from clients/python: ``python3 -m unittest -v``.
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
if os.environ.get("PATRDB_CLIENT_INSTALLED") != "1":  # else test the installed package
    sys.path.insert(0, os.path.dirname(HERE))

sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

from patrdb_client import (BadRequest, Client, Conflict, NotFound, RewardSubmission, RolloutWorker,  # noqa: E402
                           ScoreSubmission, StepDriver, Submission, Task, Turn, Unauthorized)
import toy_worker  # noqa: E402

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


def grpo(rewards, eps=1e-6):
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
    if std <= 1e-12 * max(1.0, max(abs(r) for r in rewards)):
        return [0.0] * len(rewards), mean, 0.0
    return [(r - mean) / (std + eps) for r in rewards], mean, std


def toy(client, run, name, **kw):
    return RolloutWorker(client, run, toy_worker.toy_act, toy_worker.ToyEnv(), toy_worker.toy_score, name=name,
                         max_branches=kw.pop("max_branches", 3), poll=0.01, **kw)


def grow(client, run, step, workers=2, tasks=2, task_list=None, **kw):
    """Opens step with the toy tasks (or task_list), grows it with worker threads
    (made with toy's keyword arguments kw), closes it."""
    import threading
    d = StepDriver(client, run, poll=0.02)
    d.open(step, task_list if task_list is not None else toy_worker.toy_tasks(tasks))
    ws = [toy(client, run, f"w{i}", **kw) for i in range(workers)]
    errors = []

    def work(w):
        try:
            w.run(step, deadline=time.monotonic() + 60)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(w,)) for w in ws]
    for t in ts:
        t.start()
    advs = d.wait(step, timeout=60)
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return advs, ws


class ServedTest(unittest.TestCase):
    tree = {"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.1, "repeat_prune": 0, "max_turns": 8}

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


class WholeStepTest(ServedTest):
    def test_a_step_grown_by_python_workers(self):
        advs, ws = grow(self.client, "r1", 1, workers=2, tasks=2)
        self.assertEqual(len(advs), 2)
        self.assertEqual(sum(w.stats.turns for w in ws), self.client.run("r1").turns)
        self.assertGreater(sum(w.stats.policy_calls for w in ws), 0)
        self.assertGreater(max(w.stats.max_batch for w in ws), 1)
        for gid, group_advs in advs.items():
            tree = self.client.tree("r1", gid)
            self.assertEqual(tree.group.status, "closed")
            leaves = sorted((n for n in tree.nodes if n.status in ("completed", "truncated", "pruned")), key=lambda n: n.id)
            self.assertEqual([a.leaf for a in group_advs], [n.id for n in leaves])
            # The advantages are GRPO's over the leaves' outcome rewards.
            want, mean, std = grpo([n.reward for n in leaves])
            for a, w in zip(group_advs, want):
                self.assertAlmostEqual(a.advantage, w, places=9)
                self.assertAlmostEqual(a.mean, mean, places=12)
        nodes = [n for g in advs for n in self.client.tree("r1", g).nodes]
        self.assertIn("expanded", {n.status for n in nodes})
        # A child's trajectory starts with its parent's turns, stored once.
        child = next(n for n in nodes if n.parent and n.turns)
        traj = self.client.trajectory("r1", child.id)
        self.assertEqual(traj.inherited, child.base)
        self.assertEqual(traj.turns[0].node, traj.segments[0].node)
        self.assertEqual(len(traj.turns), child.base + child.turns)
        self.assertEqual(traj.turns[0].action_tokens[0], 0)
        self.assertAlmostEqual(traj.turns[0].action_logprobs[1], -0.25)
        self.assertGreater(self.client.stats("r1").runs[0].prefix_sharing, 1.0)
        # Every read endpoint answers with typed records.
        self.assertEqual(self.client.health().status, "ok")
        self.assertEqual([s.run.id for s in self.client.runs()], ["r1"])
        self.assertEqual(self.client.run("r1").run.config["tree"]["b0"], 3)
        summary = self.client.run("r1")
        self.assertEqual((summary.steps, summary.bytes, summary.walked), ([], 0, False))
        summary = self.client.run("r1", steps=True, buckets=True)
        self.assertEqual(summary.steps[0].step, 1)
        self.assertEqual(summary.steps[0].groups, summary.groups)
        self.assertEqual(summary.bytes, sum(b.bytes for b in summary.buckets))
        self.assertGreater(summary.bytes, 0)
        self.assertEqual(self.client.steps("r1")[0].closed_groups, 2)
        self.assertEqual(self.client.groups("r1", 1)[0].task, "task-0")
        self.assertEqual(self.client.frontier("r1"), [])
        self.assertEqual(self.client.rubrics("r1"), [])
        self.assertEqual(self.client.node("r1", child.id).node.parent, child.parent)
        events = list(self.client.iter_events("r1", page=7))
        self.assertEqual([e.seq for e in events], list(range(1, len(events) + 1)))
        st = self.client.step_status("r1", 1)
        self.assertEqual((st.groups, st.open, st.closed, st.active, st.leased), (2, 0, 2, 0, 0))
        ck = self.client.put_checkpoint("r1", 1, inline=b"\x00policy", meta={"lr": "0.1"})
        self.assertEqual(ck.run.last_step, 1)
        self.assertEqual(self.client.checkpoint("r1").inline, b"\x00policy")

    def test_protocol_by_hand(self):
        g = self.client.open_step("r1", 1, [Task("t", "go")], client_key="open").groups[0]
        leases = self.client.lease("r1", "me", step=1)
        self.assertEqual(sorted(l.node for l in leases), sorted(g.roots))
        self.assertTrue(all(l.turns == 2 and l.score and l.from_ == 0 and l.history == [] for l in leases))
        # Every free branch is leased: a second worker gets nothing.
        self.assertEqual(self.client.lease("r1", "other", step=1), [])
        self.assertEqual(self.client.step_status("r1", 1).leased, 3)
        subs = [Submission(l.id, l.node, worker=l.worker, turns=[Turn(f"m{i}", "o"), Turn("n", "o", reward=0.5)], score=s)
                for i, (l, s) in enumerate(zip(leases, [0.9, 0.5, 0.2]))]
        out = self.client.submit("r1", subs, client_key="i0")
        self.assertEqual(len(out.routed), 1)
        self.assertEqual([d.action for d in out.routed[0].decisions], ["expand", "prune", "prune"])
        kids = out.routed[0].decisions[0].child_ids
        self.assertEqual(out.routed[0].active, kids)
        leases = self.client.lease("r1", "me", step=1)
        self.assertEqual([l.node for l in leases], kids)
        self.assertEqual([t.action for t in leases[0].history], ["m0", "n"])
        out = self.client.submit("r1", [Submission(l.id, l.node, worker=l.worker, turns=[Turn("end", "o", done=True)], reward=1.0)
                                        for l in leases], client_key="i1")
        self.assertEqual(out.done, [g.id])
        advs = StepDriver(self.client, "r1").wait(1)[g.id]
        self.assertEqual([a.outcome for a in advs], [0.5, 0.5, 1.0, 1.0])

    def test_a_failing_branch_is_retried_then_recorded(self):
        d = StepDriver(self.client, "r1", poll=0.02)
        g = self.client.open_step("r1", 1, toy_worker.toy_tasks(1), client_key="open").groups[0]
        bad = self.client.lease("r1", "probe", max=1, step=1, ttl_ms=1)[0]
        time.sleep(0.01)

        def act(reqs):
            moves = toy_worker.toy_act(reqs)
            return [RuntimeError("CUDA out of memory") if r.key.branch == bad.key.branch else m
                    for r, m in zip(reqs, moves)]

        w = RolloutWorker(self.client, "r1", act, toy_worker.ToyEnv(), toy_worker.toy_score, name="w", poll=0.01)
        w.run(1, deadline=time.monotonic() + 60)
        advs = d.wait(1, timeout=30)[g.id]
        node = self.client.node("r1", bad.node).node
        self.assertEqual(node.status, "failed")
        self.assertEqual(node.attempt, 2)  # three attempts
        self.assertIn("CUDA out of memory", node.error)
        self.assertNotIn(bad.node, [a.leaf for a in advs])
        self.assertTrue(advs)

    def test_shaped_close(self):
        import threading
        d = StepDriver(self.client, "r1", poll=0.02)
        d.open(1, toy_worker.toy_tasks(1))
        w = toy(self.client, "r1", "w")
        w.run(1)
        centred = {}

        def shape(g):
            leaves = sorted(n.id for n in self.client.tree("r1", g).nodes if n.status in ("completed", "truncated", "pruned"))
            centred.update({leaf: (0.5 if i % 2 else -0.5) for i, leaf in enumerate(leaves)})
            return {"rubric_scores": {leaf: centred[leaf] for leaf in leaves}, "lambda_": 0.2}

        advs = next(iter(d.wait(1, shape=shape).values()))
        rewards = {n.id: n.reward for n in self.client.tree("r1", advs[0].group).nodes}
        totals = [rewards[a.leaf] + 0.2 * centred[a.leaf] for a in advs]
        want, _, _ = grpo(totals)
        for a, wv, t in zip(advs, want, totals):
            self.assertAlmostEqual(a.total, t, places=12)
            self.assertAlmostEqual(a.advantage, wv, places=9)
            self.assertEqual(a.lambda_, 0.2)


class ReadmeTest(ServedTest):
    def test_the_readme_loop_runs(self):
        """The verl-style loop of README.md, run as written with stand-ins for
        the inference server, the environments and the process reward model."""
        with open(os.path.join(HERE, "..", "README.md")) as f:
            readme = f.read()
        blocks = readme.split("```python\n")
        code = next(b.split("```")[0] for b in blocks if "def rollout_step" in b)

        class Policy:
            updates = []

            def generate(self, prompts):
                # One batched call: (prompt, history) pairs in, outputs with token ids and logprobs out.
                out = []
                for prompt, history in prompts:
                    move = "right" if (len(history) + len(prompt)) % 3 else "down"
                    out.append(type("Out", (), {"text": move, "token_ids": [len(history), 1], "logprobs": [-0.1, -0.2]}))
                return out

            def update(self, batch):
                self.updates.append(batch)

            def digest(self):
                return "sha256:0"

        class Sandbox:
            def __init__(self, rights=0):
                self.rights = rights

            def step(self, action):
                self.rights += action == "right"
                return f"cell {self.rights}", [self.rights], (1.0 if self.rights >= 4 else 0.0), self.rights >= 4

        class Envs:
            def new(self, task):
                return Sandbox()

            def rebuild(self, task, history):
                return Sandbox(sum(t.action == "right" for t in history))

        class Prm:
            def score(self, prompt, history):
                return min(1.0, sum(t.action == "right" for t in history) / 4)

        self.client.create_run("swe-1", tree={"b0": 3, "k": 2, "m": 2, "top_expand": 1, "delta": 0.3, "max_turns": 8},
                               client_key="create-swe-1")
        policy = Policy()
        ns = {"c": self.client, "policy": policy, "envs": Envs(), "prm": Prm(), "last_step": 0, "total_steps": 2,
              "sample_tasks": lambda step: [Task(f"task-{i}", f"walk right {i}") for i in range(2)]}
        exec(code, ns)
        self.assertEqual(len(policy.updates), 2)
        self.assertEqual(self.client.run("swe-1").run.last_step, 2)
        for st in self.client.steps("swe-1"):
            self.assertEqual(st.closed_groups, 2)
            self.assertGreater(st.leaves, 4)
        turns, adv = policy.updates[0][0]
        self.assertTrue(turns and isinstance(adv, float))
        self.assertEqual(self.client.frontier("swe-1"), [])


class ReadmeAsyncTest(ServedTest):
    """The README's Verifier and dynamic-sampling examples, run as written with
    the toy agent standing in for the policy, sandboxes and reward models."""

    def block(self, marker):
        with open(os.path.join(HERE, "..", "README.md")) as f:
            blocks = f.read().split("```python\n")
        return next(code for code in (b.split("```")[0] for b in blocks[1:]) if marker in code)

    def namespace(self):
        sandbox = type("Sandbox", (), {"run_suite": staticmethod(lambda gold, action: action == "a0")})
        prm_client = type("Prm", (), {"score": staticmethod(lambda prompt, history: toy_worker.toy_score(None, history))})
        return {"c": self.client, "act": toy_worker.toy_act, "Env": toy_worker.ToyEnv, "score": toy_worker.toy_score,
                "step": 1, "tasks": toy_worker.toy_tasks(2), "sandbox": sandbox, "prm_client": prm_client}

    def test_the_verifier_example_runs(self):
        ns = self.namespace()
        exec(self.block("Verifier(c"), ns)
        self.assertEqual(sorted(ns["advantages"]), [g.id for g in self.client.groups("swe-2", 1)])
        self.assertGreater(ns["v"].stats.rewards, 0)
        self.assertGreater(ns["v"].stats.scores, 0)
        self.assertEqual(self.client.step_status("swe-2", 1).open, 0)
        # Finished leaves have the verifier's rewards, not the env's 0.25s;
        # pruned ones keep their turns' sum.
        ended = {n.id for g in ns["advantages"] for n in self.client.tree("swe-2", g).nodes
                 if n.status in ("completed", "truncated")}
        self.assertTrue(ended)
        self.assertLessEqual({a.outcome for g in ns["advantages"].values() for a in g if a.leaf in ended}, {0.0, 1.0})

    def test_the_dynamic_sampling_example_runs(self):
        self.client.create_run("swe-1", tree=self.tree, client_key="create-swe-1")
        ns = self.namespace()
        supply = toy_worker.toy_tasks(6)[2:]
        ns["sample_tasks"] = lambda k: [supply.pop(0) for _ in range(min(k, len(supply)))]
        exec(self.block("informative="), ns)
        res = ns["res"]
        self.assertEqual(len(res.informative) + len(res.filtered), len(self.client.groups("swe-1", 1)))
        self.assertGreaterEqual(len(res.informative), min(2, len(res.tasks) - len(res.filtered)))
        self.assertEqual(sorted(set(int(x) for x in ns["b"]["row_group"])), res.informative)


class ExampleTest(ServedTest):
    def test_the_example_worker_runs(self):
        script = os.path.join(os.path.dirname(HERE), "examples", "toy_worker.py")
        out = subprocess.run([sys.executable, script, "--url", self.server.url, "--demo", "--run", "toy", "--steps", "2",
                              "--tasks", "2"], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("step 2: 2 groups", out.stdout)
        self.assertEqual(self.client.run("toy").run.last_step, 2)
        # One more worker process on a finished step has nothing to do.
        one = subprocess.run([sys.executable, script, "--url", self.server.url, "--run", "toy", "--step", "2"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(one.returncode, 0, one.stderr)
        self.assertEqual(json.loads(one.stdout)["leases"], 0)


class ExampleAsyncTest(ServedTest):
    def test_the_example_defers_rewards_to_a_verifier_process(self):
        script = os.path.join(os.path.dirname(HERE), "examples", "toy_worker.py")
        d = StepDriver(self.client, "r1", poll=0.02)
        d.open(1, toy_worker.toy_tasks(2))
        base = [sys.executable, script, "--url", self.server.url, "--run", "r1", "--step", "1"]
        procs = [subprocess.Popen(base + ["--name", "slow", "--slow-tool", "0.2", "--defer-rewards", "--ttl-ms", "300",
                                          "--each-turn"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                 subprocess.Popen(base + ["--verifier-only"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        worker, verifier = (json.loads(out) for out, _ in outs)
        self.assertGreater(worker["turns"], 0)
        self.assertEqual(worker["lost"], 0)
        self.assertGreater(verifier["verifier"]["rewards"], 0)
        self.assertEqual(verifier["verifier"]["errors"], 0)
        advs = d.wait(1, timeout=30)
        self.assertEqual(len(advs), 2)
        nodes = [n for g in advs for n in self.client.tree("r1", g).nodes]
        self.assertNotIn("failed", {n.status for n in nodes})
        self.assertEqual(sum(n.status in ("completed", "truncated") for n in nodes), verifier["verifier"]["rewards"])


class LeaseTest(ServedTest):
    def test_a_lease_is_refused_to_another_worker(self):
        self.client.open_step("r1", 1, [Task("t")], client_key="open")
        leases = self.client.lease("r1", "a", step=1, ttl_ms=5000)
        ids = [l.id for l in leases]
        self.assertEqual(len(set(ids)), 3)
        self.assertTrue(all(len(i) == 32 and int(i, 16) >= 0 for i in ids))  # 128 random bits
        self.assertTrue(all(l.worker == "a" and l.ttl_ms == 5000 for l in leases))
        l = leases[0]
        seq = self.last_seq()
        for worker in ("b", ""):
            with self.assertRaises(Conflict) as cm:
                self.client.submit("r1", [Submission(l.id, l.node, worker=worker, turns=[Turn("x", "o")])])
            self.assertEqual(cm.exception.code, "not_holder")
        self.assertEqual(self.last_seq(), seq)
        # Another worker can neither renew nor release it, nor lease the branch.
        [st] = self.client.renew_leases("r1", "b", [l.id])
        self.assertFalse(st.held)
        self.assertIn('granted to worker "a"', st.reason)
        self.assertFalse(self.client.release_leases("r1", "b", [l.id])[0].held)
        self.assertEqual(self.client.lease("r1", "b", step=1), [])
        [st] = self.client.renew_leases("r1", "a", [l.id])
        self.assertTrue(st.held)
        self.assertGreaterEqual(st.expires_at, l.expires_at)
        self.assertEqual(self.client.renew_leases("r1", "a", ["0" * 32])[0].held, False)
        with self.assertRaises(BadRequest):
            self.client.renew_leases("r1", "", [l.id])
        # Released, the branches go to the next worker at once.
        self.assertEqual([s.reason for s in self.client.release_leases("r1", "a", ids)], ["released"] * 3)
        self.assertEqual(sorted(x.node for x in self.client.lease("r1", "b", step=1)), sorted(x.node for x in leases))
        self.assertEqual(self.last_seq(), seq)  # none of it writes

    def test_publish_and_pending(self):
        run = self.client.publish("r1", 2, client_key="pub-2")
        self.assertEqual(run.policy_version, 2)
        self.assertEqual(self.client.run("r1").run.policy_version, 2)
        seq = self.last_seq()
        with self.assertRaises(BadRequest):  # versions only go forward
            self.client.publish("r1", 1)
        self.assertEqual(self.last_seq(), seq)
        # The current version again (a trainer resumed from the checkpoint
        # before its publish) succeeds and publishes nothing (only the
        # reply kept for its client key is written).
        self.assertEqual(self.client.publish("r1", 2).policy_version, 2)
        self.assertNotIn("run.version", [e.kind for e in self.client.events("r1", seq + 1).events])
        seq = self.last_seq()
        g = self.client.open_step("r1", 1, [Task("t")], client_key="open").groups[0]
        self.assertEqual(self.client.step_status("r1", 1).policy_version, 2)
        leases = self.client.lease("r1", "w", step=1, policy_version=2)
        self.assertTrue(all((x.policy_version, x.run_version) == (2, 2) for x in leases))
        self.client.submit("r1", [Submission(x.id, x.node, worker="w", turns=[Turn("a", "o", done=True, policy_version=2)],
                                             reward_pending=True) for x in leases])
        st = self.client.step_status("r1", 1)
        self.assertEqual((st.active, st.awaiting_rewards, st.done), (0, 3, []))
        p = self.client.pending("r1", 1, history=False)
        self.assertEqual([w.node for w in p.rewards], g.roots)
        self.assertTrue(all(w.history == [] and w.path_len == 1 and w.task.id == "t" for w in p.rewards))
        self.assertEqual([t.action for t in self.client.pending("r1", 1).rewards[0].history], ["a"])
        with self.assertRaises(ValueError):  # never sent
            self.client.submit_rewards("r1", [RewardSubmission(g.roots[0], float("nan"))])
        with self.assertRaises(Conflict) as cm:  # not awaiting a score
            self.client.submit_scores("r1", [ScoreSubmission(g.roots[0], 0, 0.5)])
        self.assertEqual(cm.exception.code, "not_pending")
        out = self.client.submit_rewards("r1", [RewardSubmission(g.roots[0], 1.0), {"node": g.roots[1], "reward": 0.0},
                                                RewardSubmission(g.roots[2], error="sandbox died")])
        self.assertEqual(out.done, [g.id])
        with self.assertRaises(Conflict) as cm:  # delivered already
            self.client.submit_rewards("r1", [RewardSubmission(g.roots[0], 1.0)])
        self.assertEqual(cm.exception.code, "not_pending")
        advs = self.client.close_group("r1", g.id).advantages
        self.assertEqual([(a.leaf, a.outcome) for a in advs], [(g.roots[0], 1.0), (g.roots[1], 0.0)])
        self.assertEqual(self.client.node("r1", g.roots[2]).node.status, "failed")


class RubricTest(ServedTest):
    def test_rubric_buffer_lifecycle(self):
        self.client.create_run("arbor", tree={"b0": 4, "k": 1}, rubric={"consolidate_at": 2, "active": 1, "lambda": 0.5},
                               client_key="create-arbor")

        def group(step, rewards):
            self.assertEqual(self.client.activate("arbor", step).step, step)
            g = self.client.open_step("arbor", step, [Task("qa")]).groups[0]
            leases = sorted(self.client.lease("arbor", "w", step=step), key=lambda l: l.node)
            self.client.submit("arbor", [Submission(l.id, l.node, worker=l.worker, turns=[Turn(f"answer {l.node}", "ok", done=True)], reward=rw)
                                         for l, rw in zip(leases, rewards)])
            return g, {l.node: rw for l, rw in zip(leases, rewards)}

        g1, rew = group(1, [0, 1, 0, 1])
        by_reward = lambda n: "a" if rew[n.a] > rew[n.b] else ("b" if rew[n.a] < rew[n.b] else "tie")
        drafts = [{"text": "the answer names the capital city"}, {"text": "the answer cites the second source document"}]
        answers = self.client.shape_answers(
            "arbor", g1.id, judge=by_reward, induce=lambda need: drafts,
            consolidate=lambda need: [{"text": "the answer is grounded in the documents",
                                       "absorbs": [d.id for d in need.drafts]}])
        self.client.close_group("arbor", g1.id, pool=answers)
        public = self.client.rubrics("arbor", "public")
        self.assertEqual(len(public), 1)
        self.assertEqual(len(public[0].parents), 2)

        g2, _ = group(2, [0, 0, 0, 0])
        self.assertEqual([x.id for x in self.client.active_rubrics("arbor", 2).active], [public[0].id])
        answers = self.client.shape_answers("arbor", g2.id, judge=lambda n: "a" if n.a < n.b else "b")
        advs = self.client.close_group("arbor", g2.id, pool=answers).advantages
        self.assertTrue(all(a.zero_variance and not a.zero_variance_after for a in advs))
        self.assertGreater(advs[0].advantage, 0)
        self.assertLess(advs[-1].advantage, 0)
        self.assertEqual(self.client.steps("arbor")[1].unlocked_groups, 1)


class RestartTest(ServedTest):
    def test_server_restart_mid_step(self):
        d = StepDriver(self.client, "r1", poll=0.02)
        groups = d.open(1, toy_worker.toy_tasks(2))
        # A worker holds leases and has submitted half an interval when the
        # server dies without warning.
        leases = self.client.lease("r1", "old", step=1)
        first = self.client.submit("r1", [Submission(leases[0].id, leases[0].node, worker=leases[0].worker, turns=[Turn("x", "o")])], client_key="half")
        self.assertEqual(self.server.stop(signal.SIGKILL), -signal.SIGKILL)
        self.assertTrue(os.path.exists(self.db + ".serve"), "kill -9 leaves the address file")
        self.server.start()  # same port, same file

        # The old worker's answer is replayed, unwritten; its leases are gone.
        seq = self.last_seq()
        self.assertEqual(self.client.submit("r1", [Submission(leases[0].id, leases[0].node, worker=leases[0].worker, turns=[Turn("x", "o")])],
                                            client_key="half"), first)
        with self.assertRaises(Conflict) as cm:
            self.client.submit("r1", [Submission(leases[1].id, leases[1].node, worker=leases[1].worker, turns=[Turn("y", "o")])])
        self.assertEqual(cm.exception.code, "lease_lost")
        # A restarted driver gets its groups back.
        self.assertEqual(StepDriver(self.client, "r1").open(1, toy_worker.toy_tasks(2)), groups)
        self.assertEqual(self.last_seq(), seq)
        # A new worker continues from the committed turn, not from scratch.
        again = {l.node: l for l in self.client.lease("r1", "new", step=1, ttl_ms=1)}
        self.assertEqual(again[leases[0].node].from_, 1)
        self.assertEqual([t.action for t in again[leases[0].node].history], ["x"])
        time.sleep(0.01)
        toy(self.client, "r1", "new").run(1)
        advs = d.wait(1, timeout=30)
        self.assertEqual(sorted(advs), groups)
        self.assertEqual(self.client.frontier("r1"), [])

    def test_client_retries_across_a_restart(self):
        # The server goes away between two writes and comes back on the same
        # port; the client's retries carry the write over the gap, once.
        import threading
        self.server.stop()
        threading.Timer(0.4, self.server.start).start()
        res = self.client.open_step("r1", 1, [Task("t")])
        time.sleep(0.1)
        self.assertEqual([g.id for g in self.client.groups("r1", 1)], [res.groups[0].id])


class BadInputTest(ServedTest):
    def setUp(self):
        super().setUp()
        self.g = self.client.open_step("r1", 1, [Task("t")], client_key="open").groups[0]
        self.leases = {l.node: l for l in self.client.lease("r1", "w", step=1)}
        self.a, self.b, self.c = self.g.roots

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

    def sub(self, node, **kw):
        return Submission(self.leases[node].id, node, worker=self.leases[node].worker, **kw)

    def test_bad_inputs_are_4xx_and_write_nothing(self):
        l = self.leases[self.a]
        s = '{"client_key":"x","submissions":[{"lease":"%s","worker":"%s","node":%d,"from":0%%s}]}' % (l.id, l.worker, self.a)
        two = ',"turns":[{"action":"a","observation":"o"},{"action":"b","observation":"o"}]'
        cases = [
            (BadRequest, "/api/v1/runs/r1/submit", s % (two + ',"score":NaN')),
            (BadRequest, "/api/v1/runs/r1/submit", s % (two + ',"score":1.5')),
            (BadRequest, "/api/v1/runs/r1/submit", s % (two + ',"score":"high"')),
            (BadRequest, "/api/v1/runs/r1/submit", s % ',"turns":[{"action":"a","observation":"o","reward":Infinity}]'),
            (BadRequest, "/api/v1/runs/r1/submit", s % ',"turns":[{"action":"a","action_tokens":[1],"action_logprobs":[0.5]}]'),
            (BadRequest, "/api/v1/runs/r1/submit", s % ',"extra":1'),
            (BadRequest, "/api/v1/runs/r1/submit", '{"submissions":[]}'),
            (BadRequest, "/api/v1/runs/r1/steps", '{"client_key":"x","step":2,"tasks":[{"id":"t"}]'),
            (BadRequest, "/api/v1/runs/r1/leases", '{"worker":"w","max":-1}'),
            (NotFound, "/api/v1/runs/nope/steps", '{"client_key":"x","step":1,"tasks":[{"id":"t"}]}'),
            (NotFound, "/api/v1/runs/r1/submit", '{"client_key":"x","submissions":[{"lease":"l","node":999,"from":0}]}'),
        ]
        for exc, path, body in cases:
            with self.subTest(body=body):
                self.assertRefused(exc, self.raw, path, body)
        self.assertRefused(BadRequest, self.raw, f"/api/v1/runs/r1/groups/{self.g.id}/close", '{"client_key":"x"}',
                           content_type="text/plain")

    def test_protocol_refusals(self):
        # Each rule has its code; nothing is written.
        e = self.assertRefused(Conflict, self.client.submit, "r1", [self.sub(self.a, turns=[Turn("a", "o")], score=0.5)])
        self.assertEqual(e.code, "too_early")
        e = self.assertRefused(Conflict, self.client.submit, "r1", [self.sub(self.a, from_=1, turns=[Turn("a", "o")])])
        self.assertEqual(e.code, "lease_lost")
        e = self.assertRefused(Conflict, self.client.submit, "r1", [Submission(self.leases[self.b].id, self.a, worker=self.leases[self.b].worker, turns=[Turn("a", "o")])])
        self.assertEqual(e.code, "lease_lost")
        e = self.assertRefused(Conflict, self.client.open_step, "r1", 1, [Task("other")])
        self.assertEqual(e.code, "step_exists")
        e = self.assertRefused(Conflict, self.client.open_step, "r1", 2, [Task("t")], tree={"k": 5})
        self.assertEqual(e.code, "config_mismatch")
        self.client.submit("r1", [self.sub(self.a, turns=[Turn("a", "o", done=True)], reward=1.0)])
        e = self.assertRefused(Conflict, self.client.submit, "r1", [self.sub(self.a, from_=1, turns=[Turn("b", "o")])])
        self.assertEqual(e.code, "branch_ended")
        self.assertRefused(Conflict, self.client.close_group, "r1", self.g.id)  # active branches left
        # NaN never leaves the client (JSON has no NaN).
        seq = self.last_seq()
        with self.assertRaises(ValueError):
            self.client.submit("r1", [self.sub(self.b, turns=[Turn("a", "o"), Turn("b", "o")], score=float("nan"))])
        with self.assertRaises(ValueError):
            self.client.submit("r1", [self.sub(self.b, turns=[Turn("a", "o", reward=float("inf"))])])
        self.assertEqual(self.last_seq(), seq)
        # Unknown ids, bad runs.
        self.assertRefused(NotFound, self.client.close_group, "r1", 999)
        self.assertRefused(NotFound, self.client.trajectory, "r1", 999)
        self.assertRefused(BadRequest, self.client.abandon_step, "r1", 1, "")
        self.assertRefused(BadRequest, self.client.create_run, "bad id")
        self.assertRefused(BadRequest, self.client.create_run, "r2", tree={"k": 0})
        self.assertRefused(Conflict, self.client.create_run, "r1")

    def test_abandon(self):
        res = self.client.abandon_step("r1", 1, "the policy diverged", client_key="ab")
        self.assertEqual([g.status for g in res.groups], ["closed"])
        nodes = self.client.tree("r1", self.g.id).nodes
        self.assertTrue(all(n.status == "failed" and "diverged" in n.error for n in nodes))
        self.assertEqual(self.client.step_status("r1", 1).open, 0)

    def test_idempotent_retry(self):
        subs = [self.sub(self.a, turns=[Turn("a", "o", reward=0.5)])]
        first = self.client.submit("r1", subs, client_key="k-1")
        seq = self.last_seq()
        second = self.client.submit("r1", subs, client_key="k-1")
        self.assertEqual(first, second)
        self.assertEqual(self.last_seq(), seq)
        # The same key for a different request is a conflict.
        self.assertRefused(Conflict, self.client.submit, "r1", [self.sub(self.a, from_=1, turns=[Turn("b", "o")])],
                           client_key="k-1")


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


class FrameTest(ServedTest):
    """Against a server of API 1.7 on, submits go and leases come as frames
    (frame.py); a client that takes the server for an older one speaks JSON.
    Both store and read the same turns."""

    def test_frames_and_json_carry_the_same_turns(self):
        old = Client(self.server.url, retries=5, backoff=0.1)
        old._api_version = "1.6"  # JSON, packed
        self.assertGreaterEqual(tuple(int(x) for x in self.client.check_version().split(".")), (1, 7))
        self.client.open_step("r1", 1, [Task("t")], client_key="open")
        ls = self.client.lease("r1", "w", step=1)
        self.assertEqual(len(ls), 3)
        turns = [Turn("a ✓ \"q\"\n", "o\u00e9", action_tokens=[0, 1, 2 ** 31 - 1], action_logprobs=[0.0, -0.5, -1.25],
                      observation_tokens=[7, 65536], reward=0.25, policy_version=3),
                 Turn("b", "", done=False)]
        sent = [self.client, old, self.client]
        for l, c in zip(ls, sent):
            c.submit("r1", [Submission(l.id, l.node, worker="w", turns=turns, score=0.5)])
        for l in ls:
            got = [t.turn() for t in self.client.trajectory("r1", l.node).turns]
            self.assertEqual(got, turns)
        # A mapping turn with packed arrays goes in a frame too.
        g = self.client.open_step("r1", 2, [Task("t")], client_key="open-2").groups[0]
        [l2, *_] = self.client.lease("r1", "w", step=2)
        self.client.submit("r1", [{"lease": l2.id, "node": l2.node, "worker": "w",
                                   "turns": [{"action": "x", "observation": "y", "action_tokens": "AQAAAA=="}]}])
        self.assertEqual(self.client.trajectory("r1", l2.node).turns[0].action_tokens, [1])
        self.assertTrue(g.roots)
        # The group of step 1 routed: both encodings lease the same paths.
        framed = self.client.lease("r1", "w", step=1)
        self.assertTrue(framed)
        self.assertTrue(all(x.history == turns for x in framed))
        self.client.release_leases("r1", "w", [x.id for x in framed])
        plain = old.lease("r1", "w", step=1)
        self.assertEqual([(x.node, x.history) for x in plain], [(x.node, x.history) for x in framed])

    def test_a_lease_frame_that_does_not_parse(self):
        from patrdb_client.frame import read_lease_frame
        head = json.dumps({"leases": [{"id": "l", "history": [{"reward": 0, "done": False}]}]}).encode()

        head += b" " * (-len(head) % 4)

        def frame(*members):
            return len(head).to_bytes(4, "little") + head + b"".join(
                len(b).to_bytes(4, "little") + b + bytes(-len(b) % 4) for b in members)

        good = frame(b"a", b"\x01\x00\x00\x00", b"", "é".encode(), b"")
        self.assertEqual(read_lease_frame(good)["leases"][0]["history"][0], {
            "reward": 0, "done": False, "action": "a", "action_tokens": [1], "action_logprobs": [],
            "observation": "é", "observation_tokens": []})
        unaligned = (len(head) + 1).to_bytes(4, "little") + head + b" " + good[4 + len(head):]
        for bad in (good[:3], good[:-1], good + b"\x00", frame(b"a", b"\x01\x00\x00", b"", b"", b""),
                    frame(b"\xff", b"", b"", b"", b""), unaligned):
            with self.assertRaises(ValueError):
                read_lease_frame(bad)


class PackedTokensTest(unittest.TestCase):
    """Token arrays travel packed (base64 of little-endian words) against a
    server of API 1.5 on, and read back as the same numbers."""

    def test_packed_words_round_trip(self):
        from patrdb_client.types import pack_words, unpack_words
        ids = [0, 1, 2 ** 31 - 1, 65536]
        self.assertEqual(pack_words(ids, "I"), "AAAAAAEAAAD///9/AAABAA==")
        self.assertEqual(unpack_words(pack_words(ids, "I"), "I"), ids)
        lp = [0.0, -0.5, -1.25]
        self.assertEqual(unpack_words(pack_words(lp, "f"), "f"), lp)
        t = Turn("a", "o", action_tokens=ids, action_logprobs=lp + [-2.0], observation_tokens=[7])
        j = t.to_json(packed=True)
        self.assertIsInstance(j["action_tokens"], str)
        self.assertEqual(t.to_json(), {**j, "action_tokens": ids, "action_logprobs": lp + [-2.0], "observation_tokens": [7]})
