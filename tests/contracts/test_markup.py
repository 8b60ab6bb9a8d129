"""Markup a parser left in the answer's text is the parser's, in content and in reasoning alike, and a
call written as JSON text is a call the parser missed; JSON that is an answer, not a call, stays
clean."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support.wire import call, completion, exchange, message, req, tool_req, usage_counts
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

K2_CALL = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
QWEN_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Tokyo"}}\n</tool_call>'


def found(ex: Exchange) -> dict[str, str]:
    res = check_exchanges([ex], CheckConfig(direct=True))
    return {f.rule: str(f.fault) for f in res.findings if f.severity != "info"}


# --- a call written as JSON text -----------------------------------------------------------------------

JSON_CALLS = {
    "name and arguments": {"name": "get_weather", "arguments": {"city": "Tokyo"}},
    "name and parameters (Llama 4)": {
        "type": "function",
        "name": "get_weather",
        "parameters": {"city": "Tokyo"},
    },
    "under function": {
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Tokyo"}'},
    },
    "a list of calls": [{"name": "get_weather", "arguments": {"city": "Tokyo"}}],
}


@pytest.mark.parametrize("shape", sorted(JSON_CALLS))
def test_a_call_left_as_json_text_is_the_parsers(shape: str) -> None:
    text = json.dumps(JSON_CALLS[shape])
    assert found(exchange(tool_req(), completion(message(text)))) == {"tool-markup-in-content": "parser"}
    fenced = f"```json\n{text}\n```"
    assert found(exchange(tool_req(), completion(message(fenced)))) == {"tool-markup-in-content": "parser"}


JSON_ANSWERS: dict[str, tuple[dict[str, Any], str]] = {
    "JSON that names no declared tool": (tool_req(), '{"name": "Tokyo", "population": 14000000}'),
    "a call of an undeclared tool described as data": (
        tool_req(),
        '{"name": "delete_all", "arguments": {}}',
    ),
    "JSON output asked for": (
        tool_req(response_format={"type": "json_object"}),
        '{"name": "get_weather", "arguments": {"city": "Tokyo"}}',
    ),
    "no tools declared": (req(), '{"name": "get_weather", "arguments": {"city": "Tokyo"}}'),
}


@pytest.mark.parametrize("name", sorted(JSON_ANSWERS))
def test_json_that_is_an_answer_stays_clean(name: str) -> None:
    request, text = JSON_ANSWERS[name]
    assert found(exchange(request, completion(message(text)))) == {}


def test_a_call_as_json_text_on_messages_is_found_too() -> None:
    text = '{"type": "function", "name": "get_weather", "parameters": {"city": "Tokyo"}}'
    ex = aw.api_exchange("/v1/messages", aw.messages_req(), aw.text_message(text))
    assert found(ex) == {"tool-markup-in-content": "parser"}


# --- markup in reasoning ----------------------------------------------------------------------------


def test_a_call_left_in_reasoning_is_the_parsers_and_explains_the_empty_answer() -> None:
    """vLLM's parsers end reasoning where a call opens; a call left there never became a tool call, so
    the empty answer and the unclosed-looking reasoning are that one miss, not more findings."""
    body = completion(message(None, reasoning="Weather first.\n" + QWEN_CALL), usage=usage_counts(40, 30))
    assert found(exchange(tool_req(model="Qwen/Qwen3-8B"), body)) == {"tool-call-in-reasoning": "parser"}
    required = exchange(tool_req(model="Qwen/Qwen3-8B", tool_choice="required"), body)
    assert found(required) == {"tool-call-in-reasoning": "parser", "tool-choice-violated": "parser"}


def test_a_section_token_beside_a_parsed_call_is_a_leak() -> None:
    body = completion(
        message(None, reasoning="Check the weather." + K2_CALL[:28], tool_calls=[call()]), "tool_calls"
    )
    res = check_exchanges([exchange(tool_req(), body)], CheckConfig(direct=True))
    [f] = [f for f in res.findings if f.rule == "tool-call-in-reasoning"]
    assert str(f.fault) == "parser" and "leaked" in f.message


def test_a_tool_name_that_carries_a_special_token_is_the_parsers() -> None:
    bad = call("get_weather<|channel|>commentary")
    assert found(exchange(tool_req(), completion(message(None, tool_calls=[bad]), "tool_calls"))) == {
        "tool-call-undeclared": "parser"
    }
    # a plain undeclared name stays the model's
    other = call("get_forecast")
    assert found(exchange(tool_req(), completion(message(None, tool_calls=[other]), "tool_calls"))) == {
        "tool-call-undeclared": "model"
    }
