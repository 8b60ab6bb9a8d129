"""The Responses and Messages event streams as contracts of their own: the shapes vLLM and other
servers legally send stay clean (arguments whole in a .done event, event types newer than the
checker, a call without arguments), and each broken invariant is found with the engine to blame."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

RESP, MSG = "/v1/responses", "/v1/messages"
NO_ARGS_TOOL = {
    "name": "now",
    "description": "The time",
    "input_schema": {"type": "object", "properties": {}},
}
NO_ARGS_FLAT = {"type": "function", "name": "now", "parameters": {"type": "object", "properties": {}}}


def run(*exs: Exchange) -> list[Finding]:
    return check_exchanges(list(exs), CheckConfig(direct=True)).findings


def rules_of(*exs: Exchange) -> list[str]:
    return sorted({f.rule for f in run(*exs)})


def resp(events: list[dict[str, Any]], **kw: Any) -> Exchange:
    return aw.api_exchange(RESP, aw.responses_req(stream=True, **kw), aw.number(events))


def msg(events: list[dict[str, Any]], **kw: Any) -> Exchange:
    return aw.api_exchange(MSG, aw.messages_req(stream=True, **kw), events)


def renamed(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """The events with the get_weather call renamed (its id too)."""
    out: list[dict[str, Any]] = json.loads(json.dumps(events).replace("get_weather", name))
    return out


def without(events: list[dict[str, Any]], *types: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] not in types]


def edit(
    events: list[dict[str, Any]], kind: str, change: Callable[[dict[str, Any]], None]
) -> list[dict[str, Any]]:
    """The events with ``change`` applied to (a copy of) the first of ``kind``."""
    out = copy.deepcopy(events)
    change(next(e for e in out if e["type"] == kind))
    return out


# --- /v1/responses ------------------------------------------------------------------------------------


def _unknown_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Event types the checker does not know, where a newer server might send them."""
    out = list(events)
    out.insert(
        4,
        {
            "type": "response.output_text.annotation.added",
            "item_id": "rs_1",
            "output_index": 0,
            "annotation_index": 0,
            "annotation": {"type": "url_citation", "url": "https://example.org"},
        },
    )
    out.insert(1, {"type": "response.queued", "response": aw.response_object([], "in_progress")})
    out.insert(-1, {"type": "response.brand_new_event", "payload": {"x": 1}})
    return out


RESPONSES_LEGAL: dict[str, Callable[[], Exchange]] = {
    "vllm-0.32-message-parts": lambda: resp(
        aw.responses_events(content=("Sunny", ".")), tools=[aw.WEATHER_FLAT]
    ),
    "message-without-content-parts": lambda: resp(
        aw.responses_events(args_pieces=(), content=("Sunny",), message_parts=False)
    ),
    # arguments that arrive only in function_call_arguments.done, or only in output_item.done
    "arguments-only-in-arguments-done": lambda: resp(
        without(aw.responses_events(), "response.function_call_arguments.delta")
    ),
    "arguments-only-in-item-done": lambda: resp(
        without(
            aw.responses_events(),
            "response.function_call_arguments.delta",
            "response.function_call_arguments.done",
        )
    ),
    "text-only-in-done": lambda: resp(
        without(aw.responses_events(args_pieces=(), content=("Sunny",)), "response.output_text.delta")
    ),
    "event-types-newer-than-the-checker": lambda: resp(_unknown_events(aw.responses_events())),
    "a-call-without-arguments": lambda: resp(
        renamed(aw.responses_events(args_pieces=("{}",)), "now"), tools=[NO_ARGS_FLAT]
    ),
}


@pytest.mark.parametrize("name", sorted(RESPONSES_LEGAL))
def test_legal_responses_streams_check_clean(name: str) -> None:
    ex = RESPONSES_LEGAL[name]()
    assert [(f.rule, f.message) for f in run(ex)] == []


def test_the_arguments_of_a_done_only_call_are_judged() -> None:
    """Arguments whole in the .done event are the call's: the chat rules judge them."""
    events = without(
        aw.responses_events(args_pieces=('{"city": 7}',)), "response.function_call_arguments.delta"
    )
    found = [f for f in run(resp(events)) if f.rule == "tool-call-args-schema"]
    assert len(found) == 1 and str(found[0].fault) == "model"


