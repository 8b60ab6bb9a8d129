"""The capacity phase: load, long input, a concurrency ramp, a soak, and OOM evidence.

- load: start and weight-load times from the startup log, GPU memory samples from the host files, and
  the first request's latency.
- long input: the agent sample set at growing history lengths, one at a time.
- ramp: closed-loop steps of growing concurrency (or open-loop arrival rates), each held to the SLO;
  it stops at the first step that breaks it. Per step: TTFT, ITL, TPOT and e2e percentiles, errors, and
  the engine's ``kv_cache_usage_perc``, ``num_requests_running``, ``num_requests_waiting`` and
  ``num_preemptions_total`` sampled while it runs. Open loop reports when the client fell behind.
- soak: fixed and varied samples alternating, in windows, for drift, errors and preemption growth.

What a breach means: preemptions, KV saturation or OOM are resource faults (scale-up); queueing with
the KV cache not full is a concurrency limit that a rate limit holds (limited); errors without any
resource sign are engine faults (rework).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

import httpx

from .._model import CapacityResult, Check, PhaseResult, Slo
from ..evidence import HostFacts
from ..load import (
    REQUEST_READ_TIMEOUT_S,
    CapacityPlan,
    GpuSampler,
    LoadCtx,
    Metrics,
    MetricsSampler,
    Progress,
    Sample,
    closed_loop,
    delta,
    healthy,
    memory_summary,
    next_body,
    next_spec,
    oom_sign,
    open_loop,
    sample_spec,
    scrape,
    send_one,
    summarize,
    workload_data,
)

__all__ = ["CapacityPlan", "run_capacity"]


async def _step(ctx: LoadCtx, label: str, run: Awaitable[Any]) -> dict[str, Any]:
    before = await scrape(ctx.client, ctx.metrics_urls) if ctx.metrics_urls else None
    sampler = MetricsSampler(ctx.client, ctx.metrics_urls, ctx.plan.sample_interval_s)
    # coarser than the engine gauges: GPU memory moves slowly, and an exporter scrape is not free
    gpu = GpuSampler(ctx.client, ctx.gpu_source, max(4 * ctx.plan.sample_interval_s, 0.2))
    gpu_before = await gpu.sample()
    sampler.start()
    gpu.start()
    t0 = time.monotonic()
    try:
        result = await run
    finally:
        series = await sampler.stop()
        gpu_series = await gpu.stop()
    wall = time.monotonic() - t0
    after = await scrape(ctx.client, ctx.metrics_urls) if ctx.metrics_urls else None
    samples, extra = result if isinstance(result, tuple) else (result, {})
    row: dict[str, Any] = {"label": label, "wall_s": round(wall, 3), **summarize(samples), **extra}
    row["throughput_rps"] = round(len(samples) / wall, 3) if wall > 0 else None
    kv: list[float] = [v for r in series if (v := r.get("kv")) is not None]
    waiting: list[float] = [v for r in series if (v := r.get("waiting")) is not None]
    running: list[float] = [v for r in series if (v := r.get("running")) is not None]
    row["kv_max"] = round(max(kv), 4) if kv else None
    row["kv_mean"] = round(sum(kv) / len(kv), 4) if kv else None
    row["waiting_max"] = max(waiting) if waiting else None
    row["running_max"] = max(running) if running else None
    row["preemptions"] = delta(before, after, "vllm:num_preemptions_total")
    row["series"] = series
    # per GPU through the step: the curve, and the reading before and after it
    row["gpu_series"] = gpu_series
    row["gpu_before"] = memory_summary(gpu_before)
    row["gpu_after"] = memory_summary(gpu_series[-1]["gpus"]) if gpu_series else None
    peaks = [g["used_mib"] for snap in gpu_series for g in snap["gpus"]]
    row["gpu_used_max_mib"] = round(max(peaks)) if peaks else None
    oom = oom_sign(samples)
    row["oom"] = bool(oom)
    if samples and (oom or any((s.status or 0) >= 500 for s in samples)):
        row["healthy_after"] = await healthy(ctx)
        if row["healthy_after"] is False:
            row["oom"] = True  # the engine is dead after the step, with or without an OOM message
    row["_before"], row["_after"], row["_samples"] = before, after, samples
    return row


def _breaches(row: dict[str, Any], slo: Slo) -> list[str]:
    out = []
    if row["error_rate"] > slo.max_error_rate:
        out.append(f"error rate {row['error_rate']:.1%} > {slo.max_error_rate:.1%}")
    for key, limit in (
        ("ttft_p95_s", slo.ttft_p95_s),
        ("itl_p95_s", slo.itl_p95_s),
        ("e2e_p95_s", slo.e2e_p95_s),
    ):
        v = row.get(key)
        if v is not None and v > limit:
            out.append(f"{key.replace('_s', '')} {v:.3f}s > {limit}s")
    return out


def _resource_signs(row: dict[str, Any]) -> list[str]:
    out = []
    if row.get("oom"):
        out.append("engine died (OOM or crash)")
    if (row.get("preemptions") or 0) > 0:
        out.append(f"{row['preemptions']:.0f} preemptions")
    if (row.get("kv_max") or 0) >= 0.95:
        out.append(f"KV cache {row['kv_max']:.0%} full")
    return out


def _strip(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_")}


async def _load_phase(
    ctx: LoadCtx, ph: PhaseResult, hosts: list[HostFacts], startup: dict[str, Any] | None
) -> None:
    up = await healthy(ctx)
    first = await send_one(ctx, next_body(ctx, "varied"))
    mem = [
        {
            "source": h.source,
            "timestamp": h.timestamp,
            "used_mib": h.memory_used_mib,
            "total_mib": h.memory_total_mib,
        }
        for h in hosts
        if h.memory_total_mib
    ]
    data = {
        "healthy": up,
        "first_request": first.to_json(),
        "gpu_memory": mem,
        "startup": startup,
    }
    ph.data["load"] = data
    detail = f"/health {'200' if up else 'not ready'}; first request {'ok' if first.ok else first.error} in {first.e2e_s:.3f}s"
    if startup:
        detail += f"; startup {startup.get('startup_s')}s, weights {startup.get('weight_load_s')}s"
    if mem:
        detail += f"; GPU memory {mem[-1]['used_mib']}/{mem[-1]['total_mib']} MiB"
    ok = bool(up) and first.ok
    ph.add(
        Check(
            "capacity.load",
            "Engine up and serving after load",
            "pass" if ok else "fail",
            detail,
            data,
            leads_to="rework",
        )
    )


async def _long_rows(ctx: LoadCtx) -> list[dict[str, Any]]:
    """One at a time: the agent sample set at growing history lengths, or with ``--samples`` the
    team's longest requests (as many as the profile has lengths), shortest first."""
    rows = []
    w = ctx.workload
    if w is None:
        for turns in ctx.plan.long_input_turns:
            ctx.progress(f"long input: {turns} turns")
            (s,) = await closed_loop(ctx, [next_spec(ctx, "long", turns=turns)], 1, f"long input {turns}")
            ctx.stage_samples.append(s)
            rows.append({"turns": turns, **s.to_json()})
        return rows
    for i in w.longest(len(ctx.plan.long_input_turns)):
        label = f"long input: sample {i + 1} ({w.chars[i]} chars)"
        ctx.progress(label)
        (s,) = await closed_loop(ctx, [sample_spec(ctx, i)], 1, label)
        ctx.stage_samples.append(s)
        rows.append({"turns": None, "sample": i + 1, "chars": w.chars[i], **s.to_json()})
    return rows


