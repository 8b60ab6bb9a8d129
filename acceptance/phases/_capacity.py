"""The capacity phase: load, long input, a concurrency ramp, a soak, and OOM evidence, measured into
:class:`CapacityFacts` (judged in ``_capacity_judges``).

- load: ``/health``, the first request's latency, GPU memory from the host files, and the start and
  weight-load times from the startup log.
- long input: the agent sample set at growing history lengths, one at a time (or with ``--samples``
  the team's longest requests).
- ramp: closed-loop steps of growing concurrency (or open-loop arrival rates), each held to the SLO;
  it stops at the first step that breaks it. Per step: TTFT, ITL, TPOT and e2e percentiles, errors, the
  engine's ``kv_cache_usage_perc``, ``num_requests_running``, ``num_requests_waiting`` and
  ``num_preemptions_total`` sampled while it runs, and every GPU's memory.
- soak: fixed (cacheable) and varied samples alternating, in windows, for drift, errors and
  preemption growth. It does not run after an engine death.
- OOM: when a step killed the engine, what the checklist asks of it, and whether the engine came back
  within the profile's wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from .._blocks import Block
from .._model import Facts, Slo
from ..load import (
    REQUEST_READ_TIMEOUT_S,
    GpuSampler,
    LoadCtx,
    LocustLoad,
    Sample,
    Step,
    breaches,
    closed_loop,
    healthy,
    make_gpu_source,
    measure_step,
    memory_summary,
    next_body,
    next_spec,
    oom_sign,
    open_loop,
    resource_signs,
    sample_spec,
    scrape,
    send_one,
    summarize,
    workload_data,
)
from ._capacity_report import gpu_table, plots, ramp_table
from ._context import RunContext

__all__ = ["CapacityFacts", "GpuCurve", "LoadStage", "Soak", "measure_capacity"]


@dataclass(slots=True, kw_only=True)
class LoadStage:
    healthy: bool | None
    first: Sample
    #: the host files' one snapshot each (not a curve: ``capacity.gpu-memory`` needs a GPU source)
    gpu_memory: list[dict[str, Any]] = field(default_factory=list)
    startup: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "first_request": self.first.to_json(),
            "gpu_memory": self.gpu_memory,
            "startup": self.startup,
        }


@dataclass(slots=True, kw_only=True)
class Soak:
    step: Step
    #: per window: requests, errors, and the TTFT and e2e p50s
    windows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def drift(self) -> float | None:
        """The e2e p50 of the last window over the first's."""
        if not self.windows:
            return None
        first, last = self.windows[0].get("e2e_p50_s"), self.windows[-1].get("e2e_p50_s")
        return last / first if first and last else None

    def to_json(self) -> dict[str, Any]:
        drift = self.drift
        return {
            **self.step.to_json(),
            "windows": self.windows,
            "drift": None if drift is None else round(drift, 3),
        }


