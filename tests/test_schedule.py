"""tests/schedule.py, the xdist scheduler of ``./dev test``: groups read from the workers' files,
collection order kept, the real_vllm tier and the ``timing`` tests handed out once its servers are up
(every flaky clean-clone run was a timing test beside a starting server)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.schedule import TIER, TierWhenReady


class Node:
    """What the scheduler uses of xdist's WorkerController: the indexes it is sent."""

    def __init__(self, name: str) -> None:
        self.sent: list[int] = []
        self.shutting_down = False
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


IDS = [
    "tests/a.py::test_1",
    "tests/a.py::test_2",
    "tests/b.py::test_shared_1",
    "tests/b.py::test_shared_2",
    "tests/c.py::test_3",
    "tests/c.py::test_4",
    "tests/real_vllm/test_x.py::test_5",
    "tests/real_vllm/test_y.py::test_6",
]


class Config:
    """What the scheduler reads of pytest's config: two workers (``-n 2``), the reorder option."""

    def __init__(self) -> None:
        self.option = SimpleNamespace(loadscopereorder=True)

    def getvalue(self, name: str) -> Any:
        return {"tx": ["2*popen"]}[name]


def _scheduler(
    tmp_path: Path, ready: list[bool], held: tuple[str, ...] = ()
) -> tuple[TierWhenReady, Node, Node]:
    groups = {"tests/b.py::test_shared_1": "tests/b.py", "tests/b.py::test_shared_2": "tests/b.py"}
    groups |= {i: TIER for i in IDS if "real_vllm" in i}
    (tmp_path / "xdist-groups-gw0.json").write_text(json.dumps({"groups": groups, "held": list(held)}))
    sched = TierWhenReady(Config(), None, tmp_path, lambda: ready[0])  # type: ignore[arg-type]
    a, b = Node("gw0"), Node("gw1")
    for n in (a, b):
        sched.add_node(n)  # type: ignore[arg-type]
        sched.add_node_collection(n, IDS)  # type: ignore[arg-type]
    sched.schedule()
    return sched, a, b


def _finish(sched: TierWhenReady, node: Node, index: int) -> None:
    sched.mark_test_complete(node, index)  # type: ignore[arg-type]


def test_the_tier_waits_behind_the_rest_until_its_servers_are_up_then_goes_first(tmp_path: Path) -> None:
    ready = [False]
    sched, a, b = _scheduler(tmp_path, ready)
    # collection order, two units each to start; the module sharing a fixture is one unit; the tier
    # (servers not up) is not handed out
    assert (a.sent, b.sent) == ([0, 2, 3], [1, 4])
    ready[0] = True
    _finish(sched, b, 1)
    assert b.sent == [1, 4, 6, 7]  # servers up: the whole tier, on one worker, before c.py's last test
    _finish(sched, a, 0)
    assert a.sent == [0, 2, 3, 5]


def test_with_nothing_else_left_a_worker_takes_the_tier_and_waits(tmp_path: Path) -> None:
    sched, a, b = _scheduler(tmp_path, [False])
    done: dict[str, list[int]] = {"a": [], "b": []}
    while any(len(done[k]) < len(n.sent) for k, n in (("a", a), ("b", b))):
        for key, node in (("a", a), ("b", b)):
            left = [i for i in node.sent if i not in done[key]]
            if left:
                done[key].append(left[0])
                _finish(sched, node, left[0])
    assert sorted(a.sent + b.sent) == list(range(len(IDS)))
    holder = a if 6 in a.sent else b
    assert holder.sent[-2:] == [6, 7]  # the tier, whole, handed out last
    assert a.shutting_down and b.shutting_down


def test_timing_tests_wait_for_the_servers_like_the_tier(tmp_path: Path) -> None:
    ready = [False]
    # test_1 compares times; b.py's shared unit holds one that does
    sched, a, b = _scheduler(tmp_path, ready, held=("tests/a.py::test_1", "tests/b.py::test_shared_2"))
    # two units each to start: every unit not held goes first (a.py's second test, c.py's two), and
    # test_1 only because nothing else is left
    assert (a.sent, b.sent) == ([1, 5], [4, 0])
    _finish(sched, b, 4)
    assert b.sent == [4, 0, 2, 3]  # nothing else left but the tier, which still waits: the held unit
    ready[0] = True
    _finish(sched, a, 1)
    assert a.sent == [1, 5, 6, 7]  # servers up: the tier


def test_once_the_servers_are_up_timing_tests_run_after_the_tier_never_beside_it(tmp_path: Path) -> None:
    sched, a, b = _scheduler(tmp_path, [True], held=("tests/a.py::test_1", "tests/a.py::test_2"))
    # the tier first; its worker takes a held test to run after the tier's, the other worker the rest
    assert (a.sent, b.sent) == ([6, 7, 0], [2, 3, 4])
    _finish(sched, b, 2)
    assert b.sent == [2, 3, 4, 5]  # the tier still runs on a: c.py before the held test_2
    _finish(sched, b, 3)
    assert b.sent == [2, 3, 4, 5, 1]  # nothing else is left: test_2 goes all the same
