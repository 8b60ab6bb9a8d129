"""``accept``: read the evidence, ask the engine what it is, measure each phase and judge its facts,
decide, and write the report folder.

The run reads its clock through ``clock`` (``_clock``): the report's times and the phases' schedules
come from it. Everything after measuring (judging, deciding, the report) reads only the facts.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

import httpx

from wirecheck._errors import TransportError

from ._clock import SYSTEM_CLOCK, Clock, stamp
from ._conclude import AcceptanceResult, report_run
from ._discover import EngineInfo, discover
from ._model import PhaseResult
from ._options import PROFILES, AcceptOptions
from ._progress import Progress
from .evidence import read_host
from .load import Workload, load_workload
from .phases import (
    PHASES,
    CapacitySettings,
    CompatFacts,
    CompatInputs,
    InterfaceSettings,
    RunContext,
    Target,
    judged,
    measure_compat,
)

__all__ = ["accept", "run_acceptance"]


def _capacity(opts: AcceptOptions, workload: Workload | None) -> CapacitySettings:
    # a copy: the options below must not change the profile for the next run in this process
    plan = dataclasses.replace(opts.plan or PROFILES[opts.profile].capacity)
    if opts.target_concurrency:
        plan.target_concurrency = opts.target_concurrency
    if opts.open_loop_rates:
        plan.open_loop_rates = opts.open_loop_rates
    return CapacitySettings(
        plan=plan,
        slo=opts.slo,
        load_engine=opts.load_engine,
        locust_workers=opts.locust_workers,
        locust_master=opts.locust_master,
        locust_expect_workers=opts.locust_expect_workers,
        gpu_source=opts.gpu_source,
        gpu_metrics_urls=list(opts.gpu_metrics_urls),
        workload=workload,
    )


def _interface(opts: AcceptOptions) -> InterfaceSettings:
    profile = PROFILES[opts.profile]
    return InterfaceSettings(
        requests=opts.interface_requests or profile.interface_requests,
        retries=profile.retries,
        scenario_examples=profile.scenario_examples
        if opts.scenario_examples is None
        else opts.scenario_examples,
        seed=opts.seed,
        max_retry_rate=opts.limits.max_retry_rate,
        taps=opts.taps,
    )


def _compat(opts: AcceptOptions, engine: EngineInfo, family: str, hosts: list[Any]) -> CompatFacts:
    # read even when compat is not among the phases run: a bad evidence file stops the run here
    return measure_compat(
        CompatInputs(
            host_files=opts.host_files,
            hosts=hosts,
            container_file=opts.container_file,
            startup_log=opts.startup_log,
            official_image=opts.official_image,
            self_built=opts.self_built,
            family=family,
            version=engine.version,
            fingerprint=engine.fingerprint,
            ack_warnings=opts.ack_warnings,
            more_startup_logs=opts.more_startup_logs,
            topology_files=opts.topology_files,
        )
    )


async def _phases(ctx: RunContext, selected: list[str], progress: Callable[[str], None]) -> list[PhaseResult]:
    """Each selected phase measured and judged, in order; after one whose facts stop the run (the
    engine died), the rest are blocked, neither passed nor failed."""
    results: list[PhaseResult] = []
    stop: str | None = None
    for unit in PHASES:
        if unit.name not in selected:
            continue
        progress(f"phase {unit.name} ...")
        t0, started = ctx.clock.monotonic(), stamp(ctx.clock.now())
        if stop is not None:
            ph = PhaseResult(unit.name, blocked=stop)
        else:
            try:
                ph = judged(unit.name, await unit.measure(ctx))
            except (httpx.HTTPError, OSError, TransportError) as exc:
                ph = PhaseResult(unit.name, error=f"{type(exc).__name__}: {exc}")
        ph.started_at, ph.duration_s = started, ctx.clock.monotonic() - t0
        stop = stop or (ph.facts.stops_run if ph.facts is not None else None)
        results.append(ph)
        if isinstance(progress, Progress):
            progress.done()
        progress(f"phase {unit.name}: {ph.status} ({ph.duration_s:.1f}s)")
    return results


async def run_acceptance(
    opts: AcceptOptions, progress: Callable[[str], None] | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> AcceptanceResult:
    prog = progress or Progress(clock=clock)
    started = clock.now()
    metrics = opts.metrics_urls or ([opts.engine_url.rstrip("/") + "/metrics"] if opts.engine_url else [])
    # every evidence file is read first: a bad one stops the run before any load is sent
    hosts = [read_host(p) for p in opts.host_files]
    shown = opts.written_redaction()
    workload = load_workload(opts.samples, opts.target, redaction=shown) if opts.samples else None
    engine = await discover(opts.target, opts.engine_url, opts.headers, opts.model)
    family = opts.family_of(engine.model)
    compat = _compat(opts, engine, family, hosts)
    ctx = RunContext(
        target=Target(
            url=opts.target,
            engine_url=opts.engine_url,
            headers=opts.headers,
            model=engine.model,
            family=family,
            metrics_urls=metrics,
        ),
        compat=compat,
        capacity=_capacity(opts, workload),
        interface=_interface(opts),
        clock=clock,
        progress=prog,
    )
    phases = await _phases(ctx, opts.phases, prog)
    return report_run(
        opts,
        engine,
        compat,
        phases,
        started=started,
        finished=clock.now(),
        metrics=metrics,
        workload=workload,
    )


def accept(
    opts: AcceptOptions, progress: Callable[[str], None] | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> AcceptanceResult:
    return asyncio.run(run_acceptance(opts, progress, clock=clock))
