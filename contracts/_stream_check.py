"""Checking a capture of any size in bounded memory: the exchanges are read once, in time order, and
only those that may still pair with one yet to come are held.

Pairing is bounded in time (``_pairs``: an engine side starts at most a minute after its caller side,
a twin at most a minute after the other ended), so an exchange read now can pair only with a recent
one. Each exchange read joins the group of every held exchange it may pair with
(``_pairs.may_pair``, found through ``_pairs.kin_keys``); a group is judged as a whole
(``_check.judge``: pairing, rules, attribution, known bugs) and let go once the capture's time has
passed the latest start at which anything may still pair with one of its members
(``_pairs.partner_reach``). Nothing outside a group could have changed its findings, so they are those
of :func:`~wirecheck.contracts.check_exchanges` over the whole capture, in the same order.

Two limits keep memory flat whatever the capture holds, and each says when it acted:

- ``window``: the most exchanges held at once, and ``window_bytes`` the most bytes (as read). A
  capture denser than that (thousands of exchanges within a minute, or all of them at one instant)
  has its oldest groups judged before their time has passed: ``CheckResult.cut`` counts those
  exchanges, which may have missed a partner read later.
- Time order: the exchanges must come sorted by start (those without a time may come first: they may
  pair with any exchange and are held to the end). One that starts before a group already let go
  could have paired with it: ``CheckResult.late`` counts those. ``wirecheck.replay.in_time_order``
  sorts any capture in bounded memory first.

The live checker (``proxy/_live.py``) windows differently on purpose: it must report within seconds of
an exchange's end, so it judges each settled batch with the partners the store holds around it at
once, where this waits until no partner can come; both judge through ``_check.judge``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from ._check import CheckResult, judge, judge_set, view_or_crash
from ._errors import ConfigError
from ._exchange import Exchange
from ._pairs import TapSet, kin_keys, may_pair, partner_reach
from ._registry import CheckConfig, Finding
from ._view import ExchangeView

__all__ = ["WINDOW", "WINDOW_BYTES", "check_stream", "exchange_bytes"]

#: exchanges held at once at the most (the live checker keeps as many recent views, ``RECENT_MAX``):
#: about 200 MB of small chat completions with their views, measured (docs/check.md)
WINDOW = 20_000
#: bytes of held exchanges at the most, as :func:`exchange_bytes` counts them (a view holds about
#: three times what it parsed)
WINDOW_BYTES = 128 * 1024 * 1024


def exchange_bytes(ex: Exchange) -> int:
    """About what an exchange takes as read: its bodies, its chunks, and a fixed part for the rest."""
    n = 2048 + len(ex.request.body)
    resp = ex.response
    if resp is not None:
        n += len(resp.body)
        if resp.chunks is not None:
            n += sum(len(c.data) + 96 for c in resp.chunks)
    return n


@dataclass(slots=True, eq=False)
class _Held:
    """One held exchange: its place in the capture, its view, and the group it belongs to."""

    position: int
    view: ExchangeView
    own: list[Hashable]
    group: _Group


@dataclass(slots=True, eq=False)
class _Group:
    """Held exchanges that may pair with one another (directly or through a member)."""

    members: list[_Held] = field(default_factory=list)
    reach: float = -math.inf
    size: int = 0
    #: set once the group has been merged into another (a stale entry in the window's queue)
    merged_into: _Group | None = None


class _Window:
    """The held exchanges, indexed by the keys their partners are found by, and their groups queued
    by the time after which nothing may join them; what each judged exchange found."""

    def __init__(self, ctx: CheckConfig, result: CheckResult, window: int, window_bytes: int) -> None:
        self.ctx = ctx
        self.result = result
        self.window = window
        self.window_bytes = window_bytes
        self.held = 0
        self.bytes = 0
        #: key -> the held exchanges found by it (a dict: letting one go is O(1))
        self.index: dict[Hashable, dict[int, _Held]] = {}
        #: (reach, tie-break, group): the groups by the time after which nothing may join them
        self.queue: list[tuple[float, int, _Group]] = []
        self.ticket = 0
        #: the latest time a group let go might still have been joined (late exchanges start before)
        self.let_go = -math.inf
        self.now = -math.inf
        self.tap_set = TapSet()
        #: (position, findings) of each exchange judged, put in the capture's order at the end
        self.judged: list[tuple[int, list[Finding]]] = []

    def add(self, position: int, view: ExchangeView) -> None:
        start = view.ex.started_epoch
        if start is None:
            # out of order (those without a time come first), and anything let go might have paired
            late = self.now > -math.inf and self.let_go > -math.inf
        else:
            late = start < self.now and start <= self.let_go
            self.now = max(self.now, start)
        self.result.late += late
        self.tap_set.add(view, position)
        own, wanted = kin_keys(view)
        size = exchange_bytes(view.ex)
        group = _Group(reach=partner_reach(view), size=size)
        held = _Held(position, view, own, group)
        group.members.append(held)
        for key in wanted:
            for other in list(self.index.get(key, {}).values()):
                if _root(other.group) is not group and may_pair(other.view, view):
                    group = self._merge(_root(other.group), group)
        for key in own:
            self.index.setdefault(key, {})[id(held)] = held
        self.held += 1
        self.bytes += size
        self._queue(group)
        self._close_passed()
        while self.held > self.window or self.bytes > self.window_bytes:
            self._close_first(cut=True)

    def _merge(self, a: _Group, b: _Group) -> _Group:
        big, small = (a, b) if len(a.members) >= len(b.members) else (b, a)
        for h in small.members:
            h.group = big
        big.members.extend(small.members)
        big.reach = max(big.reach, small.reach)
        big.size += small.size
        small.members = []
        small.merged_into = big
        return big

    def _queue(self, group: _Group) -> None:
        self.ticket += 1
        heapq.heappush(self.queue, (group.reach, self.ticket, group))

    def _close_passed(self) -> None:
        """Judge every group that nothing read from now on may join."""
        while self.queue and self.queue[0][0] < self.now:
            self._close_first(cut=False)

    def _close_first(self, *, cut: bool) -> None:
        reach, _, group = heapq.heappop(self.queue)
        if group.merged_into is not None or not group.members or reach != group.reach:
            return  # stale: the group grew (queued again with its new reach) or is gone
        if cut and reach >= self.now:
            self.result.cut += len(group.members)
        self.let_go = max(self.let_go, reach)
        self._judge(group)

    def _judge(self, group: _Group) -> None:
        members = sorted(group.members, key=lambda h: h.position)
        for h in members:
            for key in h.own:
                bucket = self.index.get(key)
                if bucket is not None:
                    bucket.pop(id(h), None)
                    if not bucket:
                        del self.index[key]
        self.held -= len(members)
        self.bytes -= group.size
        group.members = []
        judged = judge([h.view for h in members], self.ctx)
        self.tap_set.pairs += judged.found_pairs
        judged.count_into(self.result)
        for h in members:
            found = judged.findings[id(h.view)]
            if found:
                self.judged.append((h.position, found))
            # what pairing cached on the view points back at it: break the cycle, so that the view
            # is freed now rather than at the next full collection
            h.view.memo.clear()

    def finish(self) -> None:
        while self.queue:
            self._close_first(cut=False)


def _root(group: _Group) -> _Group:
    while group.merged_into is not None:
        group = group.merged_into
    return group


def check_stream(
    exchanges: Iterable[tuple[int, Exchange]],
    config: CheckConfig | None = None,
    *,
    window: int = WINDOW,
    window_bytes: int = WINDOW_BYTES,
) -> CheckResult:
    """Check a capture read once, in time order, holding only what may still pair (see the module
    docstring). ``exchanges``: ``(position, exchange)``, the position being its place in the capture
    (``enumerate`` of a capture already in time order; ``wirecheck.replay.in_time_order`` sorts one
    that is not): findings come in that order, and ties are broken by it as
    :func:`~wirecheck.contracts.check_exchanges` breaks them by the order of its list."""
    if window < 1 or window_bytes < 1:
        raise ConfigError(
            f"the window must hold at least one exchange and byte, not {window} and {window_bytes}"
        )
    ctx = config or CheckConfig()
    result = CheckResult()
    held = _Window(ctx, result, window, window_bytes)
    unreadable: list[tuple[int, Finding]] = []
    taps: set[str] = set()
    for position, ex in exchanges:
        result.exchanges += 1
        got = view_or_crash(ex)
        if isinstance(got, Finding):
            unreadable.append((position, got))
            continue
        taps.add(got.tap)
        held.add(position, got)
    held.finish()
    result.taps = sorted(taps)
    result.findings = [f for _, f in sorted(unreadable, key=lambda u: u[0])]
    result.findings.extend(judge_set(held.tap_set, ctx))
    for _, found in sorted(held.judged, key=lambda j: j[0]):
        result.findings.extend(found)
    return result
