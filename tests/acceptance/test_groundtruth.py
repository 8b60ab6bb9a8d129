"""Scoring findings against the demo's ground truth: the score can fail, both ways."""

from __future__ import annotations

from typing import Any

from tests.support.wire import completion, exchange, message, req
from wirecheck.acceptance.demo import score_truth
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges

THOUGHT = completion(message("Sunny.", reasoning="The user wants the weather."))
DROPPED = completion(message("Sunny.", reasoning=None))


def pair(caller_body: dict[str, Any], engine_body: dict[str, Any], key: str | None) -> list[Exchange]:
    return [
        exchange(req(), caller_body, tap="caller", correlation=key),
        exchange(req(), engine_body, tap="engine", correlation=key),
    ]


def truth(key: str | None, *faults: tuple[str, bool], cid: str | None = None) -> dict[str, Any]:
    return {
        "side": "gateway",
        "seq": 1,
        "correlation": key,
        "completion_id": cid,
        "faults": [{"fault": f, "blame": "gateway", "observable": seen} for f, seen in faults],
    }


def score(exs: list[Exchange], lines: list[dict[str, Any]]) -> dict[str, Any]:
    found = check_exchanges(exs, CheckConfig()).findings
    return score_truth(exs, found, lines).to_dict()


def test_an_injected_fault_found_and_nothing_else_scores_one() -> None:
    exs = pair(DROPPED, THOUGHT, "k1") + pair(THOUGHT, THOUGHT, "k2")
    s = score(exs, [truth("k1", ("reasoning_dropped", True))])
    (c,) = s["classes"]
    assert (c["fault"], c["injected"], c["found"], c["flagged"]) == ("reasoning_dropped", 1, 1, 1)
    assert (c["precision"], c["recall"], s["perfect"]) == (1.0, 1.0, True)


def test_a_finding_with_nothing_injected_is_a_false_alarm() -> None:
    exs = pair(DROPPED, THOUGHT, "k1") + pair(DROPPED, THOUGHT, "k2")
    s = score(exs, [truth("k1", ("reasoning_dropped", True))])
    (c,) = s["classes"]
    assert (c["flagged"], c["correct"], c["precision"]) == (2, 1, 0.5)
    assert s["perfect"] is False
    # with no class of its own in the truth, the false alarm is listed, not lost
    s = score(exs, [])
    assert s["unexplained"] == [{"rule": "gateway-reasoning-dropped", "fault": "gateway", "exchanges": 2}]
    assert s["perfect"] is False


def test_an_injected_fault_not_found_lowers_recall_unless_the_wire_cannot_show_it() -> None:
    exs = pair(THOUGHT, THOUGHT, "k1")
    s = score(exs, [truth("k1", ("finish_reason_changed", True))])
    assert (s["classes"][0]["recall"], s["perfect"]) == (0.0, False)
    s = score(exs, [truth("k1", ("stream_buffered", False))])
    c = s["classes"][0]
    assert (c["injected"], c["not_observable"], c["recall"], s["perfect"]) == (0, 1, None, True)


def test_without_the_correlation_header_truth_joins_by_completion_id() -> None:
    exs = pair(DROPPED, THOUGHT, None)
    cid = DROPPED["id"]
    s = score(exs, [truth(None, ("reasoning_dropped", True), cid=cid)])
    assert (s["classes"][0]["recall"], s["unmatched_truth"], s["perfect"]) == (1.0, 0, True)
    s = score(exs, [truth(None, ("reasoning_dropped", True), cid="chatcmpl-elsewhere")])
    assert s["unmatched_truth"] == 1 and s["perfect"] is False
