"""Real agent frameworks against the simulator, with and without wirecheck's proxy.

For every case (tests/frameworks/clients.py) the loop completes, the caller sees the same with and
without the proxy (completion, requests, tool arguments, final output), nothing leaves loopback, and
the recorded legal traffic draws no error or warning finding. With a simulator fault switched on,
the findings are exactly the injected faults, each blamed on its party (scored against the
simulator's ground truth). The same cases run against a real vLLM in
tests/real_vllm/test_frameworks.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from tests.frameworks.clients import CASES, WARNINGS
from tests.frameworks.harness import Compared, compare
from wirecheck.acceptance.demo import score_truth
from wirecheck.record import serve
from wirecheck.sim import GroundTruth, SimConfig, create_app, parse_faults, read_truth

MODEL = "moonshotai/Kimi-K2-Thinking"

pytestmark = [pytest.mark.filterwarnings(w) for w in WARNINGS]


def simulator(faults: str = "", truth: Path | None = None) -> Callable[[], AbstractContextManager[str]]:
    """A fresh simulator per run (the same request numbers, so the same faults, for both runs),
    writing its ground truth to ``truth`` when given."""

    @contextmanager
    def up() -> Iterator[str]:
        gt = GroundTruth(truth) if truth is not None else None
        app = create_app(SimConfig(time_scale=0.001, faults=parse_faults(faults)), truth=gt)
        try:
            with serve(app) as url:
                yield url
        finally:
            if gt is not None:
                gt.close()

    return up


def assert_same_and_local(r: Compared) -> None:
    assert r.refused == [], f"left loopback: {r.refused}"
    assert r.differences == [], f"the proxy changed what the caller saw: {r.direct} vs {r.proxied}"
    assert len(r.exchanges) == r.proxied.requests


@pytest.mark.parametrize("case_id", list(CASES))
def test_legal_traffic_completes_the_same_and_checks_clean(case_id: str, tmp_path: Path) -> None:
    case = CASES[case_id]
    r = compare(case, simulator(), MODEL, tmp_path)
    assert r.proxied.completed, f"{case_id}: {r.proxied.error}"
    assert_same_and_local(r)
    assert r.judged == [], f"false alarms on legal traffic: {r.judged}"
    assert (
        r.proxied.tool_args or case.id.endswith("-notools") or "output-" in case.id or "structured" in case.id
    )
    if case.fail_once:
        # the failed call is retried with the same arguments, and the loop goes on
        assert r.proxied.tool_args == [("get_weather", {"city": "Osaka"})] * 2
    if isinstance(r.proxied.final, dict):
        assert r.proxied.final["city"] == "Osaka"


#: one scripted fault per framework, each of a different kind; what the framework makes of it
#: (an error, a retry, an answer) must be the same with and without the proxy
FAULTS = [
    ("openai-agents-chat-run", "model.undeclared_tool"),
    ("openai-agents-responses-stream", "model.invalid_json"),
    ("langgraph-react-invoke", "model.call_in_think"),
    ("langgraph-react-stream", "parser.markup_in_content"),
    ("pydantic-ai-chat-run", "model.invalid_json"),
    ("pydantic-ai-responses-stream", "parser.reasoning_in_content"),
    ("anthropic-tools-create", "model.schema_violation"),
    ("anthropic-tools-stream", "engine.error_mid_stream"),
    ("openai-chat-stream", "parser.call_dropped"),
    ("openai-responses-create", "model.undeclared_tool"),
]


@pytest.mark.parametrize(("case_id", "fault"), FAULTS)
def test_a_simulator_fault_is_found_and_blamed_right(case_id: str, fault: str, tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    r = compare(CASES[case_id], simulator(fault), MODEL, tmp_path, proxied_upstream=simulator(fault, truth))
    assert_same_and_local(r)
    lines = read_truth(truth)
    score = score_truth(r.exchanges, r.findings, lines)
    injected = [c for c in score.classes if c.injected]
    assert [c.fault for c in injected] == [fault], score.table()
    assert score.perfect and score.unmatched_truth == 0, "\n".join(score.table())
