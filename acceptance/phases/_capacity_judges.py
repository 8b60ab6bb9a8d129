"""The capacity judges: resources, read from :class:`CapacityFacts`.

What a breach means: preemptions, KV saturation or an engine death are resource faults (scale-up);
queueing with the KV cache not full is a concurrency limit that a rate limit holds (limited); errors
without any resource sign are engine faults (rework).
"""

from __future__ import annotations

from collections.abc import Iterator

from .._catalogue import LIMITED, REWORK, SCALE_UP, Ruling, failed, judge, missing, passed, warned
from ._capacity import CapacityFacts

__all__: list[str] = []


def _too_big(error: str | None) -> bool:
    """The engine refused a prompt for its size: the KV cache (or the context) cannot hold it."""
    e = (error or "").lower()
    return "kv" in e or "longer than" in e


@judge("capacity.metrics", leads_to=(REWORK,), section="Capacity")
def _metrics(f: CapacityFacts) -> Iterator[Ruling]:
    """Engine /metrics scraped

    Without the engine's gauges, KV usage, queueing and preemptions are unknown: no step could be
    told a resource fault from a slow engine. Listed only when the scrape failed."""
    if not f.metrics_urls:
        yield missing("no --metrics-url and no --engine-url: KV usage, queueing and preemptions are unknown")
    elif not f.metrics_answered:
        yield missing(
            f"no /metrics answered at {', '.join(f.metrics_urls)}: KV usage, queueing and preemptions are unknown"
        )


@judge("capacity.load", leads_to=(REWORK,), section="Capacity: load", needs_gpu_host=True)
def _load(f: CapacityFacts) -> Iterator[Ruling]:
    """Engine up and serving after load

    /health answers and a first request is served; the start and weight-load times from the log and
    the host files' GPU memory are recorded beside them."""
    ld = f.load
    first = ld.first
    detail = (
        f"/health {'200' if ld.healthy else 'not ready'}; first request "
        f"{'ok' if first.ok else first.error} in {first.e2e_s:.3f}s"
    )
    if ld.startup:
        detail += f"; startup {ld.startup.get('startup_s')}s, weights {ld.startup.get('weight_load_s')}s"
    if ld.gpu_memory:
        last = ld.gpu_memory[-1]
        detail += f"; GPU memory {last['used_mib']}/{last['total_mib']} MiB"
    yield passed(detail, ld.to_json()) if ld.healthy and first.ok else failed(detail, ld.to_json())


@judge("capacity.long-input", leads_to=(SCALE_UP, REWORK), section="Capacity: long input")
def _long_input(f: CapacityFacts) -> Iterator[Ruling]:
    """The agent sample set at full length

    A long agent history (a system prompt, 24 tools, many turns), or with --samples the team's longest
    requests, one at a time: a prompt the KV cache cannot hold needs more memory (scale-up); any
    other failure is the engine's."""
    rows = f.long_input

    def label(r: dict[str, object]) -> str:
        return f"{r['turns']} turns" if r.get("turns") is not None else f"sample {r.get('sample')}"

    detail = ", ".join(
        f"{label(r)}/{r['prompt_tokens'] or '?'} tok: "
        + (f"TTFT {r['ttft_s']:.3f}s" if r["ok"] and r["ttft_s"] else str(r["error"]))
        for r in rows
    )
    if f.team_samples:
        detail = "the team's longest requests (--samples): " + detail
    failures = [r for r in rows if not r["ok"]]
    if any(_too_big(r["error"]) for r in failures):
        yield failed("the KV cache cannot hold it: " + detail, {"rows": rows}, leads_to=SCALE_UP)
    elif failures:
        yield failed(detail, {"rows": rows}, leads_to=REWORK)
    else:
        yield passed(detail, {"rows": rows})


@judge("capacity.ramp", leads_to=(SCALE_UP, REWORK, LIMITED), section="Capacity: ramp")
def _ramp(f: CapacityFacts) -> Iterator[Ruling]:
    """Concurrency ramp holds the SLO

    Steps of growing concurrency up to the target concurrency must each hold the SLO. A breach at or
    below the target with preemptions, a KV cache 95% full or an engine death needs more resources; with
    errors and no resource sign it is the engine's; queueing with room in the KV cache is a limit that
    a rate limit at the last good step holds."""
    if not f.ramp:
        return
    stopped, knee, target = f.stopped, f.max_good_concurrency, f.target
    ev = {"max_good_concurrency": knee, "target_concurrency": target}
    if stopped is None or (stopped.concurrency or 0) > target:
        above = (
            f"; SLO broken above the target at {stopped.label}: {'; '.join(stopped.breaches)}"
            if stopped
            else ""
        )
        yield passed(f"held up to {knee} (target {target}){above}", ev)
        return
    why = f"{stopped.label}: {'; '.join(stopped.breaches)} (target {target})"
    signs = stopped.resource or (f.resource_steps[0].resource if f.resource_steps else [])
    if signs:
        yield failed(f"{why}; resource faults: {', '.join(signs)}", ev, leads_to=SCALE_UP)
    elif stopped.errors and stopped.error_rate > f.slo.max_error_rate:
        kinds = ", ".join(f"{k} x{v}" for k, v in stopped.error_kinds.items())
        yield failed(f"{why}; errors without a resource sign: {kinds}", ev, leads_to=REWORK)
    else:
        yield failed(
            f"{why}; requests queue (waiting max {stopped.waiting_max}) with the KV cache at {stopped.kv_max}: "
            f"a rate limit at {knee} concurrent requests holds it",
            {**ev, "suggested_limit": knee},
            leads_to=LIMITED,
        )


