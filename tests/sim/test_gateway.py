"""The fault-injecting gateway between two taps: each fault alone is found and blamed on the gateway."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.sim.test_app import HISTORY_OK, drive
from tests.support import wire
from tests.support.clocks import EngineChunkClock
from wirecheck.acceptance.demo import score_truth
from wirecheck.contracts import check_exchanges
from wirecheck.sim import FAULTS, GATEWAY_FAULTS, GroundTruth, read_truth

K2 = "moonshotai/Kimi-K2-Thinking"
BODIES: list[dict[str, Any]] = [
    {
        "model": K2,
        "messages": [{"role": "user", "content": "Weather in Osaka, and search the news for Osaka"}],
        "tools": [wire.WEATHER, wire.SEARCH],
    },
    {"model": K2, "messages": [{"role": "user", "content": "Hello there"}]},
    {
        "model": K2,
        "messages": [{"role": "user", "content": "Weather for Paris as JSON"}],
        "response_format": {"type": "json_object"},
    },
    {
        "model": K2,
        "messages": [{"role": "user", "content": "Hi."}, {"role": "user", "content": "Tell me about Kyoto"}],
    },
    {"model": K2, "messages": HISTORY_OK, "tools": [wire.WEATHER]},
]

# the tool failed: a model retries the call, or (model.no_tool_retry) gives up in text
FAILED_TOOL: dict[str, Any] = {
    "model": K2,
    "messages": wire.tool_turn("Weather in Osaka", "error: upstream timeout", args='{"city": "Osaka"}'),
    "tools": [wire.WEATHER],
}

# gateway fault -> the rule that finds it (at the caller tap, blamed on the gateway)
EXPECTED: dict[str, str] = {
    "response_format_stripped": "gateway-request-changed",
    "history_merged": "gateway-request-changed",
    "tool_messages_dropped": "gateway-request-changed",
    "reasoning_dropped": "gateway-reasoning-dropped",
    "reasoning_renamed": "gateway-reasoning-renamed",
    "reasoning_reshaped": "gateway-reasoning-reshaped",
    "reasoning_merged": "gateway-reasoning-merged",
    "tool_index_zero": "stream-tool-index-reuse",
    "tool_index_from_one": "stream-tool-index-gap",
    "id_every_delta": "stream-tool-id-repeated",
    "ids_rewritten": "gateway-tool-calls-changed",
    "args_double_encoded": "gateway-tool-calls-changed",
    "sse_split_frames": "stream-malformed-frame",
    "sse_no_data_prefix": "stream-malformed-frame",
    "done_missing": "stream-done-missing",
    "done_doubled": "stream-done-repeated",
    "finish_reason_changed": "gateway-finish-reason-changed",
    "usage_dropped": "gateway-usage-changed",
    "usage_recomputed": "gateway-usage-changed",
    "retry_duplicates": "gateway-content-changed",
}
SPECIAL = {"stream_buffered", "error_hidden", "correlation_header_dropped"}


def test_every_gateway_fault_is_tested() -> None:
    assert set(EXPECTED) | SPECIAL == set(GATEWAY_FAULTS)


async def test_without_faults_the_gateway_changes_nothing(dual_tap: Callable[..., Any]) -> None:
    c = dual_tap()
    await drive(c, BODIES)
    res = check_exchanges(c.exchanges)
    assert res.pairs == 10
    assert [(f.rule, f.message) for f in res.findings] == []


@pytest.mark.parametrize("fault", sorted(EXPECTED))
async def test_each_gateway_fault_is_blamed_on_the_gateway(dual_tap: Callable[..., Any], fault: str) -> None:
    c = dual_tap(fault)
    await drive(c, BODIES)
    res = check_exchanges(c.exchanges)
    hits = [f for f in res.findings if f.rule == EXPECTED[fault]]
    assert hits, (fault, sorted({f.rule for f in res.findings}))
    assert {(str(f.fault), f.tap) for f in hits} == {("gateway", "caller")}
    assert {str(f.fault) for f in res.findings} == {"gateway"}, [
        (f.rule, str(f.fault), f.message) for f in res.findings
    ]


async def _scored_alone(
    tap: Callable[[GroundTruth], Any], tmp_path: Path, fault: str, bodies: list[dict[str, Any]]
) -> tuple[Any, list[dict[str, Any]]]:
    """Drive ``bodies`` through ``tap(truth)`` (a dual tap that writes ground truth) and score the
    findings against the truth: only ``fault`` is in it and the score is perfect. Returns
    the one fault class's score and the truth's lines."""
    truth = GroundTruth(tmp_path / "truth.jsonl")
    c = tap(truth)
    await drive(c, bodies)
    truth.close()
    lines = read_truth(tmp_path / "truth.jsonl")
    assert lines and {f["fault"] for line in lines for f in line["faults"]} == {fault}
    s = score_truth(c.exchanges, check_exchanges(c.exchanges).findings, lines)
    assert s.perfect, s.to_dict()
    (cls,) = s.classes
    return cls, lines


@pytest.mark.parametrize("fault", sorted(EXPECTED))
async def test_each_gateway_fault_scores_one_against_its_ground_truth(
    dual_tap: Callable[..., Any], fault: str, tmp_path: Path
) -> None:
    """The gateway writes what it changed; every finding is explained by it and every
    change it wrote is found (the demo's scoring, over the whole catalogue)."""
    cls, lines = await _scored_alone(lambda truth: dual_tap(fault, truth=truth), tmp_path, fault, BODIES)
    assert cls.injected == len(lines) and cls.found == cls.injected


@pytest.mark.parametrize("fault", sorted(FAULTS))
async def test_each_simulator_fault_scores_one_against_its_ground_truth(
    dual_tap: Callable[..., Any], fault: str, tmp_path: Path
) -> None:
    """The simulator writes the model, parser and engine faults that reached the wire."""
    required = {**BODIES[1], "tools": [wire.WEATHER], "tool_choice": "required"}
    bodies = [*BODIES, required, FAILED_TOOL]
    cls, _ = await _scored_alone(lambda truth: dual_tap(truth=truth, faults=fault), tmp_path, fault, bodies)
    assert cls.found == cls.injected
    # only a late first token and a model that gives up in plain text are invisible to a contract
    # check (the second is the interface phase's tool-retry check); each says why
    assert (cls.hidden > 0) == (fault in ("engine.slow_first_token", "model.no_tool_retry")), cls
    assert all(cls.hidden_why)


async def test_hidden_engine_error_is_the_gateways(dual_tap: Callable[..., Any]) -> None:
    c = dual_tap("error_hidden", faults="engine.error_mid_stream")
    await drive(c, BODIES[:1], both=False)
    res = check_exchanges(c.exchanges)
    by = {(f.rule, str(f.fault), f.tap) for f in res.findings}
    assert ("gateway-error-hidden", "gateway", "caller") in by
    assert ("stream-error-frame", "engine", "engine") in by


async def test_buffered_stream_is_the_gateways(dual_tap: Callable[..., Any]) -> None:
    # the taps' clock moves 10 ms per engine chunk: the engine's chunks are spread out, and the
    # caller's, held back by the gateway until the engine was done, all come at one time
    c = dual_tap("stream_buffered", clock=EngineChunkClock(step_s=0.01))
    await drive(c, BODIES[1:2], both=False)
    res = check_exchanges(c.exchanges)
    [f] = [f for f in res.findings if f.rule == "gateway-stream-buffered"]
    assert (str(f.fault), f.tap) == ("gateway", "caller")


async def test_dropped_correlation_header_still_pairs(dual_tap: Callable[..., Any]) -> None:
    c = dual_tap("correlation_header_dropped,reasoning_dropped")
    await drive(c, BODIES[1:2])
    # no flag needed; the gateway kept the completion id, so that pairs both requests
    res = check_exchanges(c.exchanges)
    assert (res.pairs, res.paired_by) == (2, {"completion-id": 2})
    assert {(f.rule, str(f.fault)) for f in res.findings} == {("gateway-reasoning-dropped", "gateway")}
