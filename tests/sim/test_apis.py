"""The simulator's /v1/responses and /v1/messages: vLLM's shapes, every family clean, and the
chat faults reaching them with the same rule ids as on /v1/chat/completions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from wirecheck.acceptance.demo import score_truth
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.sim import SIM_FAMILIES, GroundTruth, read_truth

FAMILY_NAMES = sorted(SIM_FAMILIES)


async def _drive(client: Any, model: str, *, temperature: float | None = None) -> None:
    extra = {} if temperature is None else {"temperature": temperature}
    for stream in (False, True):
        r = await client.post("/v1/responses", json=aw.responses_req(model=model, stream=stream, **extra))
        await r.aread()
        r = await client.post("/v1/messages", json=aw.messages_req(model=model, stream=stream, **extra))
        await r.aread()
        r = await client.post("/v1/chat/completions", json=wire.tool_req(model=model, stream=stream, **extra))
        await r.aread()


def _findings(client: Any) -> list[tuple[str, str, str]]:
    res = check_exchanges(client.exchanges, CheckConfig(direct=True))
    by_id = {e.id: e for e in client.exchanges}
    return sorted({(by_id[f.exchange_id].request.path, f.rule, str(f.fault)) for f in res.findings})


@pytest.mark.parametrize("family", FAMILY_NAMES)
async def test_every_family_serves_both_endpoints_clean(sim_client: Callable[..., Any], family: str) -> None:
    c = sim_client(family=family)
    await _drive(c, c.app.state.sim.cfg.model, temperature=0)
    assert len(c.exchanges) == 6
    assert _findings(c) == []


async def test_responses_wire_shapes(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2")
    model = c.app.state.sim.cfg.model
    body = (await c.post("/v1/responses", json=aw.responses_req(model=model))).json()
    assert body["object"] == "response" and body["id"].startswith("resp_") and body["status"] == "completed"
    assert [i["type"] for i in body["output"]] == ["reasoning", "function_call"]
    fc = body["output"][1]
    assert fc["call_id"] == "functions.get_weather:0" and json.loads(fc["arguments"]) == {"city": "Tokyo"}
    r = await c.post("/v1/responses", json=aw.responses_req(model=model, stream=True))
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in r.text.split("\n\n") if f]
    types = [f.split("\n", 1)[0].removeprefix("event: ") for f in frames]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed" and "data: [DONE]" not in r.text
    seqs = [json.loads(f.split("\ndata: ", 1)[1])["sequence_number"] for f in frames]
    assert seqs == list(range(len(frames)))
    assert "response.function_call_arguments.delta" in types and "response.reasoning_text.delta" in types
    # each event's keys in the order vLLM writes them: the openai model's fields (by name, the type
    # last), then vLLM's own (function_call_arguments.done's name)
    for f in frames:
        keys = list(json.loads(f.split("\ndata: ", 1)[1]))
        declared = keys[: keys.index("type") + 1]
        assert declared == [*sorted(declared[:-1]), "type"], keys
        assert keys[len(declared) :] in ([], ["name"]), keys


async def test_messages_wire_shapes(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="hermes")
    model = c.app.state.sim.cfg.model
    body = (await c.post("/v1/messages", json=aw.messages_req(model=model))).json()
    assert body["type"] == "message" and body["stop_reason"] == "tool_use"
    use = [b for b in body["content"] if b["type"] == "tool_use"]
    assert use and use[0]["input"] == {"city": "Tokyo"}
    r = await c.post("/v1/messages", json=aw.messages_req(model=model, stream=True))
    types = [f.split("\n", 1)[0].removeprefix("event: ") for f in r.text.split("\n\n") if f]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert "content_block_start" in types and "data: [DONE]" not in r.text
    assert '"input_json_delta"' in r.text
    # a body the request model refuses is answered before the Messages handler: OpenAI-shaped
    bad = await c.post("/v1/messages", json={"model": model, "messages": []})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "body.max_tokens"


@pytest.mark.parametrize(
    ("fault", "rule", "fault_of"),
    [
        ("model.invalid_json", "tool-call-args-invalid-json", "model"),
        ("model.schema_violation", "tool-call-args-schema", "model"),
        ("parser.markup_in_content", "tool-markup-in-content", "parser"),
    ],
)
async def test_a_fault_fires_the_same_rule_as_on_chat(
    sim_client: Callable[..., Any], fault: str, rule: str, fault_of: str
) -> None:
    c = sim_client(family="hermes", faults=fault)
    await _drive(c, c.app.state.sim.cfg.model)
    found = {(path, f) for path, r, f in _findings(c) if r == rule}
    # /v1/messages without streaming json.loads the arguments: vLLM answers invalid ones with a 400
    want = {"/v1/chat/completions", "/v1/responses", "/v1/messages"}
    assert {p for p, _ in found} == want, _findings(c)
    assert {f for _, f in found} == {fault_of}


async def test_both_taps_around_the_gateway_pair_and_check_clean(dual_tap: Callable[..., Any]) -> None:
    c = dual_tap(family="kimi_k2")
    model = "moonshotai/Kimi-K2-Thinking"
    for stream in (False, True):
        (await c.post("/v1/responses", json=aw.responses_req(model=model, stream=stream))).raise_for_status()
        (await c.post("/v1/messages", json=aw.messages_req(model=model, stream=stream))).raise_for_status()
    assert sorted(e.tap for e in c.exchanges) == ["caller"] * 4 + ["engine"] * 4
    res = check_exchanges(c.exchanges, CheckConfig())
    assert res.pairs == 4
    assert res.findings == []


async def test_an_engine_error_mid_stream_is_an_error_event(sim_client: Callable[..., Any]) -> None:
    c = sim_client(family="kimi_k2", faults="engine.error_mid_stream")
    model = c.app.state.sim.cfg.model
    r1 = await c.post("/v1/responses", json=aw.responses_req(model=model, stream=True))
    r2 = await c.post("/v1/messages", json=aw.messages_req(model=model, stream=True))
    assert "event: error" in r1.text and "response.completed" not in r1.text
    assert "event: error" in r2.text and "message_stop" not in r2.text
    assert {(p, r) for p, r, _ in _findings(c)} == {
        ("/v1/responses", "stream-error-frame"),
        ("/v1/messages", "stream-error-frame"),
    }


async def test_a_non_streamed_messages_400_on_invalid_arguments_is_the_models(
    sim_client: Callable[..., Any],
) -> None:
    c = sim_client(family="hermes", faults="model.invalid_json")
    r = await c.post("/v1/messages", json=aw.messages_req(model=c.app.state.sim.cfg.model))
    assert r.status_code == 400 and r.json()["error"]["type"] == "BadRequestError"
    assert _findings(c) == [("/v1/messages", "http-client-error", "model")]
    ok = sim_client(family="hermes")
    bad = await ok.post("/v1/messages", json={"model": ok.app.state.sim.cfg.model, "messages": []})
    assert bad.status_code == 400
    assert _findings(ok) == [("/v1/messages", "http-client-error", "caller")]


@pytest.mark.parametrize("fault", ["model.undeclared_tool", "parser.markup_in_content"])
async def test_both_apis_write_ground_truth_streamed_or_not(
    dual_tap: Callable[..., Any], fault: str, tmp_path: Path
) -> None:
    """The ground truth covers the two APIs as it covers chat: every request, streamed or not,
    writes what the simulator injected, and the findings score perfectly against it."""
    truth = GroundTruth(tmp_path / "truth.jsonl")
    c = dual_tap(family="kimi_k2", faults=fault, truth=truth)
    for stream in (False, True):
        for path, body in (("/v1/responses", aw.responses_req), ("/v1/messages", aw.messages_req)):
            await c.post(
                path, json=body(model=wire.K2, stream=stream), headers={"x-wirecheck-id": f"{path}{stream}"}
            )
    truth.close()
    lines = read_truth(tmp_path / "truth.jsonl")
    assert len(lines) == 4 and all({f["fault"] for f in line["faults"]} == {fault} for line in lines), lines
    s = score_truth(c.exchanges, check_exchanges(c.exchanges).findings, lines)
    assert s.perfect, s.to_dict()
    (cls,) = s.classes
    assert cls.injected == cls.found == 4