@judge("capacity.open-loop-lag", leads_to=(), section="Capacity: ramp")
def _open_loop_lag(f: CapacityFacts) -> Iterator[Ruling]:
    """The load client kept to its schedule

    In open loop a client that falls behind offers less load than asked: the step measured a lower
    rate. Use more load machines (Locust workers)."""
    lagging = [s for s in f.ramp if s.fell_behind]
    if lagging:
        lag = max(s.schedule.get("max_lag_s") or 0.0 for s in lagging)
        yield warned(
            f"the client fell behind at {', '.join(s.label for s in lagging)} (max lag {lag}s): "
            "the offered load was lower than asked",
            {"steps": [s.label for s in lagging]},
        )


@judge("capacity.resources", leads_to=(SCALE_UP,), section="Capacity: ramp")
def _resources(f: CapacityFacts) -> Iterator[Ruling]:
    """No resource faults at the target

    Preemptions, a full KV cache or an engine death at or below the target concurrency need more
    resources even where the SLO held. Said by ``capacity.ramp`` when the breach itself showed them."""
    stopped = f.stopped
    if not f.resource_steps or (stopped is not None and (stopped.concurrency or 0) <= f.target):
        return  # none, or the ramp's own failure names them
    yield failed(
        "; ".join(f"{s.label}: {', '.join(s.resource)}" for s in f.resource_steps),
        {"steps": [s.label for s in f.resource_steps]},
    )


@judge("capacity.oom", leads_to=(SCALE_UP,), section="Capacity: OOM")
def _oom(f: CapacityFacts) -> Iterator[Ruling]:
    """No out-of-memory

    An engine that dies under load needs more memory (or smaller limits); the evidence names the
    request sizes, the concurrency, the memory flags, GPU memory before and after, and whether the
    engine came back."""
    if f.oom is not None:
        oom = f.oom
        yield failed(
            f"{oom['step']}: the engine died at concurrency {oom['concurrency']}; {oom['state']}", oom
        )


@judge("capacity.gpu-memory", leads_to=(REWORK,), section="Capacity: GPU memory", needs_gpu_host=True)
def _gpu_memory(f: CapacityFacts) -> Iterator[Ruling]:
    """Per-GPU memory measured through every step

    The go-live checklist asks for a memory curve per GPU through loading, the ramp and any OOM; a
    host file's one snapshot is not one. Needs a DCGM exporter, NVML or nvidia-smi."""
    steps, g = f.steps, f.gpu
    sampled = [s for s in steps if s.gpu_series]
    ev = f.gpu_json()
    if g.source is None:
        yield missing(
            "no GPU source: give --gpu-metrics-url (a DCGM exporter), install nvidia-ml-py on the GPU host, "
            "or run where nvidia-smi is on PATH; a host file's one snapshot is not a memory curve"
        )
    elif not steps or len(sampled) < len(steps) or g.at_load is None:
        yield missing(
            f"{g.source}: {len(sampled)} of {len(steps)} steps sampled"
            + ("" if g.at_load else "; no reading after load"),
            ev,
        )
    else:
        peak = max(s.gpu_used_max_mib or 0 for s in sampled)
        yield passed(
            f"{g.source}: {g.at_load['gpus']} GPUs, {g.at_load['used_mib_max']} of {g.at_load['total_mib']} MiB "
            f"after load, peak {peak} MiB over {len(sampled)} steps",
            ev,
        )


@judge("capacity.soak", leads_to=(SCALE_UP, REWORK), section="Capacity: soak")
def _soak(f: CapacityFacts) -> Iterator[Ruling]:
    """Soak without drift, errors or resource faults

    Cacheable and varied requests alternating, in windows: resource signs or an e2e p50 that drifts
    up from the first window to the last need more resources; errors are the engine's."""
    soak = f.soak
    if soak is None:
        return
    step, drift = soak.step, soak.drift
    detail = f"{step.requests} requests, {step.errors} errors" + (
        f", e2e p50 drift {drift:.2f}x" if drift else ""
    )
    ev = {"drift": drift}
    if step.resource:
        yield failed(f"{detail}; {', '.join(step.resource)}", ev, leads_to=SCALE_UP)
    elif step.error_rate > f.slo.max_error_rate:
        yield failed(detail, ev, leads_to=REWORK)
    elif drift is not None and drift > f.soak_drift_max:
        yield failed(f"{detail} > {f.soak_drift_max}x", ev, leads_to=SCALE_UP)
    else:
        yield passed(detail, ev)
