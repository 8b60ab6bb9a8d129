"""Driving the capacity load: the plan, and closed-loop and open-loop steps, in process or on Locust
workers. A closed loop keeps ``concurrency`` requests in flight; an open loop sends at a fixed rate
whatever the answers do, and records how late each send was."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .._clock import SYSTEM_CLOCK, Clock
from ._client import Sample, measure
from ._workload import capacity_body, spec

__all__ = [
    "OOM_WORDS",
    "CapacityPlan",
    "LoadCtx",
    "Progress",
    "closed_loop",
    "healthy",
    "next_body",
    "next_spec",
    "oom_sign",
    "open_loop",
    "sample_spec",
    "send_one",
]

Progress = Callable[[str], None]
OOM_WORDS = ("out of memory", "oom", "cuda error")


@dataclass(slots=True)
class CapacityPlan:
    ramp: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    #: requests per concurrency step: max(per_worker * concurrency, min_requests)
    per_worker: int = 2
    min_requests: int = 4
    #: the concurrency production needs; a breach at or below it fails the phase
    target_concurrency: int | None = None
    #: open loop: arrival rates (requests/s) per step instead of concurrency
    open_loop_rates: list[float] | None = None
    open_loop_requests: int = 16
    long_input_turns: list[int] = field(default_factory=lambda: [12, 48])
    soak_requests: int = 24
    soak_concurrency: int = 2
    soak_windows: int = 3
    soak_drift_max: float = 1.5
    recover_wait_s: float = 5.0
    sample_interval_s: float = 0.05
    max_tokens: int = 256

    @property
    def target(self) -> int:
        return self.target_concurrency or max(self.ramp)


@dataclass(slots=True)
class LoadCtx:
    client: httpx.AsyncClient
    chat_url: str
    health_url: str
    metrics_urls: list[str]
    model: str | None
    headers: dict[str, str]
    plan: CapacityPlan
    progress: Progress
    clock: Clock = SYSTEM_CLOCK
    seq: int = 0
    samples: list[Sample] = field(default_factory=list)
    #: the Locust load engine, when the load runs on Locust workers (else in this process)
    load: Any = None
    #: where GPU memory is read from through every step (``_gpu``); None: not measured
    gpu_source: Any = None
    #: ``--samples``: the team's requests, sent by the long-input and ramp stages (``_samples``)
    workload: Any = None
    #: the team's requests sent so far, by index (the report says whether the ramp cycled them)
    sample_sent: list[int] = field(default_factory=list)
    sample_cursor: int = 0
    #: what the long-input and ramp stages sent, for the workload's input-size distribution
    stage_samples: list[Sample] = field(default_factory=list)


def next_spec(ctx: LoadCtx, kind: str, turns: int = 2, salt: str = "") -> dict[str, Any]:
    ctx.seq += 1
    return spec(kind, ctx.seq, turns=turns, salt=salt, model=ctx.model, max_tokens=ctx.plan.max_tokens)


def sample_spec(ctx: LoadCtx, index: int | None = None) -> dict[str, Any]:
    """The team's request ``index``, or the next one in turn: the ramp cycles through the whole file
    across its steps rather than starting each step at the first request."""
    n = len(ctx.workload.bodies)
    if index is None:
        index, ctx.sample_cursor = ctx.sample_cursor, ctx.sample_cursor + 1
    i = index % n
    ctx.sample_sent.append(i)
    ctx.seq += 1
    return spec(
        "sample", ctx.seq, model=ctx.model, max_tokens=ctx.plan.max_tokens, body=ctx.workload.bodies[i]
    )


def next_body(ctx: LoadCtx, kind: str, turns: int = 2, salt: str = "") -> dict[str, Any]:
    return capacity_body(next_spec(ctx, kind, turns, salt))


async def send_one(ctx: LoadCtx, body: dict[str, Any]) -> Sample:
    s = await measure(ctx.client, ctx.chat_url, body, headers=ctx.headers, clock=ctx.clock)
    ctx.samples.append(s)
    return s


async def closed_loop(
    ctx: LoadCtx, specs: list[dict[str, Any]], concurrency: int, label: str
) -> list[Sample]:
    if ctx.load is not None:
        got: list[Sample] = await ctx.load.step(
            label, specs, url=ctx.chat_url, headers=ctx.headers, users=concurrency
        )
        ctx.samples.extend(got)
        return got
    bodies = [capacity_body(sp) for sp in specs]
    queue = list(reversed(bodies))
    out: list[Sample] = []
    done = 0

    async def worker() -> None:
        nonlocal done
        while queue:
            body = queue.pop()
            out.append(await send_one(ctx, body))
            done += 1
            ctx.progress(f"{label}: {done}/{len(bodies)}")

    await asyncio.gather(*(worker() for _ in range(max(concurrency, 1))))
    return out


def schedule_stats(samples: list[Sample], rate: float, wall: float) -> dict[str, Any]:
    interval = 1.0 / rate
    lags = [s.lag_s for s in samples]
    tolerance = max(0.1 * interval, 0.005)
    behind = [x for x in lags if x > tolerance]
    spans = sorted([(s.started_s, 1) for s in samples] + [(s.started_s + s.e2e_s, -1) for s in samples])
    peak = level = 0
    for _, d in spans:
        level += d
        peak = max(peak, level)
    return {
        "rate_rps": rate,
        "interval_s": round(interval, 6),
        "max_lag_s": round(max(lags, default=0.0), 6),
        "late_sends": len(behind),
        "fell_behind": bool(behind),
        "peak_in_flight": peak,
        "achieved_rps": round(len(samples) / max(wall, 1e-9), 3),
    }


async def open_loop(
    ctx: LoadCtx, specs: list[dict[str, Any]], rate: float, label: str
) -> tuple[list[Sample], dict[str, Any]]:
    """Send at fixed intervals whatever the answers do; record how late each send was."""
    if ctx.load is not None:
        t_start = ctx.clock.monotonic()
        got: list[Sample] = await ctx.load.step(
            label, specs, url=ctx.chat_url, headers=ctx.headers, users=len(specs), rate=rate
        )
        ctx.samples.extend(got)
        return got, schedule_stats(got, rate, ctx.clock.monotonic() - t_start)
    bodies = [capacity_body(sp) for sp in specs]
    interval = 1.0 / rate
    clock = ctx.clock
    t0 = clock.monotonic()
    tasks: list[asyncio.Task[Sample]] = []
    lags: list[float] = []
    in_flight = peak = 0

    async def fire(body: dict[str, Any], lag: float) -> Sample:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            s = await send_one(ctx, body)
            s.lag_s = lag
            return s
        finally:
            in_flight -= 1

    for i, body in enumerate(bodies):
        due = t0 + i * interval
        now = clock.monotonic()
        if due > now:
            await clock.sleep(due - now)
        lag = max(clock.monotonic() - due, 0.0)
        lags.append(lag)
        tasks.append(asyncio.ensure_future(fire(body, lag)))
        ctx.progress(f"{label}: sent {i + 1}/{len(bodies)}")
    samples = list(await asyncio.gather(*tasks))
    stats = schedule_stats(samples, rate, clock.monotonic() - t0)
    stats["peak_in_flight"] = max(stats["peak_in_flight"], peak)
    return samples, stats


def oom_sign(samples: list[Sample]) -> list[str]:
    return [s.error for s in samples if s.error and any(w in s.error.lower() for w in OOM_WORDS)]


async def healthy(ctx: LoadCtx) -> bool | None:
    try:
        r = await ctx.client.get(ctx.health_url, timeout=5)
    except httpx.HTTPError:
        return False
    return r.status_code == 200
