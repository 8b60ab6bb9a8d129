"""One capacity step measured: its requests' figures, the engine's gauges sampled while it ran, the
GPUs' memory through it, and whether the engine survived it.

What a breach of the SLO is (:func:`breaches`) and what counts as a resource sign
(:func:`resource_signs`) are said here, beside the figures they read: the ramp stops at the first
step that breaks the SLO, and the judges read the same lists from the facts.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from .._model import Slo
from ._client import Sample, summarize
from ._drive import LoadCtx, healthy, oom_sign
from ._gpu import GpuSampler, memory_summary
from ._metrics import MetricsSampler, delta, scrape

__all__ = ["Step", "breaches", "measure_step", "resource_signs"]


@dataclass(slots=True, kw_only=True)
class Step:
    label: str
    #: closed loop: the concurrency; open loop: the most requests in flight at once
    concurrency: int | None = None
    wall_s: float = 0.0
    #: the requests' figures (``summarize``): counts, error rate and kinds, TTFT/ITL/TPOT/e2e percentiles
    figures: dict[str, Any] = field(default_factory=dict)
    #: open loop: the schedule kept (rate, interval, lag, late sends, peak in flight, achieved rate)
    schedule: dict[str, Any] = field(default_factory=dict)
    #: the engine's KV and queue gauges, sampled while the step ran
    series: list[dict[str, float | None]] = field(default_factory=list)
    preemptions: float | None = None
    kv_before: float | None = None
    kv_after: float | None = None
    #: every GPU's memory through the step, and the reading before it
    gpu_series: list[dict[str, Any]] = field(default_factory=list)
    gpu_before: dict[str, Any] | None = None
    #: the engine died in the step (an OOM message, or not healthy after errors)
    oom: bool = False
    healthy_after: bool | None = None
    breaches: list[str] = field(default_factory=list)
    resource: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)

    def figure(self, name: str) -> Any:
        return self.figures.get(name)

    @property
    def requests(self) -> int:
        return int(self.figures.get("requests") or 0)

    @property
    def errors(self) -> int:
        return int(self.figures.get("errors") or 0)

    @property
    def error_rate(self) -> float:
        return float(self.figures.get("error_rate") or 0.0)

    @property
    def error_kinds(self) -> dict[str, int]:
        return dict(self.figures.get("error_kinds") or {})

    def _gauge(self, key: str) -> list[float]:
        return [v for r in self.series if (v := r.get(key)) is not None]

    @property
    def kv_max(self) -> float | None:
        kv = self._gauge("kv")
        return round(max(kv), 4) if kv else None

    @property
    def kv_mean(self) -> float | None:
        kv = self._gauge("kv")
        return round(sum(kv) / len(kv), 4) if kv else None

    @property
    def waiting_max(self) -> float | None:
        return max(self._gauge("waiting"), default=None)

    @property
    def gpu_after(self) -> dict[str, Any] | None:
        return memory_summary(self.gpu_series[-1]["gpus"]) if self.gpu_series else None

    @property
    def gpu_used_max_mib(self) -> int | None:
        peaks = [g["used_mib"] for snap in self.gpu_series for g in snap["gpus"]]
        return round(max(peaks)) if peaks else None

    @property
    def fell_behind(self) -> bool:
        return bool(self.schedule.get("fell_behind"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"label": self.label, "wall_s": round(self.wall_s, 3), **self.figures}
        out.update(self.schedule)
        out["throughput_rps"] = round(self.requests / self.wall_s, 3) if self.wall_s > 0 else None
        out.update(
            kv_max=self.kv_max,
            kv_mean=self.kv_mean,
            waiting_max=self.waiting_max,
            running_max=max(self._gauge("running"), default=None),
            preemptions=self.preemptions,
            series=self.series,
            gpu_series=self.gpu_series,
            gpu_before=self.gpu_before,
            gpu_after=self.gpu_after,
            gpu_used_max_mib=self.gpu_used_max_mib,
            oom=self.oom,
        )
        if self.healthy_after is not None:
            out["healthy_after"] = self.healthy_after
        out.update(concurrency=self.concurrency, breaches=self.breaches, resource=self.resource)
        return out


def breaches(step: Step, slo: Slo) -> list[str]:
    """How ``step`` breaks ``slo``: its error rate, and its TTFT, ITL and e2e p95s."""
    out = []
    if step.error_rate > slo.max_error_rate:
        out.append(f"error rate {step.error_rate:.1%} > {slo.max_error_rate:.1%}")
    for key, limit in (
        ("ttft_p95_s", slo.ttft_p95_s),
        ("itl_p95_s", slo.itl_p95_s),
        ("e2e_p95_s", slo.e2e_p95_s),
    ):
        v = step.figure(key)
        if v is not None and v > limit:
            out.append(f"{key.replace('_s', '')} {v:.3f}s > {limit}s")
    return out


def resource_signs(step: Step) -> list[str]:
    """What in ``step`` says resources ran out: an engine death, preemptions, a full KV cache."""
    out = []
    if step.oom:
        out.append("engine died (OOM or crash)")
    if (step.preemptions or 0) > 0:
        out.append(f"{step.preemptions:.0f} preemptions")
    if (step.kv_max or 0) >= 0.95:
        out.append(f"KV cache {step.kv_max:.0%} full")
    return out


async def measure_step(ctx: LoadCtx, label: str, run: Awaitable[Any]) -> Step:
    """Run one step (``run``: a closed- or open-loop driver) with the engine's gauges and every GPU's
    memory sampled through it and scraped before and after."""
    before = await scrape(ctx.client, ctx.metrics_urls) if ctx.metrics_urls else None
    sampler = MetricsSampler(ctx.client, ctx.metrics_urls, ctx.plan.sample_interval_s, ctx.clock)
    # coarser than the engine gauges: GPU memory moves slowly, and an exporter scrape is not free
    gpu = GpuSampler(ctx.client, ctx.gpu_source, max(4 * ctx.plan.sample_interval_s, 0.2), ctx.clock)
    gpu_before = await gpu.sample()
    sampler.start()
    gpu.start()
    t0 = ctx.clock.monotonic()
    try:
        result = await run
    finally:
        series = await sampler.stop()
        gpu_series = await gpu.stop()
    wall = ctx.clock.monotonic() - t0
    after = await scrape(ctx.client, ctx.metrics_urls) if ctx.metrics_urls else None
    samples, schedule = result if isinstance(result, tuple) else (result, {})
    step = Step(
        label=label,
        wall_s=wall,
        figures=summarize(samples),
        schedule=schedule,
        series=series,
        preemptions=delta(before, after, "vllm:num_preemptions_total"),
        kv_before=before.value("vllm:kv_cache_usage_perc") if before else None,
        kv_after=after.value("vllm:kv_cache_usage_perc") if after else None,
        gpu_series=gpu_series,
        gpu_before=memory_summary(gpu_before),
        oom=bool(oom_sign(samples)),
        samples=samples,
    )
    if samples and (step.oom or any((s.status or 0) >= 500 for s in samples)):
        step.healthy_after = await healthy(ctx)
        if step.healthy_after is False:
            step.oom = True  # the engine is dead after the step, with or without an OOM message
    return step
