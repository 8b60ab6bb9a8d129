"""The acceptance phases as units: one protocol, one list, typed results.

Each phase has a ``name``, the check ids it may emit (declared in ``_catalogue``), and ``run(ctx)`` that
returns its typed :class:`PhaseResult`. The run loop in ``_run`` only walks :data:`PHASES`; adding a phase
is a class here, its checks in the catalogue, and its name in ``PHASE_NAMES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from wirecheck.contracts import Exchange

from .._catalogue import CHECKS
from .._model import CapacityResult, CompatResult, InterfaceResult, PhaseResult
from ..evidence import HostFacts
from ..load import CapacityPlan, Sample, Workload, make_gpu_source
from ._cache import run_cache
from ._capacity import run_capacity
from ._compat import CompatInputs
from ._interface import run_interface

if TYPE_CHECKING:
    from .._run import AcceptOptions

__all__ = ["PHASES", "AcceptancePhase", "RunContext"]


@dataclass(slots=True)
class RunContext:
    """What every phase may read: the options, the discovered engine, the evidence read up front, and
    the results of the phases that ran before it (typed: ``compat``, ``capacity``, ``interface``)."""

    opts: AcceptOptions
    plan: CapacityPlan
    model: str | None
    family: str
    hosts: list[HostFacts]
    compat_inputs: CompatInputs
    #: the compat phase's result, computed before any load (it also validates the evidence files)
    compat_result: CompatResult
    health_url: str
    metrics_urls: list[str]
    interface_requests: int
    retries: int
    scenario_examples: int
    progress: Callable[[str], None]
    #: ``--samples``: the team's requests, read and checked before any load
    workload: Workload | None = None
    results: dict[str, PhaseResult] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def through_gateway(self) -> bool:
        """The target is not the engine (a gateway or proxy sits between), as the options say."""
        o = self.opts
        return o.engine_url is not None and o.target.rstrip("/") != o.engine_url.rstrip("/")

    @property
    def capacity(self) -> CapacityResult | None:
        r = self.results.get("capacity")
        return r if isinstance(r, CapacityResult) else None

    @property
    def interface(self) -> InterfaceResult | None:
        r = self.results.get("interface")
        return r if isinstance(r, InterfaceResult) else None

    @property
    def compat(self) -> CompatResult | None:
        r = self.results.get("compat")
        return r if isinstance(r, CompatResult) else None


class AcceptancePhase(Protocol):
    name: ClassVar[str]

    @property
    def checks(self) -> tuple[str, ...]: ...

    async def run(self, ctx: RunContext) -> PhaseResult: ...


class _Declared:
    name: ClassVar[str] = ""

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(c.id for c in CHECKS if c.phase == self.name)


class CompatPhase(_Declared):
    name = "compat"

    async def run(self, ctx: RunContext) -> PhaseResult:
        return ctx.compat_result


class CapacityPhase(_Declared):
    name = "capacity"

    async def run(self, ctx: RunContext) -> PhaseResult:
        opts, load = ctx.opts, None
        if opts.load_engine == "locust":
            from ..load import LocustLoad

            load = LocustLoad(
                workers=opts.locust_workers,
                master=opts.locust_master,
                expect_workers=opts.locust_expect_workers,
            )
            ctx.progress(
                f"capacity: starting Locust ({load.local_workers} local workers, master {load.bind_host}:{load.port})"
            )
            await load.start(opts.target)
        try:
            ph, got = await run_capacity(
                target=opts.target,
                health_url=ctx.health_url,
                metrics_urls=ctx.metrics_urls,
                model=ctx.model,
                headers=opts.headers,
                slo=opts.slo,
                plan=ctx.plan,
                hosts=ctx.hosts,
                startup=ctx.compat_result.startup,
                progress=ctx.progress,
                load=load,
                gpu_source=make_gpu_source(opts.gpu_source, opts.gpu_metrics_urls),
                workload=ctx.workload,
            )
        finally:
            if load is not None:
                await load.close()
        ctx.samples += got
        return ph


class CachePhase(_Declared):
    name = "cache"

    async def run(self, ctx: RunContext) -> PhaseResult:
        ph, got = await run_cache(
            target=ctx.opts.target,
            engine_url=ctx.opts.engine_url,
            metrics_urls=ctx.metrics_urls,
            model=ctx.model,
            headers=ctx.opts.headers,
            progress=ctx.progress,
            family=ctx.family,
            retention_interval=((ctx.compat_result.startup or {}).get("flags") or {}).get(
                "prefix_cache_retention_interval"
            ),
        )
        ctx.samples += got
        return ph


class InterfacePhase(_Declared):
    name = "interface"

    async def run(self, ctx: RunContext) -> PhaseResult:
        family = ctx.family  # the one detector's answer, generic included
        ph, got = await run_interface(
            target=ctx.opts.target,
            model=ctx.model,
            headers=ctx.opts.headers,
            requests=ctx.interface_requests,
            retries=ctx.retries,
            scenario_examples=ctx.scenario_examples,
            seed=ctx.opts.seed,
            limits=ctx.opts.limits,
            taps=ctx.opts.taps,
            family=family,
            progress=ctx.progress,
            through_gateway=ctx.through_gateway,
        )
        ctx.samples += got
        ctx.exchanges += [s.exchange for s in got if s.exchange is not None]
        return ph


PHASES: tuple[AcceptancePhase, ...] = (CompatPhase(), CapacityPhase(), CachePhase(), InterfacePhase())