@dataclass(slots=True, kw_only=True)
class GpuCurve:
    """Where GPU memory was read from through the steps (none: not measured)."""

    source: str | None = None
    simulated: bool = False
    #: the reading after load, before the first step
    at_load: dict[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class CapacityFacts(Facts):
    slo: Slo = field(default_factory=Slo)
    #: the concurrency production needs: a breach at or below it fails the ramp
    target: int = 1
    soak_drift_max: float = 1.5
    metrics_urls: list[str] = field(default_factory=list)
    metrics_answered: bool = False
    load: LoadStage
    long_input: list[dict[str, Any]] = field(default_factory=list)
    #: the long-input stage sent the team's requests (``--samples``), not the agent sample set
    team_samples: bool = False
    ramp: list[Step] = field(default_factory=list)
    soak: Soak | None = None
    #: the OOM's evidence, when a step killed the engine
    oom: dict[str, Any] | None = None
    gpu: GpuCurve = field(default_factory=GpuCurve)
    workload: dict[str, Any] = field(default_factory=dict)
    load_engine: dict[str, Any] = field(default_factory=lambda: {"engine": "in-process"})
    samples: list[Sample] = field(default_factory=list)

    @property
    def stopped(self) -> Step | None:
        """The step that broke the SLO (the ramp's last), if one did."""
        return next((s for s in self.ramp if s.breaches), None)

    @property
    def max_good_concurrency(self) -> int:
        return max((s.concurrency or 0 for s in self.ramp if not s.breaches), default=0)

    @property
    def resource_steps(self) -> list[Step]:
        """Steps at or below the target concurrency with a resource sign."""
        return [s for s in self.ramp if s.resource and (s.concurrency or 0) <= max(self.target, 1)]

    @property
    def steps(self) -> list[Step]:
        """Every step GPU memory must be measured through: the ramp's and the soak."""
        return [*self.ramp, *([self.soak.step] if self.soak else [])]

    @property
    def stops_run(self) -> str | None:
        if self.oom is None or self.oom.get("recovered"):
            return None
        return f"the engine died at {self.oom.get('step')} and did not recover within {self.oom.get('recover_wait_s')}s"

    def sent(self) -> list[Any]:
        return self.samples

    def gpu_json(self) -> dict[str, Any]:
        steps = self.steps
        return {
            "source": self.gpu.source,
            "simulated": self.gpu.simulated,
            "at_load": self.gpu.at_load,
            "steps_sampled": sum(1 for s in steps if s.gpu_series),
            "steps": len(steps),
        }

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "load_engine": self.load_engine,
            "load": self.load.to_json(),
            "long_input": self.long_input,
            "ramp": [s.to_json() for s in self.ramp],
            "max_good_concurrency": self.max_good_concurrency,
            "target_concurrency": self.target,
        }
        if self.oom is not None:
            out["oom"] = self.oom
        if self.soak is not None:
            out["soak"] = self.soak.to_json()
        out["gpu"] = self.gpu_json()
        out["workload"] = self.workload
        out["slo"] = {
            "ttft_p95_s": self.slo.ttft_p95_s,
            "itl_p95_s": self.slo.itl_p95_s,
            "e2e_p95_s": self.slo.e2e_p95_s,
            "max_error_rate": self.slo.max_error_rate,
        }
        return out

    def blocks(self) -> list[Block]:
        out: list[Block] = []
        if self.ramp:
            out.append(ramp_table(self.ramp))
        out.append(gpu_table(self.gpu.source, self.steps))
        return out + plots(self.ramp, self.steps, (self.oom or {}).get("step"))

    def suggestions(self) -> dict[str, str]:
        return {"scope": f"rate-limit to at most {self.max_good_concurrency} concurrent requests per engine"}

    def alert_thresholds(self) -> dict[str, float]:
        # twice the deepest queue a step within the SLO saw, at least 1
        seen = [s.waiting_max or 0 for s in self.ramp if not s.breaches]
        return {"waiting": max([1.0, *(2 * float(x) for x in seen)])}

    def evidence(self) -> dict[str, Any]:
        return {"workload": self.workload}

    @classmethod
    def figures_of(cls, data: dict[str, Any]) -> dict[str, dict[str, Any]]:
        keys = ("ttft_p95_s", "e2e_p95_s", "error_rate", "kv_max")
        return {r["label"]: {k: r.get(k) for k in keys} for r in data.get("ramp", [])}

    def simulated_sources(self) -> list[str]:
        return ["GPU metrics from the simulated DCGM exporter"] if self.gpu.simulated else []


def _host_memory(ctx: RunContext) -> list[dict[str, Any]]:
    return [
        {
            "source": h.source,
            "timestamp": h.timestamp,
            "used_mib": h.memory_used_mib,
            "total_mib": h.memory_total_mib,
        }
        for h in ctx.compat.hosts
        if h.memory_total_mib
    ]


