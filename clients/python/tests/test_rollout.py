"""The RolloutWorker against a real ``patrdb serve``: heartbeats through tool
calls longer than the lease TTL, a killed worker's branches handed on within
about a TTL, leases released on exit, the policy version and max_staleness,
concurrent env steps and batched, split policy calls, and partial submits.
"""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unittest

from . import test_client
from .test_client import ServedTest

import patrdb_client  # noqa: E402  (test_client put the source on sys.path unless installed)
from patrdb_client import (Conflict, Move, Observation, RolloutWorker, StepDriver, Task,  # noqa: E402
                           heartbeat_every)
from patrdb_client import rollout as rollout_module  # noqa: E402
import toy_worker  # noqa: E402

PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(patrdb_client.__file__)))


def setUpModule():
    test_client.setUpModule()


def tearDownModule():
    test_client.tearDownModule()


def act(reqs):
    """A policy whose move depends on the turn alone."""
    return [Move(f"m{r.key.path}", [r.key.path], [-0.5]) for r in reqs]


class Episode:
    def __init__(self, env):
        self.env = env

    def step(self, key, move):
        self.env.before(key)
        return Observation(f"o{key.path}", reward=float(key.node % 2), done=False)

    def state(self):
        return None


class Env:
    """An env whose steps call ``before(key)`` (sleep, block, count) and
    record how many run at once."""

    def __init__(self, delay=0.0):
        self.delay = delay
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.steps = 0

    def before(self, key):
        with self.lock:
            self.running += 1
            self.steps += 1
            self.peak = max(self.peak, self.running)
        try:
            self.wait(key)
        finally:
            with self.lock:
                self.running -= 1

    def wait(self, key):
        if self.delay:
            time.sleep(self.delay)

    def reset(self, task):
        return Episode(self)

    def restore(self, task, history, state):
        return Episode(self)


def in_thread(fn, *args, **kw):
    """Runs fn on a thread; join() returns its result or raises its error."""
    out = {}

    def run():
        try:
            out["result"] = fn(*args, **kw)
        except BaseException as e:  # noqa: BLE001 - re-raised by join
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join(timeout=60):
        t.join(timeout)
        if t.is_alive():
            raise AssertionError(f"{fn} still runs after {timeout} s")
        if "error" in out:
            raise out["error"]
        return out.get("result")

    return join


class HeartbeatTest(ServedTest):
    # One branch, two turns, no scoring: the interval is the branch.
    flat = {"b0": 1, "k": 2, "max_turns": 2, "no_scoring": True}

    def long_tool(self, heartbeat):
        """A worker with a 300 ms lease whose first tool call lasts 900 ms,
        while a thief asks for the branch every 20 ms."""
        self.client.create_run("hb", tree=self.flat, client_key="create-hb")
        node = self.client.open_step("hb", 1, [Task("t")], client_key="open").groups[0].roots[0]
        env = Env()
        holding = threading.Event()

        def wait(key):
            if key.path == 0:
                holding.set()
                time.sleep(0.9)

        env.wait = wait
        # One branch at a time: with room for more, the holder asks for
        # branches every poll (10 ms, twice the thief's rate) and, without
        # heartbeats, may win its own expired branch back at every expiry
        # of the 2 s the control waits (about 1 run in 10 under load).
        w = RolloutWorker(self.client, "hb", act, env, name="holder", ttl_ms=300, poll=0.01, max_branches=1)
        stolen = []
        stop = threading.Event()

        def thief():
            holding.wait(10)
            while not stop.is_set():
                stolen.extend(self.client.lease("hb", "thief", step=1, ttl_ms=60000))
                time.sleep(0.02)

        saved = rollout_module.heartbeat_every
        if not heartbeat:
            rollout_module.heartbeat_every = lambda ttl_ms: 3600.0
        t = threading.Thread(target=thief, daemon=True)
        try:
            t.start()
            start = time.monotonic()
            if heartbeat:
                w.run(1, deadline=time.monotonic() + 5)
            else:
                with self.assertRaises(TimeoutError):  # the thief holds the branch now
                    w.run(1, deadline=time.monotonic() + 2)
            took = time.monotonic() - start
        finally:
            rollout_module.heartbeat_every = saved
            stop.set()
            t.join()
        return w, node, stolen, took

    def test_a_heartbeat_keeps_a_lease_through_a_tool_call_of_three_ttls(self):
        self.assertAlmostEqual(heartbeat_every(300), 0.12)
        w, node, stolen, took = self.long_tool(heartbeat=True)
        self.assertGreaterEqual(took, 0.9)
        self.assertEqual(stolen, [], "the branch was handed on while its tool ran")
        self.assertEqual(w.stats.lost, 0)
        self.assertGreaterEqual(w.stats.renewals, 5)  # 0.9 s / 0.12 s
        n = self.client.node("hb", node).node
        self.assertEqual((n.status, n.turns), ("truncated", 2))

    def test_without_heartbeats_the_same_tool_call_loses_its_lease(self):
        # The control: the TTL really is shorter than the tool call.
        w, node, stolen, _ = self.long_tool(heartbeat=False)
        self.assertEqual([l.node for l in stolen], [node])
        self.assertGreaterEqual(w.stats.lost, 1)
        self.assertEqual(w.stats.turns, 0)
        self.assertEqual(self.client.node("hb", node).node.turns, 0)


