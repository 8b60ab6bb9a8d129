"""Recorded facts for verdict tests: what the phases measured, written down, so that a test judges,
decides and renders them in milliseconds whatever the machine is doing, with a clock it sets.

Each builder takes the figures a test cares about and fills the rest with a healthy deployment's
(the simulator's at time scale 0.02, as an acceptance run recorded them). Compat facts are read from
the simulator's evidence files: reading files needs no clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wirecheck.acceptance import AcceptOptions, Limits, PhaseResult, Slo, judged
from wirecheck.acceptance.load import Sample, Step, breaches, resource_signs, summarize
from wirecheck.acceptance.phases import (
    KINDS,
    Attempt,
    CacheFacts,
    CapacityFacts,
    CompatFacts,
    CompatInputs,
    GpuCurve,
    InterfaceFacts,
    LoadStage,
    Soak,
    ToolRetry,
    measure_compat,
)
from wirecheck.contracts import Fault, Finding, Severity
from wirecheck.sim import Environment, SimConfig, write_environment

#: what a loaded machine cannot break: e2e runs measure, and these verdict tests judge the times
UNTIMED = Slo(ttft_p95_s=60.0, itl_p95_s=60.0, e2e_p95_s=600.0)
START = 1_800_000_000.0  # 2027-01-15T08:00:00Z: a recorded run's clock


class ManualClock:
    """A clock a test moves by hand: ``sleep`` advances it and returns at once."""

    def __init__(self, now: float = START) -> None:
        self.t = now

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += max(seconds, 0.0)

    def advance(self, seconds: float) -> None:
        self.t += seconds


def sample(
    ok: bool = True, *, ttft: float = 0.02, e2e: float = 0.3, prompt: int = 1800, error: str | None = None
) -> Sample:
    return Sample(
        ok=ok,
        status=200 if ok else 500,
        e2e_s=e2e,
        ttft_s=ttft if ok else None,
        itl_s=[0.004] * 8 if ok else [],
        tpot_s=0.004 if ok else None,
        prompt_tokens=prompt,
        completion_tokens=64,
        error=error,
    )


def gpu_snap(t: float, used: float, gpus: int = 8, total: float = 143771.0) -> dict[str, Any]:
    return {
        "t": t,
        "gpus": [
            {"gpu": f"vllm-0/{i}", "used_mib": used + 64 * i, "total_mib": total, "util_pct": 85.0}
            for i in range(gpus)
        ],
    }


def step(
    label: str,
    concurrency: int,
    *,
    requests: int = 8,
    errors: int = 0,
    error: str = "HTTP 500: engine error",
    ttft: float = 0.02,
    e2e: float = 0.3,
    kv: float = 0.3,
    waiting: float = 0.0,
    preemptions: float = 0.0,
    slo: Slo = UNTIMED,
    gpu_mib: float | None = 80000.0,
    oom: bool = False,
) -> Step:
    """One ramp step as measured, its breaches of ``slo`` and resource signs said as the ramp says them."""
    samples = [sample(ttft=ttft, e2e=e2e) for _ in range(requests - errors)]
    samples += [sample(False, error=error) for _ in range(errors)]
    s = Step(
        label=label,
        concurrency=concurrency,
        wall_s=2.0,
        figures=summarize(samples),
        series=[
            {"t": 0.05 * i, "kv": kv, "running": float(concurrency), "waiting": waiting, "preemptions": 0.0}
            for i in range(4)
        ],
        preemptions=preemptions,
        kv_before=0.0,
        kv_after=kv,
        gpu_series=[gpu_snap(0.2 * i, gpu_mib) for i in range(3)] if gpu_mib is not None else [],
        gpu_before=None,
        oom=oom,
        samples=samples,
    )
    s.breaches, s.resource = breaches(s, slo), resource_signs(s)
    return s


def ramp(*levels: int, slo: Slo = UNTIMED, **last: Any) -> list[Step]:
    """Healthy steps at ``levels``; ``last`` changes the last one (where the ramp stopped)."""
    out = [step(f"ramp c={c}", c, slo=slo) for c in levels[:-1]]
    return [*out, step(f"ramp c={levels[-1]}", levels[-1], slo=slo, **last)]


def capacity(
    steps: list[Step] | None = None,
    *,
    slo: Slo = UNTIMED,
    target: int = 4,
    soak: Soak | None = None,
    drift_max: float = 1.5,
    oom: dict[str, Any] | None = None,
    gpu: GpuCurve | None = None,
    workload: dict[str, Any] | None = None,
) -> CapacityFacts:
    steps = ramp(1, 2, 4, slo=slo) if steps is None else steps
    if soak is None and oom is None:
        soak = Soak(
            step=step("soak", 2, requests=16),
            windows=[{"window": 1, "e2e_p50_s": 0.3}, {"window": 2, "e2e_p50_s": 0.31}],
        )
    return CapacityFacts(
        slo=slo,
        target=target,
        soak_drift_max=drift_max,
        metrics_urls=["http://engine/metrics"],
        metrics_answered=True,
        load=LoadStage(healthy=True, first=sample()),
        long_input=[{"turns": 12, **sample(prompt=3600).to_json()}],
        ramp=steps,
        soak=soak,
        oom=oom,
        gpu=gpu
        or GpuCurve(
            source="dcgm", simulated=True, at_load={"gpus": 8, "used_mib_max": 79000, "total_mib": 143771}
        ),
        workload=workload
        or {"source": "synthetic", "sample_set": "wirecheck agent sample set", "input_size": None},
        samples=[x for s in steps for x in s.samples],
    )


def probe(
    queries: float, hits: float, *, prompt: int = 3600, computed: float = 3600.0, prefill: float = 0.2
) -> dict[str, Any]:
    return {
        "ok": True,
        "error": None,
        "prompt_tokens": prompt,
        "usage_cached_tokens": hits,
        "ttft_s": 0.05,
        "queries": queries,
        "hits": hits,
        "cached": hits,
        "prompt": float(prompt),
        "external_queries": 0.0,
        "external_hits": 0.0,
        "computed_sum": computed,
        "computed_count": 1.0,
        "prefill_s": prefill,
    }


def cache(**probes: dict[str, Any]) -> CacheFacts:
    """A working prefix cache's four probes, ``probes`` replacing any of them."""
    rows = {
        "cold": probe(3600, 0, computed=3600, prefill=0.4),
        "warm_a": probe(3600, 3584, computed=16, prefill=0.01),
        "warm_b": probe(3600, 2048, computed=1552, prefill=0.2),
        "control": probe(3600, 0, computed=3600, prefill=0.4),
    }
    rows.update(probes)
    return CacheFacts(
        metrics_urls=["http://engine/metrics"],
        run_id="recorded",
        probes=rows,
        cache_config={"enable_prefix_caching": "True"},
        shared_b=2100,
        sample_set_version="recorded",
    )


