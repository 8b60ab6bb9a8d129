"""Which of the exchanges around a live batch may change its findings, when they come from several taps
that do not all pair by correlation id (a gateway that drops ``x-wirecheck-id``).

Any exchange of another tap within ``NEIGHBOUR_S`` may then be a caller or engine side of one in the
batch, so the live checker once read the whole window at once: at 640 exchanges a second of long
streams, gigabytes. But an exchange can only pair with one that shares one of its kin keys
(``contracts.kin_keys``: a correlation id, a completion id, a part of the request, a twin key), and
pairing is greedy only among such exchanges: the batch's *group*, the exchanges reached from it by
shared keys, transitively (an exchange's wanted keys meet another's own keys), judges the batch as
the whole window does (``contracts._check.judge`` states it). So the checker pages through the
window, notes each exchange's :class:`Kin` (a few integers; kept between batches, see
``Recent.keep_kin``), lets the views go, and loads only the group.

The group of one prompt sent thousands of times through such a gateway is the whole window: it is
bounded in bytes too (``GROUP_BYTES``), keeping the members nearest the batch in time (a pair's two
sides start milliseconds apart), and what was left out is counted (the checker's ``cut``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from wirecheck.contracts import CALLER, ENGINE, ExchangeView, kin_keys, native

__all__ = ["Kin", "KinIndex", "kin_of", "nearest", "unreadable"]


@dataclass(slots=True, frozen=True)
class Kin:
    """What the live checker keeps of an exchange of a window to find a batch's group: its row, tap,
    start, recorded bytes, whether it is an agent exchange (what the set rules count), and the hashes
    of its own and wanted kin keys. A hash that two keys share joins two groups that need not be:
    more is loaded, nothing is missed."""

    row: tuple[str, Any]  # (id, version)
    tap: str
    start: float | None
    size: int
    agent: bool
    own: tuple[int, ...]
    wanted: tuple[int, ...]


def kin_of(view: ExchangeView, version: Any, size: int) -> Kin:
    own, wanted = kin_keys(view)
    return Kin(
        (view.id, version),
        view.tap,
        view.ex.started_epoch,
        size,
        view.is_agent,
        tuple(hash(k) for k in own),
        tuple(hash(k) for k in wanted),
    )


def unreadable(exchange_id: str, version: Any, tap: str, start: float | None, size: int) -> Kin:
    """The kin of an exchange that cannot be read (its view fails): it pairs with nothing."""
    return Kin((exchange_id, version), tap, start, size, False, (), ())


class KinIndex:
    """The kin of a window's exchanges (but the batch's), indexed by their own keys."""

    def __init__(self, kin: list[Kin]) -> None:
        self.kin = kin
        self._owners: dict[int, list[int]] = _owners(kin)
        self._keys_seen: set[int] = set()
        self._taken: set[int] = set()

    def reach(self, wanted: Iterable[int]) -> list[int]:
        """The exchanges (positions in ``kin``) reached from these wanted keys, transitively, that an
        earlier call did not reach (kin keys are symmetric: when one exchange wants a key another
        owns, the other wants one the first owns, so each group is found whole from any member)."""
        stack = list(wanted)
        out: list[int] = []
        seen, taken, owners, kin = self._keys_seen, self._taken, self._owners, self.kin
        while stack:
            h = stack.pop()
            if h in seen:
                continue
            seen.add(h)
            for n in owners.get(h, ()):
                if n not in taken:
                    taken.add(n)
                    out.append(n)
                    stack.extend(kin[n].wanted)
        return out

    def others(self) -> Iterator[list[int]]:
        """The groups not reached yet that hold both a caller and an engine side (only those may
        pair), in the window's order of their first member."""
        for n in range(len(self.kin)):
            if n in self._taken:
                continue
            self._taken.add(n)
            members = [n, *self.reach(self.kin[n].wanted)]
            taps = {self.kin[m].tap for m in members}
            if CALLER in taps and ENGINE in taps:
                yield sorted(members)

    def cross(self, members: list[int]) -> Iterator[tuple[int, int]]:
        """The (caller side, engine side) of these members that share a kin key (only those may
        pair), each caller side's nearest in time first."""
        kin, inside = self.kin, set(members)
        for c in members:
            caller = kin[c]
            if caller.tap != CALLER:
                continue
            engines = {
                m
                for h in caller.wanted
                for m in self._owners.get(h, ())
                if m in inside and kin[m].tap == ENGINE
            }
            yield from ((c, m) for m in sorted(engines, key=lambda m: (_apart(caller, kin[m]), m)))


def _owners_py(kin: list[Kin]) -> dict[int, list[int]]:
    """The positions of these kin by each of their own keys' hashes, in order: the reference of the
    compiled twin (proxy/_kin_c.c), which takes a window's thousands in one pass."""
    owners: dict[int, list[int]] = {}
    for n, k in enumerate(kin):
        if type(k.own) is not tuple:
            raise TypeError("a kin's own keys are a tuple")
        for h in k.own:
            if type(h) is not int:
                raise TypeError("a kin key's hash is an int")
            owners.setdefault(h, []).append(n)
    return owners


_native = native("wirecheck.proxy._kin_c")
_owners = _native.owners if _native is not None else _owners_py


def _apart(a: Kin, b: Kin) -> float:
    return abs(a.start - b.start) if a.start is not None and b.start is not None else 0.0


def nearest(kin: list[Kin], members: list[int], lo: float, hi: float, budget: int) -> tuple[list[int], int]:
    """Of these members, the nearest in time to ``[lo, hi]`` (the batch's starts) that fit in
    ``budget`` recorded bytes together: each in turn, nearest first, is kept where it fits (one
    without a start may pair with any: nearest), in their order; and how many were left out."""

    def distance(n: int) -> float:
        start = kin[n].start
        return 0.0 if start is None else max(0.0, lo - start, start - hi)

    used = 0
    kept: list[int] = []
    for n in sorted(members, key=lambda m: (distance(m), m)):
        if used + kin[n].size <= budget:
            used += kin[n].size
            kept.append(n)
    return sorted(kept), len(members) - len(kept)
