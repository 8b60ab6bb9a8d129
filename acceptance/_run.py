"""``accept``: read the evidence, ask the engine what it is, measure each phase and judge its facts,
decide, and write the report folder.

The run reads its clock through ``clock`` (``_clock``): the report's times and the phases' schedules
come from it. Everything after measuring (judging, deciding, the report) reads only the facts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from wirecheck._errors import TransportError
from wirecheck.contracts import write_exchanges

from ._clock import SYSTEM_CLOCK, Clock, stamp
from ._conclude import conclude, with_checklist
from ._discover import EngineInfo, discover
from ._model import PhaseResult, Verdict
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
from .report import Report, write_reports

__all__ = ["AcceptanceResult", "accept", "report_run", "run_acceptance"]


@dataclass(slots=True)
class AcceptanceResult:
    verdict: Verdict
    phases: list[PhaseResult]
    #: report.json
    report: dict[str, Any]
    files: dict[str, str]
    document: Report


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


def _write(opts: AcceptOptions, report: Report, phases: list[PhaseResult]) -> None:
    out = opts.out
    out.mkdir(parents=True, exist_ok=True)
    report.files = {
        "markdown": str(out / "report.md"),
        "html": str(out / "report.html"),
        "json": str(out / "report.json"),
        "alerts": str(out / "alerts.yml"),
        "dashboard": str(out / "grafana-dashboard.json"),
        "samples": str(out / "samples.jsonl"),
    }
    exchanges = [x for ph in phases if ph.facts is not None for x in ph.facts.recorded()]
    if exchanges:
        report.files["exchanges"] = str(out / "interface.jsonl")
        with open(report.files["exchanges"], "w", encoding="utf-8") as fh:
            write_exchanges(exchanges, fh, redaction=opts.written_redaction())
    with_checklist(report)
    with open(report.files["samples"], "w", encoding="utf-8") as fh:
        for ph in phases:
            for s in ph.facts.sent() if ph.facts is not None else []:
                fh.write(json.dumps(s.to_json()) + "\n")
    write_reports(report)


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


def report_run(
    opts: AcceptOptions,
    engine: EngineInfo,
    compat: CompatFacts,
    phases: list[PhaseResult],
    *,
    started: float,
    finished: float,
    metrics: list[str],
    workload: Workload | None = None,
) -> AcceptanceResult:
    """Decide from judged phases and write the report folder: a run's last step, and all a test of
    recorded facts needs (``started``, ``finished``: the run's clock, seconds since the epoch)."""
    report = conclude(
        opts, engine, compat, phases, started=started, finished=finished, metrics=metrics, workload=workload
    )
    _write(opts, report, phases)
    return AcceptanceResult(report.verdict, phases, report.to_json(), report.files, report)


def accept(
    opts: AcceptOptions, progress: Callable[[str], None] | None = None, *, clock: Clock = SYSTEM_CLOCK
) -> AcceptanceResult:
    return asyncio.run(run_acceptance(opts, progress, clock=clock))
