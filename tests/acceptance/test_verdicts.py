"""Verdicts from recorded facts: what each measured shape of a deployment is judged to be.

Whether a step kept the SLO, a soak drifted, or a prefill time fell is a judgment of times; here the
times are recorded (``tests/acceptance/facts.py``), so each verdict is the same on any machine and
takes milliseconds. The end-to-end runs (test_accept.py, test_golive.py) measure, with an SLO no
loaded machine can break."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.acceptance.facts import (
    START,
    ManualClock,
    cache,
    capacity,
    compat,
    interface,
    options,
    phases,
    probe,
    ramp,
    step,
)
from wirecheck.acceptance import (
    ALL_PHASES,
    AcceptanceResult,
    EngineInfo,
    Limits,
    PhaseResult,
    Progress,
    Slo,
    decide,
    judged,
    report_run,
)
from wirecheck.acceptance.load import timed
from wirecheck.acceptance.phases import Soak
from wirecheck.contracts import Chunk, Exchange, HttpRequest, HttpResponse

SLO = Slo(ttft_p95_s=0.25)
ENGINE = EngineInfo(version="0.33.0", model="moonshotai/Kimi-K3", fingerprint="vllm-0.33.0-tp8-ep-1a2b3c4d")


def _checks(ph: PhaseResult) -> dict[str, object]:
    return {c.id: c for c in ph.checks}


def test_queueing_with_room_in_the_kv_cache_is_limited_with_a_suggested_rate_limit() -> None:
    steps = ramp(1, 2, slo=SLO, ttft=0.4, waiting=3.0, kv=0.4)
    ph = judged("capacity", capacity(steps, slo=SLO))
    stopped = ph.data["ramp"][-1]
    assert stopped["breaches"] and any("ttft" in b for b in stopped["breaches"])
    assert (
        (stopped["waiting_max"] or 0) > 0 and (stopped["kv_max"] or 0) < 0.95 and not stopped["preemptions"]
    )
    c = _checks(ph)["capacity.ramp"]
    assert c.leads_to == "limited" and "rate limit" in c.detail  # type: ignore[attr-defined]
    v = decide([ph], list(ALL_PHASES), Limits(), ph.facts.suggestions() if ph.facts else {})
    assert v.decision == "limited"
    assert "concurrent requests" in v.limits["suggested"]["scope"]


def test_a_breach_with_preemptions_at_the_target_is_scale_up_and_errors_alone_are_rework() -> None:
    pre = judged("capacity", capacity(ramp(1, 2, slo=SLO, ttft=0.4, preemptions=3.0), slo=SLO))
    c = _checks(pre)["capacity.ramp"]
    assert c.leads_to == "scale-up" and "3 preemptions" in c.detail  # type: ignore[attr-defined]
    broke = judged("capacity", capacity(ramp(1, 2, slo=SLO, errors=2), slo=SLO))
    c = _checks(broke)["capacity.ramp"]
    assert c.leads_to == "rework" and "errors without a resource sign" in c.detail  # type: ignore[attr-defined]
    # preemptions within the SLO still need resources: said by capacity.resources
    quiet = judged("capacity", capacity(ramp(1, 2, 4, preemptions=2.0)))
    assert _checks(quiet)["capacity.ramp"].status == "pass"  # type: ignore[attr-defined]
    assert _checks(quiet)["capacity.resources"].leads_to == "scale-up"  # type: ignore[attr-defined]


def test_a_breach_above_the_target_concurrency_passes_the_ramp() -> None:
    ph = judged("capacity", capacity(ramp(1, 2, 4, slo=SLO, ttft=0.4, waiting=5.0), slo=SLO, target=2))
    c = _checks(ph)["capacity.ramp"]
    assert c.status == "pass" and "above the target at ramp c=4" in c.detail  # type: ignore[attr-defined]
    assert ph.data["max_good_concurrency"] == 2


def test_a_soak_that_drifts_past_its_bound_is_scale_up_and_within_it_passes() -> None:
    def soak(first: float, last: float) -> Soak:
        return Soak(
            step=step("soak", 2, requests=16),
            windows=[{"window": 1, "e2e_p50_s": first}, {"window": 2, "e2e_p50_s": last}],
        )

    # the drift a busy CI machine once read from a healthy simulator: on recorded facts it is the verdict
    drifted = _checks(judged("capacity", capacity(soak=soak(0.3, 0.483))))["capacity.soak"]
    assert (drifted.status, drifted.leads_to) == ("fail", "scale-up") and "1.61x > 1.5x" in drifted.detail  # type: ignore[attr-defined]
    steady = _checks(judged("capacity", capacity(soak=soak(0.3, 0.33))))["capacity.soak"]
    assert steady.status == "pass" and "1.10x" in steady.detail  # type: ignore[attr-defined]


def test_an_open_loop_client_that_fell_behind_is_recorded_not_blocking() -> None:
    lagging = step("ramp 80 rps", 6)
    lagging.schedule = {
        "rate_rps": 80.0,
        "interval_s": 0.0125,
        "max_lag_s": 0.2,
        "late_sends": 3,
        "fell_behind": True,
    }
    c = _checks(judged("capacity", capacity([step("ramp 20 rps", 1), lagging], target=6)))[
        "capacity.open-loop-lag"
    ]
    assert c.status == "warn" and "ramp 80 rps" in c.detail and "0.2s" in c.detail  # type: ignore[attr-defined]


def test_prefill_times_are_judged_against_the_computed_tokens_and_scheduling_noise() -> None:
    fell = _checks(judged("cache", cache()))["cache.prefill-time"]
    assert fell.status == "pass"  # type: ignore[attr-defined]
    # 4 ms -> 25 ms on a loaded machine, with the computed tokens down to 1%: noise, not a failure
    noise = cache(cold=probe(3600, 0, prefill=0.004), warm_a=probe(3600, 3584, computed=36, prefill=0.025))
    c = _checks(judged("cache", noise))["cache.prefill-time"]
    assert c.status == "info" and "within scheduling noise" in c.detail  # type: ignore[attr-defined]
    slow = cache(cold=probe(3600, 0, prefill=0.3), warm_a=probe(3600, 3584, computed=36, prefill=0.5))
    assert _checks(judged("cache", slow))["cache.prefill-time"].status == "fail"  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceResult:
    """A clean deployment's recorded facts, judged and reported; its clock ran 12 m 34 s."""
    tmp = tmp_path_factory.mktemp("clean")
    clock = ManualClock()
    judged_phases = phases(compat(tmp), capacity(), cache(), interface(14))
    clock.advance(754.0)
    return report_run(
        options(tmp),
        ENGINE,
        judged_phases[0].facts,
        judged_phases,
        started=START,
        finished=clock.now(),
        metrics=[],  # type: ignore[arg-type]
    )