def _long_label(r: dict[str, Any]) -> str:
    return f"{r['turns']} turns" if r.get("turns") is not None else f"sample {r.get('sample')}"


async def _long_phase(ctx: LoadCtx, ph: PhaseResult) -> None:
    rows = await _long_rows(ctx)
    ph.data["long_input"] = rows
    failed = [r for r in rows if not r["ok"]]
    too_big = [
        r
        for r in failed
        if r["error"] and ("kv" in r["error"].lower() or "longer than" in r["error"].lower())
    ]
    title = (
        "The agent sample set at full length"
        if ctx.workload is None
        else "The team's longest requests (--samples) at full length"
    )
    detail = ", ".join(
        f"{_long_label(r)}/{r['prompt_tokens'] or '?'} tok: "
        + (f"TTFT {r['ttft_s']:.3f}s" if r["ok"] and r["ttft_s"] else str(r["error"]))
        for r in rows
    )
    if too_big:
        ph.add(
            Check(
                "capacity.long-input",
                title,
                "fail",
                "the KV cache cannot hold it: " + detail,
                {"rows": rows},
                leads_to="scale-up",
            )
        )
    elif failed:
        ph.add(
            Check(
                "capacity.long-input",
                title,
                "fail",
                detail,
                {"rows": rows},
                leads_to="rework",
            )
        )
    else:
        ph.add(Check("capacity.long-input", title, "pass", detail, {"rows": rows}))


