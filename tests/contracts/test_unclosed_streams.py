"""A thinking that never closed, streamed by a real vLLM 0.32 under load: the same answer, the tokens
grouped into deltas two ways, gets the same finding.

vLLM 0.32's engine parsers count reasoning tokens delta by delta, and the delta that carries the end
of sequence counts nowhere (the stop token's text is not in the delta's text, so the lexer cannot
place the delta's tokens: vllm/parser/engine/token_id_scanner.py). One token a delta, the EOS comes
alone and the count is exact; under load the engine's steps are merged into one delta and the
reasoning that came with the end is missing from ``reasoning_tokens``. The captures in data/ are the
real server's bytes, through wirecheck's proxy, for one request each (data/*.req.json), once one
token a delta and once grouped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.wire import chunk, exchange, req, role_chunk, streamed, tool_req, usage_chunk
from wirecheck.contracts import CheckConfig, Exchange, build_view, check_exchanges
from wirecheck.contracts._evidence import wire_tokens
from wirecheck.contracts._exchange import HttpRequest

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

DATA = Path(__file__).with_name("data")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses"}


def captured(api: str, grouping: str) -> Exchange:
    ex = exchange(
        (DATA / f"vllm032-k2-unclosed-{api}.req.json").read_bytes(),
        (DATA / f"vllm032-k2-unclosed-{api}-{grouping}.sse").read_bytes(),
        stream=True,
    )
    ex.request = HttpRequest("POST", PATHS[api], ex.request.headers, ex.request.body)
    return ex


def judged(ex: Exchange) -> set[tuple[str, str]]:
    found = check_exchanges([ex], CheckConfig(direct=True)).findings
    return {(f.rule, str(f.fault)) for f in found if str(f.severity) != "info"}


def reasoning_tokens(ex: Exchange) -> int:
    usage: Any = build_view(ex).usage
    details = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    return int(details["reasoning_tokens"])


@pytest.mark.parametrize("api", PATHS)
def test_an_unclosed_thinking_is_found_whichever_way_its_tokens_were_grouped(api: str) -> None:
    tokenwise, grouped = captured(api, "tokenwise"), captured(api, "grouped")
    one, other = build_view(tokenwise), build_view(grouped)
    # one answer, one usage total, two counts of its reasoning
    assert one.choices[0].reasoning == other.choices[0].reasoning
    assert one.usage is not None and other.usage is not None
    assert reasoning_tokens(grouped) < reasoning_tokens(tokenwise)
    assert judged(tokenwise) == judged(grouped) == {("reasoning-unclosed", "model")}


def _stream(
    request: dict[str, Any], *deltas: tuple[str, str | None], completion: int, reasoning: int
) -> Exchange:
    """A K2 chat stream of reasoning deltas (text, finish_reason) and its usage."""
    usage = usage_chunk(180, completion)
    usage["usage"]["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    objs = [role_chunk(), *(chunk({"reasoning": piece}, finish) for piece, finish in deltas), usage]
    return streamed({**request, "stream_options": {"include_usage": True}}, objs)


def test_a_long_reasoning_that_came_with_the_end_is_not_called_vanished() -> None:
    # 40 reasoning tokens in the delta that ended the answer, none of them counted: the token
    # accounting must not read them as output the parser dropped
    ex = _stream(req(), ("Thinking", None), (" and on" * 40, "stop"), completion=42, reasoning=1)
    t = wire_tokens(build_view(ex))
    assert t is not None and t.vanished == 0
    assert judged(ex) == {("reasoning-unclosed", "model")}


@pytest.mark.parametrize(
    "deltas",
    [[("I call tools.", None), ("", "stop")], [("I call tools.", "stop")]],
    ids=["end-alone", "end-with-the-reasoning"],
)
def test_tokens_dropped_after_a_closed_thinking_stay_the_parsers_in_any_grouping(
    deltas: list[tuple[str, str | None]],
) -> None:
    # the K2 header without :N after "I call tools.</think>": 22 tokens, 4 of them reasoning. Once
    # the thinking closed the real parser counts exactly in every grouping tried, so even with the
    # reasoning in the last delta the 18 tokens outside it were written and dropped
    assert judged(_stream(tool_req(), *deltas, completion=22, reasoning=4)) == {("answer-empty", "parser")}