def test_recorded_facts_of_a_clean_deployment_are_go_with_every_checklist_item_done(
    clean: AcceptanceResult, tmp_path: Path
) -> None:
    v = clean.verdict
    assert (v.decision, v.granted, v.accepted, v.partial) == ("go", True, True, False), v.reasons
    items = clean.report["checklist"]
    assert items and all(i["state"] == "done" for i in items), [i for i in items if i["state"] != "done"]
    ev = clean.report["evidence"]
    # the report's times are the run's clock: a recorded run reads the same every time
    assert (ev["started_at"], ev["finished_at"], ev["duration_s"]) == (
        "2027-01-15T08:00:00Z",
        "2027-01-15T08:12:34Z",
        754.0,
    )
    again = report_run(
        options(tmp_path),
        ENGINE,
        clean.phases[0].facts,
        clean.phases,
        started=START,
        finished=START + 754,
        metrics=[],  # type: ignore[arg-type]
    )
    assert json.dumps(again.report["verdict"]) == json.dumps(clean.report["verdict"])
    here, there = Path(again.files["json"]).parent.parent, Path(clean.files["json"]).parent.parent
    assert (
        Path(again.files["markdown"]).read_text().replace(str(here), str(there))
        == Path(clean.files["markdown"]).read_text()
    )