def _ramp_spec(ctx: LoadCtx) -> dict[str, Any]:
    # the team's requests in turn, else a varied agent sample
    return sample_spec(ctx) if ctx.workload is not None else next_spec(ctx, "varied")


async def _ramp_phase(ctx: LoadCtx, ph: CapacityResult) -> None:
    plan, slo = ctx.plan, ctx.slo
    steps: list[dict[str, Any]] = []
    levels: list[tuple[int, float | None]] = (
        [(0, r) for r in plan.open_loop_rates] if plan.open_loop_rates else [(c, None) for c in plan.ramp]
    )
    stopped: dict[str, Any] | None = None
    for conc, rate in levels:
        if rate is not None:
            label = f"ramp {rate:g} rps"
            specs = [_ramp_spec(ctx) for _ in range(plan.open_loop_requests)]
            row = await _step(ctx, label, open_loop(ctx, specs, rate, label))
        else:
            label = f"ramp c={conc}"
            n = max(plan.per_worker * conc, plan.min_requests)
            specs = [_ramp_spec(ctx) for _ in range(n)]
            row = await _step(ctx, label, closed_loop(ctx, specs, conc, label))
        ctx.stage_samples.extend(row["_samples"])
        row["concurrency"] = conc if rate is None else row.get("peak_in_flight")
        row["breaches"] = _breaches(row, slo)
        row["resource"] = _resource_signs(row)
        steps.append(row)
        ctx.progress(
            f"{label}: TTFT p95 {row['ttft_p95_s']}, e2e p95 {row['e2e_p95_s']}, errors {row['errors']}, "
            f"KV max {row['kv_max']}, waiting max {row['waiting_max']}"
        )
        if row["breaches"]:
            stopped = row
            break
    ph.ramp = ph.data["ramp"] = [_strip(r) for r in steps]
    target = plan.target
    within = [r for r in steps if not r["breaches"]]
    knee = max((r["concurrency"] or 0 for r in within), default=0)
    ph.max_good_concurrency = ph.data["max_good_concurrency"] = knee
    ph.data["target_concurrency"] = target
    resource_rows = [r for r in steps if r["resource"] and (r["concurrency"] or 0) <= max(target, 1)]
    lagging = [r for r in steps if r.get("fell_behind")]
    if lagging:
        ph.add(
            Check(
                "capacity.open-loop-lag",
                "The load client kept to its schedule",
                "warn",
                f"the client fell behind at {', '.join(r['label'] for r in lagging)} (max lag {max(r['max_lag_s'] for r in lagging)}s): the offered load was lower than asked",
                {"steps": [r["label"] for r in lagging]},
            )
        )
    title = f"Concurrency ramp holds the SLO up to {target}"
    if stopped is None or (stopped["concurrency"] or 0) > target:
        msg = f"held up to {knee}" + (
            f"; SLO broken above the target at {stopped['label']}: {'; '.join(stopped['breaches'])}"
            if stopped
            else ""
        )
        ph.add(Check("capacity.ramp", title, "pass", msg, {"max_good_concurrency": knee}))
    else:
        why = f"{stopped['label']}: {'; '.join(stopped['breaches'])}"
        if stopped["resource"] or resource_rows:
            signs = stopped["resource"] or resource_rows[0]["resource"]
            ph.add(
                Check(
                    "capacity.ramp",
                    title,
                    "fail",
                    f"{why}; resource faults: {', '.join(signs)}",
                    {"max_good_concurrency": knee},
                    leads_to="scale-up",
                )
            )
        elif stopped["errors"] and stopped["error_rate"] > slo.max_error_rate:
            kinds = ", ".join(f"{k} x{v}" for k, v in stopped["error_kinds"].items())
            ph.add(
                Check(
                    "capacity.ramp",
                    title,
                    "fail",
                    f"{why}; errors without a resource sign: {kinds}",
                    {"max_good_concurrency": knee},
                    leads_to="rework",
                )
            )
        else:
            waiting = stopped.get("waiting_max")
            ph.add(
                Check(
                    "capacity.ramp",
                    title,
                    "fail",
                    f"{why}; requests queue (waiting max {waiting}) with the KV cache at {stopped.get('kv_max')}: "
                    f"a rate limit at {knee} concurrent requests holds it",
                    {"max_good_concurrency": knee, "suggested_limit": knee},
                    leads_to="limited",
                )
            )
    if resource_rows and not any(c.id == "capacity.ramp" and c.leads_to == "scale-up" for c in ph.checks):
        ph.add(
            Check(
                "capacity.resources",
                "No resource faults at the target concurrency",
                "fail",
                "; ".join(f"{r['label']}: {', '.join(r['resource'])}" for r in resource_rows),
                {"steps": [r["label"] for r in resource_rows]},
                leads_to="scale-up",
            )
        )
    ooms = [r for r in steps if r.get("oom")]
    if ooms:
        r = ooms[0]
        evidence = await _oom_evidence(ctx, r)
        ph.oom = ph.data["oom"] = evidence
        ph.add(
            Check(
                "capacity.oom",
                "No out-of-memory",
                "fail",
                f"{r['label']}: the engine died at concurrency {evidence['concurrency']}; {evidence['state']}",
                evidence,
                leads_to="scale-up",
            )
        )


