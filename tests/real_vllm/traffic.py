"""Requests for the real_vllm tier: what the openai SDK sends, and scripts for the tiny model.

A script is the model's raw output after the chat template's generation prompt, which already opened
``<think>``: so a Kimi K2 script starts with the reasoning and ``</think>`` (scripts/realvllm/script_lp.py).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai

from tests.support import wire
from wirecheck.contracts import FAMILIES, CheckConfig, Exchange, Finding, check_exchanges
from wirecheck.proxy import ProxyApp, TapConfig, serve_listener
from wirecheck.record import Store

MODEL = wire.K2
SEC, SEC_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def k2_call(header: str, args: str) -> str:
    return f"<|tool_call_begin|>{header}<|tool_call_argument_begin|>{args}<|tool_call_end|>"


def k2_calls(*calls: tuple[str, str], reasoning: str = "I call tools.") -> str:
    return f"{reasoning}</think>{SEC}{''.join(k2_call(h, a) for h, a in calls)}{SEC_END}"


def script(text: str) -> dict[str, Any]:
    return {"vllm_xargs": {"script": text}}


TOOL_HISTORY = [
    {"role": "user", "content": "Use get_weather for Tokyo."},
    {
        "role": "assistant",
        "content": None,
        "reasoning": "I call the tool.",
        "tool_calls": [wire.call(args={"city": "Tokyo"})],
    },
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": '{"temp_c": 21}'},
]

CITY_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}

# Every kind of legal request the openai SDK sends, as keyword arguments to
# chat.completions.create; each runs streamed and not.
LEGAL: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": "Say hello."}]},
    "thinking-off": {
        "messages": [{"role": "user", "content": "Say hello."}],
        "extra_body": {"chat_template_kwargs": {"thinking": False}},
    },
    "one-tool-call": {
        "messages": [{"role": "user", "content": "Use get_weather for Tokyo."}],
        "tools": [wire.WEATHER, wire.SEARCH],
    },
    "two-tool-calls": {
        "messages": [{"role": "user", "content": "Weather in Tokyo and Osaka?"}],
        "tools": [wire.WEATHER, wire.SEARCH],
        "extra_body": script(
            k2_calls(
                ("functions.get_weather:0", '{"city": "Tokyo"}'),
                ("functions.get_weather:1", '{"city": "Osaka"}'),
            )
        ),
    },
    "tool-choice-auto": {
        "messages": [{"role": "user", "content": "Hello there."}],
        "tools": [wire.WEATHER, wire.SEARCH],
        "tool_choice": "auto",
    },
    "tool-choice-required": {
        "messages": [{"role": "user", "content": "Look something up."}],
        "tools": [wire.WEATHER, wire.SEARCH],
        "tool_choice": "required",
    },
    "tool-choice-named": {
        "messages": [{"role": "user", "content": "Find Kyoto."}],
        "tools": [wire.WEATHER, wire.SEARCH],
        "tool_choice": {"type": "function", "function": {"name": "search"}},
    },
    "json-object": {
        "messages": [{"role": "user", "content": "Answer in JSON."}],
        "response_format": {"type": "json_object"},
    },
    "json-schema": {
        "messages": [{"role": "user", "content": "Which city? Answer in JSON."}],
        "response_format": CITY_SCHEMA,
        "extra_body": script('A city.</think>{"city": "Tokyo"}'),
    },
    "tool-results": {"messages": TOOL_HISTORY, "tools": [wire.WEATHER, wire.SEARCH]},
}


@contextlib.contextmanager
def tapped(upstream: str, tmp: Path) -> Iterator[tuple[str, Store]]:
    """A wirecheck proxy (one tap, straight in front of the engine) over real loopback sockets."""
    store = Store(tmp / "wc.db", writer=True)
    try:
        with serve_listener(ProxyApp(TapConfig(upstream=upstream), store)) as url:
            yield url, store
    finally:
        store.close()


def model_of(family: str) -> str:
    """The served model name of ``family``'s tiny model (the family table's example model)."""
    return FAMILIES[family].example_model


def client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0, timeout=60)


def call(c: openai.OpenAI, *, stream: bool, **kw: Any) -> Any:
    kw.setdefault("model", MODEL)
    if stream:
        kw.setdefault("stream_options", {"include_usage": True})
        with c.chat.completions.create(stream=True, **kw) as s:
            return list(s)
    return c.chat.completions.create(**kw)


def response_id(out: Any) -> str:
    """The chat completion id of an SDK answer (a completion or the list of a stream's chunks)."""
    return str(out[0].id if isinstance(out, list) else out.id)


def exchange_of(store: Store, rid: str) -> Exchange:
    """The recorded exchange whose response carries the completion id ``rid``, once written whole."""
    needle = f'"id":"{rid}"'.encode()
    for _ in range(2000):
        store.flush()
        for ex in store.exchanges():
            if ex.response is not None and needle in ex.response.content:
                return ex
        time.sleep(0.01)
    raise AssertionError(f"the proxy never recorded {rid}")


def findings(ex: Exchange, **cfg: Any) -> list[Finding]:
    return check_exchanges([ex], CheckConfig(direct=True, **cfg)).findings


def serious(found: list[Finding]) -> list[str]:
    return [f"{f.rule} ({f.severity}, {f.fault}): {f.message}" for f in found if str(f.severity) != "info"]


def body_json(ex: Exchange) -> Any:
    return json.loads(ex.response.content) if ex.response and ex.response.content else None