def test_alert_rules_and_dashboard_carry_the_rollback_thresholds(clean: AcceptanceResult) -> None:
    # the SLO's thresholds (the default SLO here) and what the run measured: a rendering of the report

    rules = YAML(typ="safe").load(Path(clean.files["alerts"]).read_text())
    by_name = {r["alert"]: r for r in rules["groups"][0]["rules"]}
    assert {
        "VllmKvCacheNearlyFull",
        "VllmRequestsQueueing",
        "VllmPreempting",
        "VllmSuccessRateLow",
        "VllmTtftHigh",
        "VllmE2eLatencyHigh",
        "VllmPrefixCacheHitsLow",
    } <= set(by_name)
    assert by_name["VllmTtftHigh"]["expr"].endswith("> 2.0")
    assert "vllm:time_to_first_token_seconds_bucket" in by_name["VllmTtftHigh"]["expr"]
    assert by_name["VllmSuccessRateLow"]["expr"].endswith("< 0.99")
    dash = json.loads(Path(clean.files["dashboard"]).read_text())
    titles = {p["title"]: p for p in dash["panels"]}
    assert {
        "KV cache usage",
        "Requests waiting",
        "Preemptions (10m)",
        "Success rate",
        "TTFT p95",
        "E2E latency p95",
        "Prefix cache hit rate",
    } == set(titles)
    steps = titles["TTFT p95"]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1] == {"color": "red", "value": 2.0}
    md = Path(clean.files["markdown"]).read_text()
    assert "**Verdict: go**" in md and "- [x] Reviewer named" in md


def test_progress_ticks_reach_a_ci_log_every_few_seconds_and_quiet_silences_them() -> None:
    """Scenarios and replay ran minutes without a word where no terminal is attached."""
    clock = ManualClock()
    pipe, quiet, never = io.StringIO(), io.StringIO(), io.StringIO()
    p = Progress(pipe, every_s=0.05, clock=clock)
    q, n = Progress(quiet, quiet=True, every_s=0.0, clock=clock), Progress(never, clock=clock)
    for i in range(6):
        for x in (p, q, n):
            x.tick(f"scenarios: example {i}/6")
        clock.advance(0.03)
    lines = pipe.getvalue().splitlines()
    assert 1 <= len(lines) <= 3, lines  # every other tick at most, and the first one is not printed
    assert lines == ["scenarios: example 2/6", "scenarios: example 4/6"]  # at 0.06 s and 0.12 s
    assert "scenarios: example 0/6" not in lines and all(line.startswith("scenarios: ") for line in lines)
    assert quiet.getvalue() == "" and never.getvalue() == ""  # quiet, and the accept default (no every_s)
    assert (Progress.eta(10.0, 0, 5), Progress.eta(10.0, 2, 6), Progress.eta(60.0, 1, 3)) == (
        "ETA ?",
        "ETA 20s",
        "ETA 2m00s",
    )


def _chunk(t_ms: float, delta: dict[str, object], finish: str | None = None) -> Chunk:
    body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return Chunk(t_ms, b"data: " + json.dumps(body).encode() + b"\n\n")


def test_ttft_stops_at_the_first_token_not_at_the_role_chunk() -> None:
    """From a recorded stream's chunk times: the role chunk at once, the first word 300 ms later."""
    chunks = [
        _chunk(0.0, {"role": "assistant", "content": ""}),
        _chunk(300.0, {"content": "Hello"}),
        _chunk(350.0, {"content": " there"}),
        _chunk(360.0, {}, "stop"),
        Chunk(361.0, b"data: [DONE]\n\n"),
    ]
    recorded = Exchange(
        id="recorded",
        tap="client",
        request=HttpRequest("POST", "/v1/chat/completions", [], b"{}"),
        response=HttpResponse(
            200, [("content-type", "text/event-stream")], b"".join(c.data for c in chunks), chunks
        ),
    )
    s = timed(recorded, 0.4, START)
    assert s.ok and s.ttft_s is not None and s.ttft_s >= 0.3
    assert len(s.itl_s) == 1 and s.itl_s[0] >= 0.04 and s.e2e_s >= s.ttft_s
    assert (s.ttft_s, s.itl_s, s.started_s) == (0.3, [0.05], START)