def _gpu_check(ph: CapacityResult, source: Any, at_load: dict[str, Any] | None) -> None:
    """Per-GPU memory measured through every step, or the item stays open."""
    steps = [*ph.ramp, *([ph.data["soak"]] if "soak" in ph.data else [])]
    sampled = [r for r in steps if r.get("gpu_series")]
    ph.data["gpu"] = {
        "source": getattr(source, "name", None),
        "simulated": bool(getattr(source, "simulated", False)),
        "at_load": at_load,
        "steps_sampled": len(sampled),
        "steps": len(steps),
    }
    title = "Per-GPU memory and utilisation measured through every step"
    if source is None:
        detail = (
            "no GPU source: give --gpu-metrics-url (a DCGM exporter), install nvidia-ml-py on the GPU host, "
            "or run where nvidia-smi is on PATH; a host file's one snapshot is not a memory curve"
        )
        ph.add(Check("capacity.gpu-memory", title, "missing", detail, leads_to="rework"))
    elif not steps or len(sampled) < len(steps) or at_load is None:
        detail = f"{source.name}: {len(sampled)} of {len(steps)} steps sampled" + (
            "" if at_load else "; no reading after load"
        )
        ph.add(Check("capacity.gpu-memory", title, "missing", detail, ph.data["gpu"], leads_to="rework"))
    else:
        peak = max(r.get("gpu_used_max_mib") or 0 for r in sampled)
        detail = (
            f"{source.name}: {at_load['gpus']} GPUs, {at_load['used_mib_max']} of {at_load['total_mib']} MiB "
            f"after load, peak {peak} MiB over {len(sampled)} steps"
        )
        ph.add(Check("capacity.gpu-memory", title, "pass", detail, ph.data["gpu"]))