def _set_content_index(e: dict[str, Any]) -> None:
    e["content_index"] = 1


def _call_id(value: str) -> Callable[[dict[str, Any]], None]:
    def change(e: dict[str, Any]) -> None:
        if e["item"]["type"] == "function_call":
            e["item"]["call_id"] = value

    return change


def _last_call_done(events: list[dict[str, Any]], **fields: Any) -> list[dict[str, Any]]:
    out = copy.deepcopy(events)
    done = [
        e for e in out if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    ][-1]
    done["item"].update(fields)
    return out


def _completed(
    events: list[dict[str, Any]], change: Callable[[list[dict[str, Any]]], None]
) -> list[dict[str, Any]]:
    out = copy.deepcopy(events)
    change(out[-1]["response"]["output"])
    return out


RESPONSES_BROKEN: dict[str, tuple[list[dict[str, Any]], str, str]] = {
    "delta at a content part never added": (
        edit(aw.responses_events(), "response.reasoning_text.delta", _set_content_index),
        "api-stream-order",
        "content_index 1",
    ),
    "content parts not counted from 0": (
        edit(aw.responses_events(), "response.content_part.added", _set_content_index),
        "api-stream-order",
        "expected 0",
    ),
    "call_id changed between added and done": (
        _last_call_done(aw.responses_events(), call_id="call_other"),
        "api-stream-disagrees",
        "call_id",
    ),
    "name changed in arguments.done": (
        edit(
            aw.responses_events(), "response.function_call_arguments.done", lambda e: e.update(name="search")
        ),
        "api-stream-disagrees",
        "names 'search'",
    ),
    "item type changed at done": (
        edit(aw.responses_events(), "response.output_item.done", lambda e: e["item"].update(type="message")),
        "api-stream-disagrees",
        "added as reasoning",
    ),
    "completed output empty": (
        _completed(aw.responses_events(), lambda out: out.clear()),
        "api-stream-disagrees",
        "empty output",
    ),
    "completed call_id differs from the stream's": (
        _completed(aw.responses_events(), lambda out: out[-1].update(call_id="call_other")),
        "api-stream-disagrees",
        "call 1 differs",
    ),
    "completed text differs from the stream's": (
        _completed(
            aw.responses_events(args_pieces=(), content=("Sunny",)),
            lambda out: out[-1]["content"][0].update(text="Rainy"),
        ),
        "api-stream-disagrees",
        "Rainy",
    ),
}


@pytest.mark.parametrize("name", sorted(RESPONSES_BROKEN))
def test_broken_responses_streams_are_the_engines(name: str) -> None:
    events, rule_id, words = RESPONSES_BROKEN[name]
    found = [f for f in run(resp(events)) if f.rule == rule_id]
    assert found, (name, [(f.rule, f.message) for f in run(resp(events))])
    assert {str(f.fault) for f in found} == {"engine"}
    assert any(words in f.message for f in found), [f.message for f in found]


def test_a_length_cut_response_completed_as_incomplete_is_length() -> None:
    events = aw.responses_events(args_pieces=('{"city": "To',))
    events[-1]["response"]["status"] = "incomplete"
    found = run(resp(events, max_output_tokens=12))
    assert {f.rule for f in found} == {"tool-call-args-truncated"}
    assert {str(f.fault) for f in found} == {"caller"}


# --- /v1/messages -------------------------------------------------------------------------------------


def _no_args_events() -> list[dict[str, Any]]:
    """A call to a tool without parameters: a tool_use block with no input_json_delta (the SDK keeps the
    block's input, {})."""
    events = aw.messages_events(args_pieces=())
    start = {
        "type": "content_block_start",
        "content_block": {"type": "tool_use", "id": "functions.now:0", "name": "now", "input": {}},
        "index": 1,
    }
    return [*events[:-2], start, {"type": "content_block_stop", "index": 1}, *events[-2:]]