def finding(rule: str, fault: Fault, exchange_id: str) -> Finding:
    return Finding(rule, Severity.ERROR, fault, f"{rule} (recorded)", exchange_id, "client")


def interface(
    requests: int = 7,
    *,
    recovered: tuple[int, ...] = (),
    failed: tuple[int, ...] = (),
    fault: Fault = Fault.PARSER,
    scenarios: dict[str, Any] | None = None,
) -> InterfaceFacts:
    """``requests`` agent requests, clean but those ``recovered`` by a retry and those ``failed`` on
    every attempt (0-based), each error blamed on ``fault``; the tool-failure requests retried."""
    attempts, findings, answered = [], [], {}
    for i in range(requests):
        tries = 3 if i in failed else 2 if i in recovered else 1
        for a in range(tries):
            bad = i in failed or (i in recovered and a == 0)
            ex_id = f"r{i + 1}.{a}-0"
            errs = [finding("tool-markup-in-content", fault, ex_id)] if bad else []
            attempts.append(Attempt(i, a, [sample()], errs))
            findings += errs
            answered[ex_id] = (i, a)
    kinds = [KINDS[i % len(KINDS)] for i in range(requests)]
    retried = [
        ToolRetry(i + 1, "get_weather", called=True, engine_called=False)
        for i, k in enumerate(kinds)
        if k == "tool-failure"
    ]
    return InterfaceFacts(
        kinds=kinds,
        attempts=attempts,
        retries=2,
        max_retry_rate=0.25,
        findings=findings,
        attributed_from="caller only (no taps: gateway faults cannot be told from engine faults)",
        answered=answered,
        checked=len(answered),
        tool_retries=retried,
        scenarios=scenarios or {"examples": 3, "ran": True, "requests": 20, "ok": True},
    )


def compat(tmp: Path, env: Environment | None = None, **inputs: Any) -> CompatFacts:
    """The simulator's evidence files for ``env``, read as compat reads them."""
    paths = write_environment(tmp / "evidence", SimConfig(family="kimi_k3"), env)
    return measure_compat(
        CompatInputs(
            host_files=[str(paths["host_xml"]), str(paths["host_text"])],
            container_file=str(paths["container"]),
            startup_log=str(paths["startup_log"]),
            topology_files=[str(paths["topology"])],
            official_image=inputs.pop("official_image", True),
            version="0.33.0",
            fingerprint="vllm-0.33.0-tp8-ep-1a2b3c4d",
            **inputs,
        )
    )


def phases(compat_facts: CompatFacts, *others: Any) -> list[PhaseResult]:
    """The four phases judged from recorded facts (compat, capacity, cache, interface, in order)."""
    names = ("compat", "capacity", "cache", "interface")
    return [judged(name, f) for name, f in zip(names, (compat_facts, *others), strict=False)]


def options(tmp: Path, **kw: Any) -> AcceptOptions:
    kw.setdefault("limits", Limits(owner="ci-oncall"))
    return AcceptOptions(
        target="http://gateway.test", engine_url="http://engine.test", reviewer="ci", out=tmp / "out", **kw
    )
