"""What the report shows of the capacity facts beyond the checks: the ramp's figures per step, GPU
memory per step, and the plots (latency and KV usage against concurrency, each GPU's memory through
the steps with the OOM marked)."""

from __future__ import annotations

from .._blocks import Block, LinePlot, Table, TimePlot, fmt
from ..load import Step

__all__ = ["gpu_table", "plots", "ramp_table"]

_RAMP_HEAD = [
    "step",
    "conc.",
    "req",
    "err",
    "TTFT p50",
    "TTFT p95",
    "ITL p95",
    "TPOT p50",
    "e2e p95",
    "KV max",
    "waiting max",
    "preempt",
]


def ramp_table(ramp: list[Step]) -> Table:
    rows = [
        [
            s.label,
            fmt(s.concurrency),
            fmt(s.requests),
            fmt(s.errors),
            *(fmt(s.figure(k)) for k in ("ttft_p50_s", "ttft_p95_s", "itl_p95_s", "tpot_p50_s", "e2e_p95_s")),
            fmt(s.kv_max),
            fmt(s.waiting_max),
            fmt(s.preemptions),
        ]
        for s in ramp
    ]
    return Table("ramp", _RAMP_HEAD, rows)


def gpu_table(source: str | None, steps: list[Step]) -> Table:
    """Per capacity step: the most used GPU before, at peak and after (MiB), and how many GPUs."""
    rows = []
    for s in steps:
        b, a = s.gpu_before or {}, s.gpu_after or {}
        rows.append(
            [
                s.label,
                str(b.get("used_mib_max", "–")),
                str(s.gpu_used_max_mib or "–"),
                str(a.get("used_mib_max", "–")),
                str(a.get("gpus") or b.get("gpus") or "–"),
            ]
        )
    name = source or "no source"
    return Table(
        "gpu-steps",
        ["step", "before MiB", "peak MiB", "after MiB", "GPUs"],
        rows,
        caption=f"GPU memory ({name}): per step, the most used GPU before / peak / after (MiB)",
        heading=f"GPU memory per step ({name})",
    )


def _gpu_curve(steps: list[Step], oom_step: str | None) -> TimePlot:
    """Per GPU, (t, MiB) over the steps laid end to end; each step's start; where the OOM struck."""
    curves: dict[str, list[tuple[float, float]]] = {}
    marks: list[tuple[float, str]] = []
    alarm = None
    offset = 0.0
    for s in steps:
        series = s.gpu_series
        marks.append((offset, s.label))
        if s.label == oom_step:
            alarm = (offset + (series[-1]["t"] if series else 0.0), "OOM")
        for snap in series:
            for g in snap["gpus"]:
                curves.setdefault(g["gpu"], []).append((offset + snap["t"], g["used_mib"]))
        offset += max((x["t"] for x in series), default=0.0) + 0.5
    return TimePlot(
        "gpu-memory",
        "GPU memory used per GPU through the capacity steps (MiB)",
        curves,
        marks,
        ylabel="MiB used",
        xlabel="seconds through the steps",
        alarm=alarm,
        empty="not measured: no GPU source",
        line_class="gpu",
    )


def plots(ramp: list[Step], steps: list[Step], oom_step: str | None) -> list[Block]:
    out: list[Block] = []
    if ramp:
        xs = [float(s.concurrency or 0) for s in ramp]
        out.append(
            LinePlot(
                "Latency against concurrency",
                xs,
                [
                    (f"{name} {q}", [s.figure(f"{key}_{q.lower()}_s") for s in ramp])
                    for name, key, q in _LATENCY
                ],
                ylabel="seconds",
            )
        )
        out.append(
            LinePlot(
                "KV cache usage against concurrency",
                xs,
                [("KV max", [s.kv_max for s in ramp]), ("KV mean", [s.kv_mean for s in ramp])],
                ylabel="fraction of the KV cache",
                ymax=1.0,
            )
        )
    out.append(_gpu_curve(steps, oom_step))
    return out


_LATENCY = (("TTFT", "ttft", "p50"), ("TTFT", "ttft", "p95"), ("e2e", "e2e", "p95"))