async def _oom_evidence(ctx: LoadCtx, row: dict[str, Any]) -> dict[str, Any]:
    """What the checklist asks of an OOM: the request sizes, the concurrency, the context settings,
    the flags that change memory, GPU memory before and after, and what became of the process."""
    before: Metrics | None = row.get("_before")
    after: Metrics | None = row.get("_after")
    sizes = [s.prompt_tokens for s in ctx.samples if s.prompt_tokens]
    deadline = time.monotonic() + ctx.plan.recover_wait_s
    recovered = False
    while time.monotonic() < deadline:
        if await healthy(ctx):
            probe = await send_one(ctx, next_body(ctx, "varied"))
            recovered = probe.ok
            if recovered:
                break
        await asyncio.sleep(min(0.2, ctx.plan.recover_wait_s / 10))
    flags = (ctx.startup or {}).get("flags") or {}
    up = await healthy(ctx)
    state = (
        "recovered" if recovered else ("up but failing requests" if up else "dead (exited or left broken)")
    )
    return {
        "step": row["label"],
        "concurrency": row.get("concurrency"),
        "requests_in_step": row.get("requests"),
        "step_wall_s": row.get("wall_s"),
        "waiting_max": row.get("waiting_max"),
        "loading_finished": True,  # the load phase served before the ramp began
        "input_tokens_max": max(sizes) if sizes else None,
        "input_tokens_mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
        "request_prompt_tokens_max": max(sizes) if sizes else None,
        "request_prompt_tokens_mean": round(sum(sizes) / len(sizes), 1) if sizes else None,
        "max_output_tokens": ctx.plan.max_tokens,
        "max_model_len": flags.get("max_model_len"),
        "prefix_caching": flags.get("enable_prefix_caching"),
        "kv_offload": flags.get("kv_offload"),
        "kv_usage_before": before.value("vllm:kv_cache_usage_perc") if before else None,
        "kv_usage_after": after.value("vllm:kv_cache_usage_perc") if after else None,
        "gpu_memory_before": row.get("gpu_before"),
        "gpu_memory_after": row.get("gpu_after"),
        "gpu_memory_peak_mib": row.get("gpu_used_max_mib"),
        "errors": oom_sign(ctx.samples)[:5],
        "recovered": recovered,
        "state": state,
        "recover_wait_s": ctx.plan.recover_wait_s,
    }


