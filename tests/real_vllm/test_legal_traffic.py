"""Legal traffic of every kind the openai SDK sends, against a real vLLM through wirecheck's proxy:
zero error or warning findings. A finding here is a false alarm on a real server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_vllm import traffic
from tests.support import wire
from wirecheck.record import Store


@pytest.fixture(scope="module")
def tap(real_vllm: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store]]:
    with traffic.tapped(real_vllm, tmp_path_factory.mktemp("legal")) as t:
        yield t


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("kind", sorted(traffic.LEGAL))
def test_legal_request_gives_no_finding(tap: tuple[str, Store], kind: str, stream: bool) -> None:
    url, store = tap
    kw: dict[str, Any] = dict(traffic.LEGAL[kind])
    with traffic.client(url) as c:
        out = traffic.call(c, stream=stream, **kw)
    assert out, "no answer"
    ex = traffic.exchange_of(store, traffic.response_id(out))
    assert ex.response is not None and ex.response.status == 200, ex.response
    assert traffic.serious(traffic.findings(ex)) == []


def test_the_default_agent_answers_sensibly(tap: tuple[str, Store]) -> None:
    """Unscripted requests get a small agent's answers, so accept and scenarios traffic makes sense."""
    url, _ = tap
    with traffic.client(url) as c:
        plain = traffic.call(c, stream=False, **traffic.LEGAL["plain"]).choices[0]
        tool = traffic.call(c, stream=False, **traffic.LEGAL["one-tool-call"]).choices[0]
        after = traffic.call(c, stream=False, **traffic.LEGAL["tool-results"]).choices[0]
    assert plain.message.content and plain.message.reasoning  # type: ignore[attr-defined]
    assert plain.finish_reason == "stop"
    [tc] = tool.message.tool_calls or []
    assert (tc.id, tc.function.name, tc.function.arguments) == (  # type: ignore[union-attr]
        "functions.get_weather:0",
        "get_weather",
        '{"city": "Tokyo"}',
    )
    assert tool.finish_reason == "tool_calls"
    assert after.message.content and "temp_c" in after.message.content


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_the_default_agent_numbers_its_calls_over_the_conversation(
    tap: tuple[str, Store], stream: bool
) -> None:
    """A retry after a failed tool result is the conversation's second call: Kimi K2 numbers call
    ids over the whole conversation, and a repeated id stops openai-agents and loops pydantic-ai."""
    url, _ = tap
    history = [
        *traffic.TOOL_HISTORY[:2],
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "error: timeout"},
    ]
    kw: dict[str, Any] = {"messages": history, "tools": [wire.WEATHER, wire.SEARCH]}
    with traffic.client(url) as c:
        out = traffic.call(c, stream=stream, **kw)
    if stream:
        ids = [tc.id for ch in out if ch.choices for tc in ch.choices[0].delta.tool_calls or [] if tc.id]
    else:
        ids = [tc.id for tc in out.choices[0].message.tool_calls or []]
    assert ids == ["functions.get_weather:1"]


def test_a_script_is_followed_exactly(real_vllm: str) -> None:
    with traffic.client(real_vllm) as c:
        r = traffic.call(
            c,
            stream=False,
            **traffic.LEGAL["plain"],
            extra_body=traffic.script("Why not.</think>Exactly this."),
        )
    m = r.choices[0].message
    assert (m.content, m.reasoning) == ("Exactly this.", "Why not.")  # type: ignore[attr-defined]
