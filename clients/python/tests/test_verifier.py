"""Deferred rewards and remote process scores, delivered by a Verifier against
a real ``patrdb serve``: the groups they hold open close with the same trees
and advantages as a step whose workers rewarded and scored inline."""

import threading
import time
import unittest

from . import test_client
from .test_client import ServedTest
from .test_rollout import in_thread

from patrdb_client import RolloutWorker, StepDriver, Verifier  # noqa: E402
import toy_worker  # noqa: E402


def setUpModule():
    test_client.setUpModule()


def tearDownModule():
    test_client.tearDownModule()


def canonical(client, run, step):
    """The step's trees with every node named by its task and the ordinals
    from its root (never by its id, which depends on timing): status, turns,
    scores, routing decisions, reward, failure and advantage."""
    advs = {a.leaf: a for a in client.advantages(run, step=step)}
    out = {}
    for g in client.groups(run, step):
        nodes = {n.id: n for n in client.tree(run, g.id).nodes}

        def path(n):
            return (path(nodes[n.parent]) if n.parent else ()) + (n.ordinal,)

        for n in nodes.values():
            a = advs.get(n.id)
            out[(g.task,) + path(n)] = (
                n.status, n.turns, [(s.interval, s.turn, s.value) for s in n.scores],
                [(d.interval, d.action, d.score, d.reference, d.rule, d.children) for d in n.decisions],
                n.has_reward, n.reward, n.error, n.attempt,
                None if a is None else (a.outcome, a.mean, a.std, a.advantage, a.zero_variance))
    return out


class Grower:
    """Toy workers on a thread each, with the step's driver."""

    def __init__(self, client, run, step, workers=2, verifier=None, **kw):
        self.client, self.run, self.step = client, run, step
        scorer = kw.pop("scorer", toy_worker.toy_score)
        self.workers = [RolloutWorker(client, run, toy_worker.toy_act, toy_worker.ToyEnv(), scorer, name=f"w{i}",
                                      max_branches=3, poll=0.01, **kw) for i in range(workers)]
        self.joins = [in_thread(w.run, step, deadline=time.monotonic() + 60) for w in self.workers]
        self.verifier = verifier
        self.vjoin = in_thread(verifier.run, step, deadline=time.monotonic() + 60) if verifier else None

    def join(self):
        for j in self.joins:
            j()
        return self.vjoin() if self.vjoin else None


