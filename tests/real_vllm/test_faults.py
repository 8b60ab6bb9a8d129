"""Scripted model faults and real parser behaviours on a real vLLM 0.32: each gives the
right rule and blame through wirecheck's proxy, or is listed with the reason nothing can be seen.

Cases are scripts of the model's raw output (the Kimi K2 markup), streamed (with usage) and not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.real_vllm import traffic
from tests.real_vllm.traffic import k2_call, k2_calls
from tests.support import wire
from wirecheck.record import Store

TOKYO = ("functions.get_weather:0", '{"city": "Tokyo"}')

#: a scripted fault: (script, extra request fields, {(rule, fault)} expected whole, expected streamed)
Case = tuple[str, dict[str, Any], set[tuple[str, str]], set[tuple[str, str]]]


def _alike(script: str, rule: str, fault: str, **extra: Any) -> Case:
    """A fault that gives the same one finding whole and streamed."""
    return (script, extra, {(rule, fault)}, {(rule, fault)})


SEEN: dict[str, Case] = {
    "invalid-json": _alike(
        k2_calls(("functions.get_weather:0", '{"city": Tokyo}')), "tool-call-args-invalid-json", "model"
    ),
    "schema-violation": _alike(
        k2_calls(("functions.get_weather:0", '{"days": 3}')), "tool-call-args-schema", "model"
    ),
    "undeclared-tool": _alike(k2_calls(("functions.delete_all:0", "{}")), "tool-call-undeclared", "model"),
    # the real parser drops a call whose header lacks :N (vllm/parser/kimi_k2.py's _TOOL_ID_RE) with
    # no trace: only usage shows the tokens, and tokens written that never reach the wire are the
    # parser's to lose (as minimax_m2 dropping an undeclared call, test_family_faults.py)
    "header-without-index": _alike(
        k2_calls(("functions.get_weather", '{"city": "Tokyo"}')), "answer-empty", "parser"
    ),
    "unclosed-think": _alike("Thinking forever and never closing", "reasoning-unclosed", "model"),
    "think-markup-in-content": _alike(
        "ok</think>Hello <think>more</think> there", "reasoning-markup-in-content", "parser"
    ),
    # non-streamed finish_reason is tool_calls here, streamed length: both are the caller's max_tokens
    "cut-in-arguments": _alike(
        k2_calls(("functions.get_weather:0", '{"city": "Tokyo", "days": 3}')),
        "tool-call-args-truncated",
        "caller",
        max_tokens=14,
    ),
    "cut-in-header": _alike(k2_calls(TOKYO), "tool-call-args-truncated", "caller", max_tokens=9),
    # non-streamed arguments are coerced to the schema's types (42 -> "42"), streamed ones are not:
    # only the stream shows the model's mistake
    "wrong-type-coerced": (
        k2_calls(("functions.get_weather:0", '{"city": 42}')),
        {},
        set(),
        {("tool-call-args-schema", "model")},
    ),
}

# Faults a real vLLM hides from the wire, so no rule can see them (listed in docs/real-vllm.md):
UNSEEN: dict[str, str] = {
    # the kimi_k2 parser takes a call written inside the thinking out of the reasoning
    "call-in-think": "I think <|tool_calls_section_begin|>"
    + k2_call(*TOKYO)
    + "<|tool_calls_section_end|></think>",
    # text after <|tool_calls_section_end|> is suppressed by the parser
    "text-after-section": k2_calls(TOKYO) + "trailing words",
    # special tokens are skipped when detokenizing (skip_special_tokens defaults to true)
    "special-token": "ok</think>Hello <|im_user|> there",
}


@pytest.fixture(scope="module")
def tap(real_vllm: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Store]]:
    with traffic.tapped(real_vllm, tmp_path_factory.mktemp("faults")) as t:
        yield t


def _run(tap: tuple[str, Store], script: str, stream: bool, **extra: Any) -> set[tuple[str, str]]:
    url, store = tap
    kw: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Weather in Tokyo?"}],
        "tools": [wire.WEATHER, wire.SEARCH],
        "extra_body": traffic.script(script),
        **extra,
    }
    with traffic.client(url) as c:
        out = traffic.call(c, stream=stream, **kw)
    ex = traffic.exchange_of(store, traffic.response_id(out))
    return {(f.rule, str(f.fault)) for f in traffic.findings(ex) if str(f.severity) != "info"}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("name", sorted(SEEN))
def test_fault_gives_rule_and_blame(tap: tuple[str, Store], name: str, stream: bool) -> None:
    script, extra, whole, streamed = SEEN[name]
    assert _run(tap, script, stream, **extra) == (streamed if stream else whole)


@pytest.mark.parametrize("name", sorted(UNSEEN))
def test_fault_the_real_server_hides(tap: tuple[str, Store], name: str) -> None:
    """Nothing on the wire shows these: the answer is indistinguishable from a clean one."""
    assert _run(tap, UNSEEN[name], True) == set()