async def _long_input(lc: LoadCtx) -> list[dict[str, Any]]:
    """One at a time: the agent sample set at growing history lengths, or with ``--samples`` the
    team's longest requests (as many as the profile has lengths), shortest first."""
    rows = []
    w = lc.workload
    if w is None:
        for turns in lc.plan.long_input_turns:
            lc.progress(f"long input: {turns} turns")
            (s,) = await closed_loop(lc, [next_spec(lc, "long", turns=turns)], 1, f"long input {turns}")
            lc.stage_samples.append(s)
            rows.append({"turns": turns, **s.to_json()})
        return rows
    for i in w.longest(len(lc.plan.long_input_turns)):
        label = f"long input: sample {i + 1} ({w.chars[i]} chars)"
        lc.progress(label)
        (s,) = await closed_loop(lc, [sample_spec(lc, i)], 1, label)
        lc.stage_samples.append(s)
        rows.append({"turns": None, "sample": i + 1, "chars": w.chars[i], **s.to_json()})
    return rows


def _ramp_spec(lc: LoadCtx) -> dict[str, Any]:
    # the team's requests in turn, else a varied agent sample
    return sample_spec(lc) if lc.workload is not None else next_spec(lc, "varied")


async def _ramp(lc: LoadCtx, slo: Slo) -> list[Step]:
    """Steps of growing concurrency (or arrival rate), up to the first that breaks ``slo``."""
    plan = lc.plan
    levels: list[tuple[int, float | None]] = (
        [(0, r) for r in plan.open_loop_rates] if plan.open_loop_rates else [(c, None) for c in plan.ramp]
    )
    steps: list[Step] = []
    for conc, rate in levels:
        if rate is not None:
            label = f"ramp {rate:g} rps"
            specs = [_ramp_spec(lc) for _ in range(plan.open_loop_requests)]
            step = await measure_step(lc, label, open_loop(lc, specs, rate, label))
            step.concurrency = step.schedule.get("peak_in_flight")
        else:
            label = f"ramp c={conc}"
            specs = [_ramp_spec(lc) for _ in range(max(plan.per_worker * conc, plan.min_requests))]
            step = await measure_step(lc, label, closed_loop(lc, specs, conc, label))
            step.concurrency = conc
        lc.stage_samples.extend(step.samples)
        step.breaches, step.resource = breaches(step, slo), resource_signs(step)
        steps.append(step)
        lc.progress(
            f"{label}: TTFT p95 {step.figure('ttft_p95_s')}, e2e p95 {step.figure('e2e_p95_s')}, errors "
            f"{step.errors}, KV max {step.kv_max}, waiting max {step.waiting_max}"
        )
        if step.breaches:
            break
    return steps