class DeferredRewardTest(ServedTest):
    def inline(self, run, tree=None):
        self.client.create_run(run, tree=tree or self.tree, client_key="create-" + run)
        d = StepDriver(self.client, run, poll=0.02)
        d.open(1, toy_worker.toy_tasks(3))
        Grower(self.client, run, 1).join()
        d.wait(1, timeout=30)
        return canonical(self.client, run, 1)

    def test_a_reward_delivered_later_closes_the_group_as_an_inline_one(self):
        want = self.inline("inline")
        self.client.create_run("later", tree=self.tree, client_key="create-later")
        d = StepDriver(self.client, "later", poll=0.02)
        d.open(1, toy_worker.toy_tasks(3))
        Grower(self.client, "later", 1, defer_rewards=True).join()
        # The workers are through; the finished leaves wait for their rewards
        # and hold their groups open.
        st = d.close_done(1)
        pend = self.client.pending("later", 1)
        waiting = {w.group for w in pend.rewards}
        self.assertTrue(pend.rewards)
        self.assertEqual(pend.scores, [])
        self.assertEqual(st.active, 0)
        self.assertEqual(st.awaiting_rewards, len(pend.rewards))
        self.assertEqual(set(st.done) & waiting, set())
        for w in pend.rewards:  # every leaf that ended or reached max_turns, none pruned
            self.assertEqual(len(w.history), w.path_len)
            self.assertTrue(w.history[-1].done or w.path_len == self.tree["max_turns"])
            self.assertTrue(w.task.id.startswith("task-"))
            self.assertLess(w.since_at, w.due_at)
        ended = [n for g in self.client.groups("later", 1) for n in self.client.tree("later", g.id).nodes
                 if n.status in ("completed", "truncated")]
        self.assertEqual(sorted(n.id for n in ended), sorted(w.node for w in pend.rewards))
        self.assertIn("truncated", {n.status for n in ended})
        self.assertFalse(any(g.status == "closed" for g in self.client.groups("later", 1) if g.id in waiting))
        time.sleep(1.0)  # the verifier comes later
        stats = Verifier(self.client, "later", reward_fn=toy_worker.toy_reward).run(1, deadline=time.monotonic() + 30)
        self.assertEqual((stats.rewards, stats.errors, stats.refused), (len(pend.rewards), 0, 0))
        d.wait(1, timeout=30)
        got = canonical(self.client, "later", 1)
        self.assertEqual(got, want)

    def test_a_verifier_that_fails_records_the_leaf_failed_not_zero(self):
        self.client.create_run("bad", tree=self.tree, client_key="create-bad")
        d = StepDriver(self.client, "bad", poll=0.02)
        d.open(1, toy_worker.toy_tasks(1))
        Grower(self.client, "bad", 1, defer_rewards=True).join()
        victim = self.client.pending("bad", 1).rewards[0].node
        doomed = [t.turn() for t in self.client.trajectory("bad", victim).turns]

        def reward(task, history):
            if history == doomed:
                raise RuntimeError("the test suite crashed")
            return toy_worker.toy_reward(task, history)

        stats = Verifier(self.client, "bad", reward_fn=reward, concurrency=1).run(1, deadline=time.monotonic() + 30)
        self.assertGreaterEqual(stats.errors, 1)
        advs = d.wait(1, timeout=30)
        n = self.client.node("bad", victim).node
        self.assertEqual(n.status, "failed")
        self.assertIn("the test suite crashed", n.error)
        self.assertFalse(n.has_reward)
        self.assertNotIn(victim, [a.leaf for g in advs.values() for a in g])

    def test_a_reward_that_never_comes_fails_after_the_pending_timeout(self):
        tree = dict(self.tree, pending_ttl_ms=300)
        self.client.create_run("never", tree=tree, client_key="create-never")
        d = StepDriver(self.client, "never", poll=0.05)
        d.open(1, toy_worker.toy_tasks(1))
        Grower(self.client, "never", 1, defer_rewards=True).join()
        pending = [w.node for w in self.client.pending("never", 1).rewards]
        self.assertTrue(pending)
        advs = d.wait(1, timeout=30)  # the driver waits the timeout out
        for node in pending:
            n = self.client.node("never", node).node
            self.assertEqual(n.status, "failed")
            self.assertIn("reward timed out", n.error)
        self.assertFalse(set(pending) & {a.leaf for g in advs.values() for a in g})

    def test_remote_scores_arriving_late_route_as_inline_ones(self):
        want = self.inline("scored")
        self.client.create_run("remote", tree=dict(self.tree, remote_scores=True), client_key="create-remote")
        d = StepDriver(self.client, "remote", poll=0.02)
        d.open(1, toy_worker.toy_tasks(3))
        seen = []

        def late_score(task, history):
            seen.append(len(history))
            time.sleep(0.2)  # a remote process reward model
            return toy_worker.toy_score(task, history)

        v = Verifier(self.client, "remote", score_fn=late_score, concurrency=4)
        g = Grower(self.client, "remote", 1, verifier=v, scorer=None)
        d.wait(1, timeout=60)
        stats = g.join()
        self.assertGreater(stats.scores, 0)
        self.assertEqual(stats.scores, len(seen))
        self.assertEqual(stats.refused, 0)
        self.assertEqual(sum(w.stats.turns for w in g.workers), self.client.run("remote").turns)
        # Same tree, scores and routing as the workers' own scorer gave (the
        # config differs only in remote_scores).
        got = canonical(self.client, "remote", 1)
        self.assertEqual(got, want)

    def test_a_busy_verifier_waits_for_a_result_rather_than_list_again(self):
        self.client.create_run("busy", tree=self.tree, client_key="create-busy")
        d = StepDriver(self.client, "busy", poll=0.02)
        d.open(1, toy_worker.toy_tasks(1))
        Grower(self.client, "busy", 1, defer_rewards=True).join()
        pending = len(self.client.pending("busy", 1).rewards)
        lists = []
        listing = self.client.pending

        def counted(*a, **kw):
            lists.append(kw.get("history"))
            return listing(*a, **kw)

        self.client.pending = counted

        def slow(task, history):
            time.sleep(0.5)  # a test suite
            return toy_worker.toy_reward(task, history)

        try:
            v = Verifier(self.client, "busy", reward_fn=slow, concurrency=1, poll=0.01)
            stats = v.run(1, deadline=time.monotonic() + 60)
        finally:
            del self.client.pending
        self.assertEqual(stats.rewards, pending)
        # One look per result (and one at the end), not one per 10 ms poll
        # while each 0.5 s reward runs; never with every path.
        self.assertLessEqual(len(lists), pending + 3)
        self.assertEqual(set(lists), {False})
        d.wait(1, timeout=30)

    def test_a_verifier_needs_work_to_do(self):
        with self.assertRaises(ValueError):
            Verifier(self.client, "r1")


class TwoVerifiersTest(ServedTest):
    def test_two_verifiers_deliver_each_reward_once(self):
        self.client.create_run("two", tree=self.tree, client_key="create-two")
        d = StepDriver(self.client, "two", poll=0.02)
        d.open(1, toy_worker.toy_tasks(2))
        gate = threading.Event()

        def slow_reward(task, history):
            gate.wait(10)
            return toy_worker.toy_reward(task, history)

        vs = [Verifier(self.client, "two", reward_fn=slow_reward, poll=0.01) for _ in range(2)]
        joins = [in_thread(v.run, 1, deadline=time.monotonic() + 60) for v in vs]
        Grower(self.client, "two", 1, defer_rewards=True).join()
        time.sleep(0.2)  # both verifiers have listed every pending reward
        gate.set()
        stats = [j() for j in joins]
        d.wait(1, timeout=30)
        leaves = [n for g in self.client.groups("two", 1) for n in self.client.tree("two", g.id).nodes
                  if n.status in ("completed", "truncated")]
        self.assertEqual(sum(s.rewards for s in stats), len(leaves))
        self.assertEqual(sum(s.refused for s in stats), len(leaves))  # each computed twice, taken once
        self.assertTrue(all(n.has_reward for n in leaves))


if __name__ == "__main__":
    unittest.main()
