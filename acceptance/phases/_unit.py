"""The acceptance phases as units: one protocol, one list, typed facts.

Each phase has a ``name``, the check ids it may emit (the catalogue's, by prefix), and ``measure(ctx)``
that returns its typed facts. :func:`judge_facts` then runs the phase's registered judges over them.
The run loop only walks :data:`PHASES`; adding a phase is its facts and ``measure`` (a module), its
judges (a module of ``@judge`` functions), a class here, and its name in ``PHASE_NAMES``.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from .._catalogue import checks
from .._model import Check, Facts, PhaseResult
from . import _cache_judges, _capacity_judges, _compat_judges, _interface_judges  # noqa: F401 - registers judges
from ._cache import measure_cache
from ._capacity import measure_capacity
from ._compat import CompatInputs, measure_compat
from ._context import RunContext
from ._interface import measure_interface

__all__ = ["PHASES", "AcceptancePhase", "judge_facts", "judged", "run_compat"]


def judge_facts(phase: str, facts: Facts) -> list[Check]:
    """Every judge of ``phase`` over ``facts``, in catalogue order: the phase's checks."""
    out = []
    for spec in checks(phase):
        assert spec.func is not None  # a declared check is its judge's
        for r in spec.func(facts):
            out.append(Check(spec.member(r.number), r.status, r.detail, r.evidence, r.leads_to))
    return out


def judged(phase: str, facts: Facts) -> PhaseResult:
    """The phase's result from ``facts``: what a test of recorded facts calls, and the run too."""
    return PhaseResult(phase, facts, judge_facts(phase, facts))


def run_compat(inp: CompatInputs) -> PhaseResult:
    """The compat phase from its evidence files alone (it sends nothing)."""
    return judged("compat", measure_compat(inp))


class AcceptancePhase(Protocol):
    name: ClassVar[str]

    @property
    def checks(self) -> tuple[str, ...]: ...

    async def measure(self, ctx: RunContext) -> Facts: ...


class _Declared:
    name: ClassVar[str] = ""

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(c.id for c in checks(self.name))


class CompatPhase(_Declared):
    name = "compat"

    async def measure(self, ctx: RunContext) -> Facts:
        return ctx.compat  # read before any load, with the run's options


class CapacityPhase(_Declared):
    name = "capacity"

    async def measure(self, ctx: RunContext) -> Facts:
        return await measure_capacity(ctx)


class CachePhase(_Declared):
    name = "cache"

    async def measure(self, ctx: RunContext) -> Facts:
        return await measure_cache(ctx)


class InterfacePhase(_Declared):
    name = "interface"

    async def measure(self, ctx: RunContext) -> Facts:
        return await measure_interface(ctx)


#: in the order they run (``PHASE_NAMES``)
PHASES: tuple[AcceptancePhase, ...] = (CompatPhase(), CapacityPhase(), CachePhase(), InterfacePhase())