async def _soak_phase(ctx: LoadCtx, ph: PhaseResult) -> None:
    plan = ctx.plan
    fixed = next_spec(ctx, "fixed")
    specs = [
        fixed if i % 2 == 0 else next_spec(ctx, "varied", salt=f"[soak {i}] ")
        for i in range(plan.soak_requests)
    ]
    row = await _step(ctx, "soak", closed_loop(ctx, specs, plan.soak_concurrency, "soak"))
    run = list(ctx.samples[-len(specs) :])
    w = max(plan.soak_windows, 1)
    size = max(len(run) // w, 1)
    windows = []
    for i in range(w):
        part = run[i * size : (i + 1) * size] if i < w - 1 else run[i * size :]
        if part:
            windows.append(
                {
                    "window": i + 1,
                    **{
                        k: v
                        for k, v in summarize(part).items()
                        if k in ("requests", "errors", "ttft_p50_s", "e2e_p50_s", "e2e_p95_s")
                    },
                }
            )
    ph.data["soak"] = {**_strip(row), "windows": windows}
    first, last = (windows[0].get("e2e_p50_s"), windows[-1].get("e2e_p50_s")) if windows else (None, None)
    drift = (last / first) if first and last else None
    ph.data["soak"]["drift"] = None if drift is None else round(drift, 3)
    signs = _resource_signs(row)
    detail = (
        f"{row['requests']} requests, {row['errors']} errors, e2e p50 drift {drift:.2f}x"
        if drift
        else f"{row['requests']} requests, {row['errors']} errors"
    )
    if signs:
        ph.add(
            Check(
                "capacity.soak",
                "Soak without drift, errors or resource faults",
                "fail",
                f"{detail}; {', '.join(signs)}",
                {"drift": drift},
                leads_to="scale-up",
            )
        )
    elif row["error_rate"] > ctx.slo.max_error_rate:
        ph.add(
            Check(
                "capacity.soak",
                "Soak without drift, errors or resource faults",
                "fail",
                detail,
                {"drift": drift},
                leads_to="rework",
            )
        )
    elif drift is not None and drift > plan.soak_drift_max:
        ph.add(
            Check(
                "capacity.soak",
                "Soak without drift, errors or resource faults",
                "fail",
                f"{detail} > {plan.soak_drift_max}x",
                {"drift": drift},
                leads_to="scale-up",
            )
        )
    else:
        ph.add(
            Check(
                "capacity.soak",
                "Soak without drift, errors or resource faults",
                "pass",
                detail,
                {"drift": drift},
            )
        )


async def run_capacity(
    *,
    target: str,
    health_url: str,
    metrics_urls: list[str],
    model: str | None,
    headers: dict[str, str],
    slo: Slo,
    plan: CapacityPlan,
    hosts: list[HostFacts],
    startup: dict[str, Any] | None,
    progress: Progress,
    load: Any = None,
    gpu_source: Any = None,
    workload: Any = None,
) -> tuple[CapacityResult, list[Sample]]:
    """``load``: a started :class:`LocustLoad` to run the load on Locust workers (else in process);
    ``workload``: the team's requests (``--samples``) for the long-input and ramp stages."""
    ph = CapacityResult("capacity")
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(REQUEST_READ_TIMEOUT_S, connect=10), limits=httpx.Limits(max_connections=1024)
    ) as client:
        ctx = LoadCtx(
            client,
            target.rstrip("/") + "/v1/chat/completions",
            health_url,
            metrics_urls,
            model,
            headers,
            slo,
            plan,
            progress,
        )
        ctx.load, ctx.gpu_source, ctx.startup, ctx.workload = load, gpu_source, startup, workload
        ph.data["load_engine"] = load.info if load is not None else {"engine": "in-process"}
        if not metrics_urls:
            ph.add(
                Check(
                    "capacity.metrics",
                    "Engine /metrics scraped",
                    "missing",
                    "no --metrics-url and no --engine-url: KV usage, queueing and preemptions are unknown",
                    leads_to="rework",
                )
            )
        elif await scrape(client, metrics_urls) is None:
            ph.add(
                Check(
                    "capacity.metrics",
                    "Engine /metrics scraped",
                    "missing",
                    f"no /metrics answered at {', '.join(metrics_urls)}: KV usage, queueing and preemptions are unknown",
                    leads_to="rework",
                )
            )
        load_gpu = await GpuSampler(client, gpu_source, plan.sample_interval_s).sample()
        await _load_phase(ctx, ph, hosts, startup)
        await _long_phase(ctx, ph)
        await _ramp_phase(ctx, ph)
        if ph.oom is None:
            await _soak_phase(ctx, ph)
        _gpu_check(ph, gpu_source, memory_summary(load_gpu))
        ph.data["workload"] = workload_data(workload, ctx.stage_samples, ctx.sample_sent)
        ph.data["slo"] = {
            "ttft_p95_s": slo.ttft_p95_s,
            "itl_p95_s": slo.itl_p95_s,
            "e2e_p95_s": slo.e2e_p95_s,
            "max_error_rate": slo.max_error_rate,
        }
    return ph, ctx.samples
