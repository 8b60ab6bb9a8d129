"""A call cut by max_tokens is the caller's limit whatever finish_reason says.

A real vLLM 0.32 reports a tool call cut by max_tokens as ``finish_reason: tool_calls`` when not
streamed (``length`` when streamed), closes it with ``{}``, and for a cut inside the header names it
after the fragment (``functions.``) with a minted id. Judged from usage against the request's cap.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.wire import call, completion, exchange, message, tool_req, usage_counts
from wirecheck.contracts import CheckConfig, check_exchanges


def _usage(completion_tokens: int) -> dict[str, Any]:
    details = {"reasoning_tokens": 4}
    return usage_counts(186, completion_tokens, prompt_tokens_details=None, completion_tokens_details=details)


def _found(cap_key: str, cap: int, used: int, the_call: dict[str, Any]) -> list[tuple[str, str]]:
    body = completion(
        message(None, tool_calls=[the_call], reasoning="I call tools."), "tool_calls", usage=_usage(used)
    )
    ex = exchange(tool_req(**{cap_key: cap}), body)
    return [(f.rule, str(f.fault)) for f in check_exchanges([ex], CheckConfig(direct=True)).findings]


@pytest.mark.parametrize("cap_key", ["max_tokens", "max_completion_tokens"])
def test_cut_arguments_with_finish_tool_calls_are_the_callers_limit(cap_key: str) -> None:
    assert _found(cap_key, 14, 14, call(args="{}")) == [("tool-call-args-truncated", "caller")]


def test_cut_header_is_not_an_undeclared_tool_or_a_bad_id() -> None:
    cut = call(name="functions.", args="{}", id="chatcmpl-tool-b6f044739b1ca8a4")
    assert _found("max_tokens", 9, 9, cut) == [("tool-call-args-truncated", "caller")]


def test_a_call_that_ends_below_the_cap_is_still_the_models() -> None:
    # same wrong arguments, but 10 of 14 tokens used: nothing was cut, the model wrote {}
    assert _found("max_tokens", 14, 10, call(args="{}")) == [("tool-call-args-schema", "model")]


def test_a_complete_valid_call_that_used_the_whole_cap_is_fine() -> None:
    assert _found("max_tokens", 14, 14, call(args={"city": "Tokyo"})) == []


# --- stream vs non-stream when sampling (temperature > 0): structure and validity, not values ---


def _twins(stream_args: str, plain_args: str, **kw: Any) -> list[str]:
    from tests.support.wire import k2_tool_stream, streamed

    r = tool_req(temperature=0.7, **kw)
    plain = completion(message(None, tool_calls=[call(args=plain_args)]), "tool_calls")
    exs = [streamed(r, k2_tool_stream(args=stream_args)), exchange(r, plain)]
    return [
        f.message
        for f in check_exchanges(exs, CheckConfig(direct=True)).findings
        if f.rule == "stream-nonstream-mismatch"
    ]


def test_sampled_twins_with_different_values_agree() -> None:
    assert _twins('{"city": "Osaka"}', '{"city": "Tokyo"}') == []


def test_sampled_twins_where_only_the_stream_breaks_the_json_blame_the_model_once() -> None:
    # a sample may break JSON on one side only: that side's own rule reports it, and the twin
    # comparison stays silent rather than report the same sample twice (the shipped example)
    assert _twins('{"city": "Osaka"', '{"city": "Tokyo"}') == []
    r = tool_req(temperature=0.7)
    from tests.support.wire import k2_tool_stream, streamed

    plain = completion(message(None, tool_calls=[call(args='{"city": "Tokyo"}')]), "tool_calls")
    found = check_exchanges(
        [streamed(r, k2_tool_stream(args='{"city": "Osaka"')), exchange(r, plain)], CheckConfig(direct=True)
    ).findings
    assert [f.rule for f in found] == ["tool-call-args-invalid-json"]  # reported once, by its own rule
