"""Real agent frameworks against the real vLLM (the tier's shared Kimi K2 server), with and without
wirecheck's proxy, as tests/frameworks/test_simulator.py runs them against the simulator.

Every case of tests/frameworks/clients.py: the loop completes, the caller sees the same with and
without the proxy, nothing leaves loopback, and the legal traffic draws no error or warning finding.
Scripted model faults (``vllm_xargs.script``) are found and blamed on the model. And the /v1/messages
facts the simulator follows (tests/sim/test_messages_request.py) are held here against the real
server's bytes.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.frameworks.clients import ANTHROPIC_TOOL, CASES, SCHEMA, WARNINGS
from tests.frameworks.harness import Compared, compare
from wirecheck.record import serve
from wirecheck.sim import SimConfig, create_app

MODEL = "moonshotai/Kimi-K2-Thinking"

pytestmark = [pytest.mark.filterwarnings(w) for w in WARNINGS]


def at(url: str) -> Any:
    """The shared server as an upstream: both runs of a case go to it."""

    @contextmanager
    def up() -> Iterator[str]:
        yield url

    return up


def k2_call(call_id: str, args: str) -> str:
    """A scripted K2 answer: reasoning closed, then one get_weather call with this header."""
    return (
        "I call the tool.</think><|tool_calls_section_begin|><|tool_call_begin|>"
        f"{call_id}<|tool_call_argument_begin|>{args}<|tool_call_end|><|tool_calls_section_end|>"
    )


def assert_same_and_local(r: Compared) -> None:
    assert r.refused == [], f"left loopback: {r.refused}"
    assert r.differences == [], f"the proxy changed what the caller saw: {r.direct} vs {r.proxied}"
    assert len(r.exchanges) == r.proxied.requests


@pytest.mark.parametrize("case_id", list(CASES))
def test_legal_traffic_completes_the_same_and_checks_clean(
    real_vllm: str, case_id: str, tmp_path: Path
) -> None:
    case = CASES[case_id]
    r = compare(case, at(real_vllm), MODEL, tmp_path)
    assert r.proxied.completed, f"{case_id}: {r.proxied.error} after {r.proxied.requests} requests"
    assert_same_and_local(r)
    assert r.judged == [], f"false alarms on legal traffic: {r.judged}"
    if case.fail_once:
        # the failed call is retried with its arguments, and the loop goes on
        assert r.proxied.tool_args == [("get_weather", {"city": "Osaka"})] * 2


def test_a_reused_tool_call_id_is_found_and_blamed_on_the_model(real_vllm: str, tmp_path: Path) -> None:
    """Every answer calls get_weather as ``functions.get_weather:0``: from the second on, each
    repeats an id the history already holds. openai-agents 0.24 takes a repeat with the same
    arguments for the call it already ran, runs nothing and asks again, to its turn limit; wirecheck
    must flag each repeat, on the model, and nothing else."""
    script = {"vllm_xargs": {"script": k2_call("functions.get_weather:0", '{"city": "Osaka"}')}}
    r = compare(CASES["openai-agents-chat-run"], at(real_vllm), MODEL, tmp_path, extra_body=script)
    assert_same_and_local(r)
    assert (r.proxied.completed, r.proxied.error) == (False, "MaxTurnsExceeded")
    assert r.proxied.tool_args == [("get_weather", {"city": "Osaka"})]
    # the requests that carry the first call's result: their answers repeat its id
    repeats = {e.id for e in r.exchanges if b'"tool_call_id"' in e.request.body}
    assert len(repeats) == len(r.exchanges) - 1 > 0
    assert {f.exchange_id for f in r.findings} == repeats, r.judged
    assert all(fnmatch.fnmatch(f.rule, "tool-call-id-*") and str(f.fault) == "model" for f in r.findings), (
        r.judged
    )


@pytest.mark.parametrize(
    "case_id", ["openai-chat-create", "langgraph-react-stream", "anthropic-tools-create"]
)
def test_scripted_invalid_arguments_are_found_and_blamed_on_the_model(
    real_vllm: str, case_id: str, tmp_path: Path
) -> None:
    script = {"vllm_xargs": {"script": k2_call("functions.get_weather:0", '{"city": Osaka}')}}
    r = compare(CASES[case_id], at(real_vllm), MODEL, tmp_path, extra_body=script)
    assert_same_and_local(r)
    assert r.exchanges
    # every answer carries the broken call: each exchange has it, found and blamed on the model
    # (a non-streamed /v1/messages answer is vLLM's 400 BadRequestError: it json.loads the arguments)
    rules = {"tool-call-args-invalid-json", "http-client-error"}
    assert {f.exchange_id for f in r.findings} == {e.id for e in r.exchanges}
    assert {(f.rule in rules, str(f.fault)) for f in r.findings} == {(True, "model")}, r.judged


# --- the /v1/messages facts the simulator follows ------------------------------------------------

BASE = {
    "model": MODEL,
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "Call get_weather for Osaka."}],
    "tools": [ANTHROPIC_TOOL],
}
REFUSED = {
    "budget under 1024": {**BASE, "thinking": {"type": "enabled", "budget_tokens": 512}},
    "budget not under max_tokens": {
        **BASE,
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 4096},
    },
    "max_tokens missing": {k: v for k, v in BASE.items() if k != "max_tokens"},
    "max_tokens 0": {**BASE, "max_tokens": 0},
    "named tool_choice without a name": {**BASE, "tool_choice": {"type": "tool"}},
    "unknown role": {**BASE, "messages": [{"role": "bot", "content": "x"}]},
}


@contextmanager
def simulator() -> Iterator[str]:
    with serve(create_app(SimConfig(time_scale=0.001))) as url:
        yield url


def both(real: str, path: str, body: dict[str, Any]) -> tuple[httpx.Response, httpx.Response]:
    sim: AbstractContextManager[str] = simulator()
    with sim as sim_url:
        return httpx.post(real + path, json=body, timeout=120), httpx.post(
            sim_url + path, json=body, timeout=30
        )


@pytest.mark.parametrize("what", list(REFUSED))
def test_messages_refusals_are_the_real_servers_bytes(real_vllm: str, what: str) -> None:
    """What vLLM's request model refuses is answered by its validation handler, OpenAI-shaped; the
    simulator writes the same body."""
    real, sim = both(real_vllm, "/v1/messages", REFUSED[what])
    assert (real.status_code, sim.status_code) == (400, 400)
    assert sim.json() == real.json()


def test_the_messages_handlers_own_refusal_keeps_the_anthropic_shape(real_vllm: str) -> None:
    real, sim = both(real_vllm, "/v1/messages", {**BASE, "model": "no-such-model"})
    assert (real.status_code, sim.status_code) == (404, 404)
    shape = [
        (set(r.json()), r.json()["type"], set(r.json()["error"]), r.json()["error"]["type"])
        for r in (real, sim)
    ]
    assert shape[0] == shape[1] == ({"type", "error"}, "error", {"type", "message"}, "NotFoundError")


def test_a_thinking_budget_of_1024_is_served(real_vllm: str) -> None:
    body = {**BASE, "max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    real, sim = both(real_vllm, "/v1/messages", body)
    assert (real.status_code, sim.status_code) == (200, 200)


@pytest.mark.parametrize(("key", "honoured"), [("schema", True), ("json_schema", False)])
def test_output_config_format_is_honoured_by_its_wire_key(real_vllm: str, key: str, honoured: bool) -> None:
    """``output_config.format.schema`` (the wire name of vLLM's ``json_schema`` field) constrains the
    answer to the schema; under any other key the format is ignored, on both servers."""
    body = {
        "model": MODEL,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "Describe the weather in Osaka."}],
        "output_config": {"format": {"type": "json_schema", key: SCHEMA}},
    }
    for r in both(real_vllm, "/v1/messages", body):
        assert r.status_code == 200
        text = "".join(b["text"] for b in r.json()["content"] if b["type"] == "text")
        try:
            answer = json.loads(text)
        except ValueError:
            answer = None
        assert (isinstance(answer, dict) and set(answer) == {"city", "summary"}) is honoured, text
