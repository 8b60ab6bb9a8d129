"""Which tests a pytest-xdist worker gets next under ``./dev test`` (``-n 2 --dist loadgroup``).

Two things xdist's own ``loadgroup`` no longer does here, and one it never did:

- ``xdist_group`` marks are ignored: xdist 3.8 groups tests by appending ``@group`` to
  ``item._nodeid``, and pytest 9.2 derives ``nodeid`` from ``item._id`` instead, so the suffix never
  appears and every test is its own unit (the real_vllm tier's 49 tests ran on both workers at once,
  reading the same servers' counters, and each LiteLLM test started its own LiteLLM). The workers
  write each marked test's group to a file (``write_groups``); the controller reads them here.
  Tests that share a module-scoped fixture are grouped by module the same way.
- Units are handed out largest first (``--loadscope-reorder``, on by default), which put the tier's
  group FIRST: a worker would sit in it for the whole vLLM install. Here they keep collection order.
- The tier waits for its servers: it is handed out as soon as the background chain has published
  both servers (tests/real_vllm/chain.py), not before (a worker would sit waiting) and not only at
  the end (the other worker would sit idle for the tier's ~90 s). Only when nothing else is left does
  a worker take it early and wait.
- Tests marked ``timing`` (their assertions compare times: a p50 against another, a drift, a
  deadline) wait too: installing and starting the two vLLM servers keeps both cores busy for
  minutes, and every flaky clean-clone run so far was a timing test that ran then. Nor do they run
  beside the tier, whose cache checks time prefill on the servers (a Locust run beside it made a
  warm prefill look slow): they go to the tier's worker after its last tests, or to the other
  worker once the tier is done. Either rule gives way when nothing else is left.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

TIER = "real_vllm"
#: the marker of tests held until the servers are up (see above)
TIMING = "timing"
_GROUPS = "xdist-groups-{}.json"


def _shared_fixture_scope(item: pytest.Item) -> bool:
    """The test uses a fixture set up once per module, class or package (not per session: each
    worker has its own session)."""
    info = getattr(item, "_fixtureinfo", None)
    defs = getattr(info, "name2fixturedefs", {}) if info is not None else {}
    return any(d[-1].scope in ("module", "class", "package") for d in defs.values() if d)


def write_groups(items: list[pytest.Item], folder: Path, worker: str) -> None:
    """On a worker: each ``xdist_group``-marked test's group, for the controller's scheduler. Tests
    of one module that share a module-scoped fixture are a group too: spread over both workers, each
    worker set the fixture up again (the report-parity run, 22 s, ran twice)."""
    groups, held = {}, []
    for item in items:
        if item.get_closest_marker(TIMING) is not None:
            held.append(item.nodeid)
        names = sorted(
            {
                str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                for m in item.iter_markers("xdist_group")
            }
        )
        if names:
            groups[item.nodeid] = "_".join(names)
        elif _shared_fixture_scope(item):
            groups[item.nodeid] = item.nodeid.split("::", 1)[0]
    tmp = folder / f".{_GROUPS.format(worker)}"
    tmp.write_text(json.dumps({"groups": groups, "held": held}))
    tmp.replace(folder / _GROUPS.format(worker))


class TierWhenReady(LoadGroupScheduling):
    """``loadgroup`` with the groups read from the workers' files, collection order kept, and the
    tier and the ``timing`` tests handed out once ``ready()`` says the servers are up (or failed to
    come up)."""

    def __init__(self, config: pytest.Config, log: Any, folder: Path, ready: Callable[[], bool]) -> None:
        super().__init__(config, log)
        # collection order: the conftest sorts the tier last, and this class moves it when ready
        config.option.loadscopereorder = False
        self.folder, self.ready = folder, ready
        self.groups: dict[str, str] | None = None
        self.held: set[str] = set()
        self.released = False

    def _read(self) -> dict[str, str]:
        if self.groups is None:  # every worker has collected (and written) by the time units are made
            self.groups, held = {}, set()
            for f in sorted(self.folder.glob(_GROUPS.format("*"))):
                written = json.loads(f.read_text())
                self.groups.update(written["groups"])
                held.update(written["held"])
            self.held = {self._split_scope(nodeid) for nodeid in held}
        return self.groups

    def _split_scope(self, nodeid: str) -> str:
        groups = self._read()
        if nodeid in groups:
            return groups[nodeid]
        return super()._split_scope(nodeid)

    def _tier_running(self, node: Any) -> bool | None:
        """Whether the tier's tests are still running: on ``node`` (True), on another worker
        (False), or not at all (None)."""
        for other, work in self.assigned_work.items():
            if not all(work.get(TIER, {}).values()):
                return other is node
        return None

    def _assign_work_unit(self, node: Any) -> None:
        if not self.released and self.ready():
            self.released = True
            if TIER in self.workqueue:
                self.workqueue.move_to_end(TIER, last=False)  # first, once its servers are up
        held = [s for s in self.workqueue if s in self.held]
        if not self.released:
            # behind everything else until then: the held units, then the tier
            for scope in held:
                self.workqueue.move_to_end(scope)
            if TIER in self.workqueue and len(self.workqueue) > 1:
                self.workqueue.move_to_end(TIER)
        elif TIER not in self.workqueue:
            running = self._tier_running(node)
            # the tier's own tests time prefill and TTFT on its servers: the held units run after
            # them on the tier's worker, or on the other worker once the tier is done
            for scope in reversed(held) if running else held:
                self.workqueue.move_to_end(scope, last=running is False)
        super()._assign_work_unit(node)