WORKER_SCRIPT = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, sys.argv[2])
    from patrdb_client import Client, Move, Observation, RolloutWorker

    class Episode:
        def step(self, key, move):
            time.sleep(60)  # a tool call the worker never finishes
        def state(self):
            return None

    class Env:
        def reset(self, task):
            os.write(1, b"leased\\n")  # one write: the branches' threads print at once
            return Episode()
        def restore(self, task, history, state):
            return Episode()

    act = lambda reqs: [Move("a") for _ in reqs]
    RolloutWorker(Client(sys.argv[1]), "kw", act, Env(), name="doomed", ttl_ms=1000, max_branches=3).run(1)
""")


class DeadWorkerTest(ServedTest):
    def test_a_killed_workers_branches_go_to_another_within_about_a_ttl(self):
        self.client.create_run("kw", tree={"b0": 3, "k": 2, "max_turns": 2, "no_scoring": True}, client_key="create-kw")
        roots = self.client.open_step("kw", 1, [Task("t")], client_key="open").groups[0].roots
        p = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, self.server.url, PKG_ROOT],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(3):
                self.assertEqual(p.stdout.readline(), "leased\n", p.stderr.read() if p.poll() is not None else "")
            self.assertEqual(self.client.step_status("kw", 1).leased, 3)
            time.sleep(0.5)  # a heartbeat or so, so the leases were renewed after their grant
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
            killed = time.monotonic()
            got = []
            while len(got) < 3 and time.monotonic() - killed < 10:
                got += self.client.lease("kw", "heir", step=1)
                time.sleep(0.01)
            took = time.monotonic() - killed
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stdout.close()
            p.stderr.close()
        self.assertEqual(sorted(l.node for l in got), sorted(roots))
        # The leases outlived the kill by what was left of their TTL since the
        # last heartbeat (0.6 to 1 s), plus the server's grace of 0.1 TTL.
        self.assertGreater(took, 0.4)
        self.assertLess(took, 1.6)

    def test_a_worker_that_gives_up_releases_its_leases_at_once(self):
        self.client.create_run("rel", tree={"b0": 3, "k": 2, "max_turns": 2, "no_scoring": True}, client_key="create-rel")
        self.client.open_step("rel", 1, [Task("t")], client_key="open")
        env = Env()
        gate = threading.Event()
        env.wait = lambda key: gate.wait(10)
        w = RolloutWorker(self.client, "rel", act, env, name="quitter", poll=0.01)
        try:
            with self.assertRaises(TimeoutError):
                w.run(1, deadline=time.monotonic() + 0.5)
            self.assertEqual(w.stats.leases, 3)
            self.assertEqual(w.stats.lost, 0)
            self.assertEqual(self.client.step_status("rel", 1).leased, 0)
            self.assertEqual(len(self.client.lease("rel", "next", step=1)), 3)
        finally:
            gate.set()


class VersionTest(ServedTest):
    def test_a_stale_worker_is_refused_and_writes_nothing(self):
        self.client.create_run("v", tree={"b0": 2, "k": 2, "max_turns": 2, "no_scoring": True, "max_staleness": 1},
                               client_key="create-v")
        self.assertEqual(self.client.publish("v", 3, client_key="pub-3").policy_version, 3)
        self.client.open_step("v", 1, [Task("t")], client_key="open")
        seq = self.last_seq("v")
        old = RolloutWorker(self.client, "v", act, Env(), name="old", policy_version=1, poll=0.01)
        with self.assertRaises(Conflict) as cm:
            old.run(1, deadline=time.monotonic() + 10)
        self.assertEqual(cm.exception.code, "stale")
        self.assertIn("version 1", cm.exception.message)
        self.assertEqual(self.last_seq("v"), seq)
        # One version behind is within max_staleness: its turns carry it.
        fresh = RolloutWorker(self.client, "v", act, Env(), name="fresh", policy_version=2, poll=0.01)
        fresh.run(1, deadline=time.monotonic() + 30)
        st = self.client.step_status("v", 1)
        self.assertEqual((st.active, st.policy_version), (0, 3))
        g = self.client.groups("v", 1)[0]
        for root in g.roots:
            self.assertEqual([t.policy_version for t in self.client.trajectory("v", root).turns], [2, 2])
        # Staleness, as the step's figures report it: one version behind when
        # sampled, and when consumed (closed at version 4).
        self.client.publish("v", 4, client_key="pub-4")
        StepDriver(self.client, "v").wait(1, timeout=30)
        m = self.client.steps("v")[0]
        self.assertEqual((m.sampled_staleness_max, m.sampled_staleness_mean), (1, 1.0))
        self.assertEqual((m.consumed_staleness_max, m.consumed_staleness_mean), (2, 2.0))

    def test_publish_under_abort_voids_the_leases_in_flight(self):
        self.client.create_run("ab", tree={"b0": 2, "k": 2, "max_turns": 2, "no_scoring": True, "on_publish": "abort"},
                               client_key="create-ab")
        self.client.publish("ab", 1, client_key="pub-1")
        self.client.open_step("ab", 1, [Task("t")], client_key="open")
        env = Env()
        first = threading.Event()
        gate = threading.Event()

        def wait(key):
            first.set()
            gate.wait(10)

        env.wait = wait
        w = RolloutWorker(self.client, "ab", act, env, name="w", policy_version=1, ttl_ms=500, poll=0.01)
        join = in_thread(w.run, 1, deadline=time.monotonic() + 30)
        self.assertTrue(first.wait(10))
        self.client.publish("ab", 2, client_key="pub-2")
        w.policy_version = 2  # the worker loads the new weights
        time.sleep(0.5)  # a heartbeat learns that the leases are void
        gate.set()
        join()
        self.assertGreaterEqual(w.stats.lost, 2)
        for root in self.client.groups("ab", 1)[0].roots:
            self.assertEqual([t.policy_version for t in self.client.trajectory("ab", root).turns], [2, 2])


class ConcurrencyTest(ServedTest):
    wide = {"b0": 16, "k": 2, "max_turns": 2, "no_scoring": True}

    def grow(self, run, **kw):
        self.client.create_run(run, tree=self.wide, client_key="create-" + run)
        self.client.open_step(run, 1, [Task("t")], client_key="open")
        env = Env(delay=0.1)
        calls = []
        lock = threading.Lock()
        running = [0, 0]  # now, peak

        def batched(reqs):
            with lock:
                calls.append(len(reqs))
                running[0] += 1
                running[1] = max(running[1], running[0])
            time.sleep(0.05)  # an inference call
            with lock:
                running[0] -= 1
            return act(reqs)

        # A batch waits for every branch, or for the oldest request to have
        # waited this long: longer than threads take to start or to wake from
        # their env steps at once, even on a busy machine.
        kw.setdefault("linger", 0.5)
        w = RolloutWorker(self.client, run, batched, env, name="w", max_branches=16, poll=0.01, **kw)
        start = time.monotonic()
        w.run(1, deadline=time.monotonic() + 60)
        return w, env, calls, running[1], time.monotonic() - start

    def test_sixteen_branches_step_their_envs_at_once(self):
        w, env, calls, _, took = self.grow("c16")
        self.assertEqual(env.steps, 32)
        self.assertEqual(env.peak, 16)
        # Every branch waits for the same move: one policy call per turn.
        self.assertEqual(calls, [16, 16])
        self.assertEqual((w.stats.policy_calls, w.stats.max_batch, w.stats.turns), (2, 16, 32))
        # Two env steps and two policy calls per branch, not 32 steps one
        # after another (3.2 s): a loose bound, the figure is the peak.
        self.assertLess(took, 1.6)

    def test_concurrency_bounds_env_steps(self):
        _, env, _, _, _ = self.grow("c4", concurrency=4)
        self.assertEqual(env.steps, 32)
        self.assertEqual(env.peak, 4)

    def test_a_batch_over_max_batch_is_split_into_concurrent_calls(self):
        w, _, calls, peak_calls, _ = self.grow("mb", max_batch=4)
        self.assertEqual(sum(calls), 32)
        self.assertLessEqual(max(calls), 4)
        self.assertEqual(w.stats.max_batch, 4)
        self.assertGreaterEqual(peak_calls, 2)  # the calls of one turn's 16 requests overlap


    def test_max_calls_bounds_the_policy_calls_in_flight(self):
        w, _, calls, peak_calls, _ = self.grow("mc", max_batch=4, max_calls=1)
        self.assertEqual(sum(calls), 32)
        self.assertLessEqual(max(calls), 4)
        self.assertEqual(peak_calls, 1)


class SubmitLingerTest(ServedTest):
    """Branches finishing close together go in one submit under the linger."""

    def submits(self, run, linger):
        self.client.create_run(run, tree={"b0": 3, "k": 1, "max_turns": 1, "no_scoring": True},
                               client_key="create-" + run)
        self.client.open_step(run, 1, [Task("t")], client_key="open")
        order = {}
        lock = threading.Lock()

        class Slow:  # the n-th branch to step finishes 40 ms after the one before
            def __init__(self):
                self.n = 0

            def reset(self, task):
                return self

            def restore(self, task, history, state):
                return self

            def step(self, key, move):
                with lock:
                    i = order.setdefault(key.node, len(order))
                time.sleep(0.04 * i)
                return Observation("o", reward=float(i), done=True)

            def state(self):
                return None

        sent = []
        w = RolloutWorker(self.client, run, act, Slow(), name="w", max_branches=3, poll=0.01, linger=linger,
                          on_submit=lambda subs, out: sent.append(len(subs)))
        w.run(1, deadline=time.monotonic() + 60)
        self.assertEqual(sum(sent), 3)
        return sent

    def test_a_long_linger_sends_branches_finishing_together_in_one_submit(self):
        self.assertEqual(self.submits("long", 0.5), [3])

    def test_a_short_linger_sends_each_branch_when_it_finishes(self):
        # [1, 1, 1] unless a submit outlasts the 40 ms between branches.
        self.assertGreater(len(self.submits("short", 0.001)), 1)


class RoomTest(ServedTest):
    def test_a_worker_with_room_takes_a_branch_given_back_during_its_tool_call(self):
        self.client.create_run("room", tree={"b0": 2, "k": 1, "max_turns": 1, "no_scoring": True},
                               client_key="create-room")
        self.client.open_step("room", 1, [Task("t")], client_key="open")
        other = self.client.lease("room", "other", 1, 1)
        self.assertEqual(len(other), 1)
        entered, release = threading.Event(), threading.Event()
        stepped = []

        class Env:
            def reset(self, task):
                return self

            def restore(self, task, history, state):
                return self

            def step(self, key, move):
                stepped.append(key.node)
                if len(stepped) == 1:  # the worker's own branch: a long tool call
                    entered.set()
                    release.wait(20)
                return Observation("o", reward=1.0, done=True)

            def state(self):
                return None

        w = RolloutWorker(self.client, "room", act, Env(), name="w", max_branches=2, poll=0.01)
        t = threading.Thread(target=w.run, args=(1,), kwargs={"deadline": time.monotonic() + 60})
        t.start()
        try:
            self.assertTrue(entered.wait(30))
            self.client.release_leases("room", "other", [other[0].id])
            deadline = time.monotonic() + 10
            while other[0].node not in stepped and time.monotonic() < deadline:
                time.sleep(0.02)
            # Taken while the worker's own branch still waits on its tool.
            self.assertIn(other[0].node, stepped)
        finally:
            release.set()
            t.join(60)


class EachTurnTest(ServedTest):
    def test_each_turn_is_durable_before_the_interval_ends(self):
        self.client.create_run("et", tree={"b0": 1, "k": 3, "max_turns": 3, "no_scoring": True}, client_key="create-et")
        node = self.client.open_step("et", 1, [Task("t")], client_key="open").groups[0].roots[0]
        env = Env()
        gate = threading.Event()
        env.wait = lambda key: gate.wait(10) if key.path == 1 else None
        w = RolloutWorker(self.client, "et", act, env, name="w", each_turn=True, poll=0.01)
        join = in_thread(w.run, 1, deadline=time.monotonic() + 30)
        try:
            deadline = time.monotonic() + 10
            while self.client.node("et", node).node.turns < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            n = self.client.node("et", node).node
            self.assertEqual((n.turns, n.status), (1, "active"))  # turn 0 is stored while turn 1's tool runs
            self.assertEqual(self.client.step_status("et", 1).leased, 1)
        finally:
            gate.set()
        join()
        self.assertEqual(w.stats.turns, 3)
        self.assertGreaterEqual(w.stats.submits, 2)  # turns 1 and 2 may go in one request
        self.assertEqual(self.client.node("et", node).node.turns, 3)

    def test_each_turn_grows_the_same_trees(self):
        advs = {}
        for name, each in (("whole", False), ("each", True)):
            self.client.create_run(name, tree=self.tree, client_key="create-" + name)
            d = StepDriver(self.client, name, poll=0.02)
            d.open(1, toy_worker.toy_tasks(2))
            w = RolloutWorker(self.client, name, toy_worker.toy_act, toy_worker.ToyEnv(), toy_worker.toy_score,
                              name="w", max_branches=4, poll=0.01, each_turn=each)
            w.run(1, deadline=time.monotonic() + 60)
            advs[name] = sorted((a.outcome, round(a.advantage, 9)) for g in d.wait(1, timeout=30).values() for a in g)
        self.assertEqual(advs["each"], advs["whole"])


class ConstructorTest(unittest.TestCase):
    def test_a_worker_needs_a_name(self):
        with self.assertRaises(ValueError) as cm:
            RolloutWorker(None, "r", act, Env())
        self.assertIn("name", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
