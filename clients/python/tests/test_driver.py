"""The StepDriver against a real ``patrdb serve``: dynamic sampling opens
further tasks until enough groups closed informative, and a restarted driver
takes the extended step up again."""

import threading
import time
import unittest

from . import test_client
from .test_client import ServedTest
from .test_rollout import in_thread

from patrdb_client import Move, Observation, RolloutWorker, StepAdvantages, StepDriver, Task, drive_step  # noqa: E402


def setUpModule():
    test_client.setUpModule()


def tearDownModule():
    test_client.tearDownModule()


class Episode:
    def __init__(self, task):
        self.task = task

    def step(self, key, move):
        # "mixed" tasks reward their branches by node parity (three roots have
        # consecutive ids: the rewards vary); "flat" ones reward none.
        reward = float(key.node % 2) if self.task.prompt == "mixed" else 0.0
        return Observation("o", reward=reward, done=True)

    def state(self):
        return None


class Env:
    def reset(self, task):
        return Episode(task)

    def restore(self, task, history, state):
        return Episode(task)


def act(reqs):
    return [Move("a") for _ in reqs]


def tasks(*names):
    return [Task(n, n.split("-")[0]) for n in names]


class DynamicSamplingTest(ServedTest):
    one_turn = {"b0": 3, "k": 1, "max_turns": 1, "no_scoring": True}

    def setUp(self):
        super().setUp()
        self.client.create_run("ds", tree=self.one_turn, client_key="create-ds")
        self.asked = []
        self.supply = tasks("flat-2", "mixed-2", "mixed-3", "mixed-4")

    def more(self, k):
        self.asked.append(k)
        out, self.supply = self.supply[:k], self.supply[k:]
        return out

    def drive(self, first, informative, **kw):
        until = threading.Event()
        w = RolloutWorker(self.client, "ds", act, Env(), name="w", max_branches=6, poll=0.01)
        join = in_thread(w.run, 1, deadline=time.monotonic() + 60, until=until)
        try:
            return drive_step(self.client, "ds", 1, first, informative=informative, more_tasks=self.more,
                              timeout=60, poll=0.02, **kw)
        finally:
            until.set()
            join()

    def test_further_tasks_until_n_groups_are_informative(self):
        first = tasks("flat-0", "mixed-0", "flat-1", "mixed-1")
        res = self.drive(first, informative=3)
        self.assertIsInstance(res, StepAdvantages)
        groups = {g.task: g for g in self.client.groups("ds", 1)}
        # The shortest run of the supply that makes three informative groups:
        # one replacement for each flat group, as soon as it is known flat.
        opened = ["flat-0", "mixed-0", "flat-1", "mixed-1", "flat-2", "mixed-2"]
        self.assertEqual(sorted(groups), sorted(opened))
        self.assertEqual([t.id for t in res.tasks], opened)
        self.assertEqual(sum(self.asked), 2)
        self.assertEqual(res.informative, sorted(groups[t].id for t in ("mixed-0", "mixed-1", "mixed-2")))
        self.assertEqual(res.filtered, sorted(groups[t].id for t in ("flat-0", "flat-1", "flat-2")))
        self.assertEqual(sorted(res), sorted(g.id for g in groups.values()))
        for g in res.filtered:  # closed on record, flagged
            self.assertEqual(groups_status(self.client, g), "closed")
            self.assertTrue(all(a.zero_variance for a in res[g]))
        for g in res.informative:
            self.assertFalse(any(a.zero_variance for a in res[g]))
        # Each filtered group is on record as such, as the Go engine records it.
        recorded = sorted(ev.group for ev in self.client.iter_events("ds") if ev.kind == "group.filter")
        self.assertEqual(recorded, res.filtered)
        # The batch leaves the filtered groups out when asked to.
        b = self.client.batch("ds", 1, groups=res.informative)
        self.assertEqual(sorted(set(int(x) for x in b["row_group"])), res.informative)

        # A restarted driver with the same first tasks takes the extended step
        # up again: nothing more is opened or asked for.
        again = drive_step(self.client, "ds", 1, first, informative=3, more_tasks=self.more, timeout=30, poll=0.02)
        self.assertEqual((again.informative, again.filtered), (res.informative, res.filtered))
        self.assertEqual([t.id for t in again.tasks], opened)
        self.assertEqual(len(self.client.groups("ds", 1)), 6)
        self.assertEqual(sum(self.asked), 2)

    def test_a_supply_that_runs_out_ends_the_step_short(self):
        self.supply = tasks("flat-2")
        res = self.drive(tasks("flat-0", "mixed-0"), informative=2)
        self.assertEqual([t.id for t in res.tasks], ["flat-0", "mixed-0", "flat-2"])
        self.assertEqual(len(res.informative), 1)
        self.assertEqual(len(res.filtered), 2)
        self.assertEqual(self.client.step_status("ds", 1).open, 0)

    def test_max_tasks_caps_the_step(self):
        res = self.drive(tasks("flat-0", "flat-1"), informative=3, max_tasks=4)
        self.assertEqual([t.id for t in res.tasks], ["flat-0", "flat-1", "flat-2", "mixed-2"])
        self.assertEqual((len(res.informative), len(res.filtered)), (1, 3))
        self.assertEqual(sum(self.asked), 2)

    def test_without_informative_the_step_is_the_tasks_given(self):
        res = self.drive(tasks("flat-0", "mixed-0"), informative=0)
        self.assertEqual(self.asked, [])
        self.assertEqual(len(res), 2)
        self.assertEqual((len(res.informative), len(res.filtered)), (1, 1))
        # wait() answers the same way.
        self.assertEqual(StepDriver(self.client, "ds").wait(1).filtered, res.filtered)


def groups_status(client, gid):
    return client.tree("ds", gid).group.status


if __name__ == "__main__":
    unittest.main()