def _empty_partials() -> list[dict[str, Any]]:
    """Anthropic's own servers open a tool_use block with an empty partial_json."""
    events = aw.messages_events()
    first = next(i for i, e in enumerate(events) if e.get("delta", {}).get("type") == "input_json_delta")
    blank = {
        "type": "content_block_delta",
        "delta": {"type": "input_json_delta", "partial_json": ""},
        "index": 1,
    }
    return [*events[:first], blank, *events[first:]]


def _with_unknown(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [events[0], {"type": "ping"}, {"type": "content_block_brand_new", "index": 0}, *events[1:]]


def _unsigned() -> list[dict[str, Any]]:
    """A thinking block with an empty signature and no signature_delta, as LiteLLM's Messages bridge
    writes it in front of a chat engine (which has no signature to give)."""
    events = [e for e in aw.messages_events() if e.get("delta", {}).get("type") != "signature_delta"]
    events[1]["content_block"]["signature"] = ""
    return events


MESSAGES_LEGAL: dict[str, Callable[[], Exchange]] = {
    "thinking-without-a-signature": lambda: msg(_unsigned()),
    "vllm-0.32-tool-call": lambda: msg(aw.messages_events()),
    "a-call-without-arguments": lambda: msg(_no_args_events(), tools=[NO_ARGS_TOOL]),
    "empty-partial-json-first": lambda: msg(_empty_partials()),
    "event-types-newer-than-the-checker": lambda: msg(_with_unknown(aw.messages_events())),
    "stop-sequence": lambda: msg(
        aw.messages_events(args_pieces=(), text=("Sunny",), stop_reason="stop_sequence", stop_sequence="###"),
        stop_sequences=["###"],
    ),
}


@pytest.mark.parametrize("name", sorted(MESSAGES_LEGAL))
def test_legal_messages_streams_check_clean(name: str) -> None:
    assert [(f.rule, f.message) for f in run(MESSAGES_LEGAL[name]())] == []


def _start(change: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    events = copy.deepcopy(aw.messages_events())
    change(events[0]["message"])
    return events


MESSAGES_BROKEN: dict[str, tuple[list[dict[str, Any]], str]] = {
    "message_start without type": (_start(lambda m: m.pop("type")), "type"),
    "message_start without role": (_start(lambda m: m.pop("role")), "role"),
    "message_delta without usage": (
        edit(aw.messages_events(), "message_delta", lambda e: e.pop("usage")),
        "usage",
    ),
}


@pytest.mark.parametrize("name", sorted(MESSAGES_BROKEN))
def test_incomplete_messages_events_are_the_engines(name: str) -> None:
    events, words = MESSAGES_BROKEN[name]
    found = [f for f in run(msg(events)) if f.rule == "api-stream-order"]
    assert found and {str(f.fault) for f in found} == {"engine"}, [
        (f.rule, f.message) for f in run(msg(events))
    ]
    assert any(words in f.message for f in found)
    assert {str(f.severity) for f in found} == {"error"}


def test_a_non_streamed_message_is_held_to_the_same_fields() -> None:
    body = aw.messages_body()
    del body["role"]
    found = [f for f in run(aw.api_exchange(MSG, aw.messages_req(), body)) if f.rule == "response-malformed"]
    assert [(str(f.severity), f.evidence["pointer"]) for f in found] == [("error", "/role")]


def test_a_stream_of_the_wrong_endpoint_rules_is_not_judged_by_chat_framing() -> None:
    """A typed stream ends without [DONE]: the chat framing rules do not run on it at all."""
    assert "stream-done-missing" not in rules_of(msg(aw.messages_events()[:-1]))
    assert "stream-done-missing" not in rules_of(resp(aw.responses_events()[:-1]))
    assert wire.K2  # the requests above name a K2 model


def test_a_background_response_still_queued_is_not_an_answer_yet() -> None:
    """background: true answers at once with status queued; the output comes later (GET by id)."""
    queued = aw.response_object([], "queued")
    assert run(aw.api_exchange(RESP, aw.responses_req(background=True), queued)) == []
    # the same status without background is an answer that never finished
    assert "finish-reason-missing" in rules_of(aw.api_exchange(RESP, aw.responses_req(), queued))
