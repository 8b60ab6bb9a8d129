"""Every rule in the catalogue has a failing and a passing case (tests/contracts/rule_cases*.py; a test
checks the coverage)."""

from __future__ import annotations

import pytest

from tests.contracts.rule_cases import K2_ERR, SINGLE, cut_capture, run, tool_msg
from tests.contracts.rule_cases_pairs import PAIRS
from tests.support import wire
from tests.support.wire import call, chunk, completion, exchange, req, role_chunk, streamed, tool_req
from wirecheck.contracts import rules
from wirecheck.contracts._view import build_view

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

CASES = {**SINGLE, **PAIRS}


def test_request_shape_is_judged_by_the_wire_model() -> None:
    bad = exchange(
        req(tools=[{"type": "function", "function": {"parameters": {}}}], stream="maybe"), completion()
    )
    msgs = [f.message for f in run([bad]) if f.rule == "request-malformed"]
    assert any(m.startswith("tools/0/function/name") for m in msgs), msgs
    assert any(m.startswith("stream") for m in msgs), msgs


def test_a_cut_capture_is_reported_once_and_not_judged_as_malformed() -> None:
    assert [f.rule for f in run(cut_capture())] == ["capture-truncated"]


def test_every_rule_has_a_case() -> None:
    assert sorted(CASES) == [r.id for r in rules()]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fails_on_bad_and_passes_on_good(rule_id: str) -> None:
    bad, good, fault = CASES[rule_id]
    hits = [f for f in run(bad()) if f.rule == rule_id]
    assert hits, f"{rule_id} did not fire on its failing case"
    assert {str(f.fault) for f in hits} == {fault}, [f.message for f in hits]
    assert all(f.message and "pointer" in f.evidence for f in hits)
    missed = [f for f in run(good()) if f.rule == rule_id]
    assert not missed, [f.message for f in missed]


def test_good_cases_have_no_error_at_all() -> None:
    # the passing cases are legal traffic: no rule may raise an error on them
    # (a legal 401 body is still a failed request)
    allowed = {"error-body-shape": {"http-client-error"}}
    for rule_id, (_, good, _) in CASES.items():
        errors = [
            f for f in run(good()) if f.severity == "error" and f.rule not in allowed.get(rule_id, set())
        ]
        assert not errors, (rule_id, [(f.rule, f.message) for f in errors])


def test_arguments_cut_short_with_a_normal_finish_are_the_parsers() -> None:
    cut = exchange(tool_req(), tool_msg(call(args='{"city": "To')))
    [f] = [f for f in run([cut]) if f.rule == "tool-call-args-invalid-json"]
    assert str(f.fault) == "parser" and "cut short" in f.message
    broken = exchange(tool_req(), tool_msg(call(args='{"city": Tokyo}')))
    [g] = [f for f in run([broken]) if f.rule == "tool-call-args-invalid-json"]
    assert str(g.fault) == "model"


def test_a_stream_cut_by_an_error_frame_is_not_judged_as_a_message() -> None:
    objs = [*wire.k2_tool_stream(args='{"city": "Tokyo"}')[:3], K2_ERR]
    rules_hit = {f.rule for f in run([streamed(tool_req(), objs)])}
    assert rules_hit == {"stream-error-frame"}


def test_text_on_the_finish_chunk_is_output_not_a_fault() -> None:
    """A real vLLM under load merges the deltas its API server has not taken yet, so the finish chunk
    carries the last tokens' text (tests/real_vllm/test_fidelity.py, VARIES): legal traffic."""
    merged = streamed(req(), [role_chunk(), chunk({"content": "Hel"}), chunk({"content": "lo"}, "stop")])
    assert [(f.rule, f.message) for f in run([merged]) if f.severity != "info"] == []
    stream = build_view(merged).stream
    assert stream is not None and stream.choices[0].content == "Hello"
    assert stream.choices[0].finish_reason == "stop" and stream.anomalies == []