async def _soak(lc: LoadCtx) -> Soak:
    plan = lc.plan
    fixed = next_spec(lc, "fixed")
    specs = [
        fixed if i % 2 == 0 else next_spec(lc, "varied", salt=f"[soak {i}] ")
        for i in range(plan.soak_requests)
    ]
    step = await measure_step(lc, "soak", closed_loop(lc, specs, plan.soak_concurrency, "soak"))
    step.resource = resource_signs(step)
    run = step.samples
    w = max(plan.soak_windows, 1)
    size = max(len(run) // w, 1)
    windows = []
    keep = ("requests", "errors", "ttft_p50_s", "e2e_p50_s", "e2e_p95_s")
    for i in range(w):
        part = run[i * size : (i + 1) * size] if i < w - 1 else run[i * size :]
        if part:
            windows.append({"window": i + 1, **{k: v for k, v in summarize(part).items() if k in keep}})
    return Soak(step=step, windows=windows)


async def _oom_evidence(lc: LoadCtx, step: Step, startup: dict[str, Any] | None) -> dict[str, Any]:
    """What the checklist asks of an OOM: the request sizes, the concurrency, the context settings,
    the flags that change memory, GPU memory before and after, and what became of the process."""
    sizes = [s.prompt_tokens for s in lc.samples if s.prompt_tokens]
    deadline = lc.clock.monotonic() + lc.plan.recover_wait_s
    recovered = False
    while lc.clock.monotonic() < deadline:
        if await healthy(lc):
            recovered = (await send_one(lc, next_body(lc, "varied"))).ok
            if recovered:
                break
        await lc.clock.sleep(min(0.2, lc.plan.recover_wait_s / 10))
    flags = (startup or {}).get("flags") or {}
    up = await healthy(lc)
    return {
        "step": step.label,
        "concurrency": step.concurrency,
        "requests_in_step": step.requests,
        "step_wall_s": round(step.wall_s, 3),
        "waiting_max": step.waiting_max,
        "loading_finished": True,  # the load stage served before the ramp began
        "input_tokens_max": max(sizes) if sizes else None,
        "input_tokens_mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
        "request_prompt_tokens_max": max(sizes) if sizes else None,
        "request_prompt_tokens_mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
        "max_output_tokens": lc.plan.max_tokens,
        "max_model_len": flags.get("max_model_len"),
        "prefix_caching": flags.get("enable_prefix_caching"),
        "kv_offload": flags.get("kv_offload"),
        "kv_usage_before": step.kv_before,
        "kv_usage_after": step.kv_after,
        "gpu_memory_before": step.gpu_before,
        "gpu_memory_after": step.gpu_after,
        "gpu_memory_peak_mib": step.gpu_used_max_mib,
        "errors": oom_sign(lc.samples)[:5],
        "recovered": recovered,
        "state": "recovered"
        if recovered
        else ("up but failing requests" if up else "dead (exited or left broken)"),
        "recover_wait_s": lc.plan.recover_wait_s,
    }


async def measure_capacity(ctx: RunContext) -> CapacityFacts:
    """Load, long input, the ramp and the soak against the target; with ``load_engine`` locust, the
    load runs on Locust workers (started here, or waited for at ``locust_master``)."""
    cs = ctx.capacity
    load = None
    if cs.load_engine == "locust":
        load = LocustLoad(
            workers=cs.locust_workers, master=cs.locust_master, expect_workers=cs.locust_expect_workers
        )
        ctx.progress(
            f"capacity: starting Locust ({load.local_workers} local workers, master {load.bind_host}:{load.port})"
        )
        await load.start(ctx.target.url)
    try:
        return await _measure(ctx, load)
    finally:
        if load is not None:
            await load.close()


async def _measure(ctx: RunContext, load: LocustLoad | None) -> CapacityFacts:
    cs, t = ctx.capacity, ctx.target
    source = make_gpu_source(cs.gpu_source, cs.gpu_metrics_urls)
    timeout = httpx.Timeout(REQUEST_READ_TIMEOUT_S, connect=10)
    async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=1024)) as client:
        lc = LoadCtx(
            client,
            t.chat_url,
            t.health_url,
            t.metrics_urls,
            t.model,
            t.headers,
            cs.plan,
            ctx.progress,
            ctx.clock,
        )
        lc.load, lc.gpu_source, lc.workload = load, source, cs.workload
        answered = bool(t.metrics_urls) and await scrape(client, t.metrics_urls) is not None
        at_load = memory_summary(
            await GpuSampler(client, source, cs.plan.sample_interval_s, ctx.clock).sample()
        )
        up = await healthy(lc)
        first = await send_one(lc, next_body(lc, "varied"))
        stage = LoadStage(healthy=up, first=first, gpu_memory=_host_memory(ctx), startup=ctx.compat.startup)
        long_input = await _long_input(lc)
        ramp = await _ramp(lc, cs.slo)
        dead = next((s for s in ramp if s.oom), None)
        oom = await _oom_evidence(lc, dead, ctx.compat.startup) if dead is not None else None
        soak = await _soak(lc) if oom is None else None
    return CapacityFacts(
        slo=cs.slo,
        target=cs.plan.target,
        soak_drift_max=cs.plan.soak_drift_max,
        metrics_urls=list(t.metrics_urls),
        metrics_answered=answered,
        load=stage,
        long_input=long_input,
        team_samples=cs.workload is not None,
        ramp=ramp,
        soak=soak,
        oom=oom,
        gpu=GpuCurve(
            source=getattr(source, "name", None),
            simulated=bool(getattr(source, "simulated", False)),
            at_load=at_load,
        ),
        workload=workload_data(cs.workload, lc.stage_samples, lc.sample_sent),
        load_engine=load.info if load is not None else {"engine": "in-process"},
        samples=lc.samples,
    )
