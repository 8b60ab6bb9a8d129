"""Rules on model markup left in the text of an answer: tool calls, thinking, special tokens.

A parser that works turns every family's markup into wire fields (``_markup``); what is left in
``content`` or ``reasoning`` is what a parser did not map. vLLM 0.32's parsers end the reasoning at a
tool-call opener (the ``(REASONING, TOOL_START)`` transitions of ``vllm/parser/kimi_k2.py``,
``qwen3.py``, ``minimax_m2.py`` and the other engine-based parsers), so a call the model writes while
thinking is parsed as a call: one left in reasoning is the parser's hand-off failing, not the model's.

A call can also be left as plain JSON text (``{"name": ..., "arguments": ...}``): a parser that
expected another format (Llama 4's pythonic parser given JSON: vllm #46863) or none configured.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._json import JsonLimitError
from ._json import loads as bounded_loads
from ._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP, find_markup
from ._registry import ALL_ENDPOINTS, REASONING, CheckConfig, Fault, Hit, hit, rule
from ._rules_content import thinking_off
from ._view import ExchangeView, output_constraint

__all__ = ["json_call"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


def json_call(text: str | None, tools: dict[str, Any]) -> str | None:
    """The declared tool that ``text`` calls when the whole text is a tool call written as JSON: an
    object (or a list of them) with a declared ``name`` and its ``arguments`` or ``parameters``, or
    the same under ``function``. None otherwise."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not tools or not body.startswith(("{", "[")):
        return None
    try:
        value = bounded_loads(body)
    except (ValueError, JsonLimitError):
        return None
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            continue
        inner = item.get("function")
        call: dict[str, Any] = inner if isinstance(inner, dict) else item
        name = call.get("name")
        args = call.get("arguments", call.get("parameters"))
        if isinstance(name, str) and name in tools and isinstance(args, dict | str):
            return name
    return None


@rule("tool-markup-in-content", fault=Fault.PARSER, area="markup", endpoints=ALL_ENDPOINTS)
def _tool_markup(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool-call markup of any family (K2 tokens, K3 <|open|>tools, <tool_call>) left in content, or a call written there as JSON.

    The model wrote a call and the tool parser did not map it (vllm #39056, #42021, #51073), or no
    tool parser is configured; a content that is a whole JSON call of a declared tool (``{"name",
    "arguments"}`` or ``"parameters"``) is the same miss by a parser that expected another format
    (vllm #46863). Not judged under ``tool_choice: none``, where no parser runs and the call is the
    model's (tool-choice-violated), nor as JSON when the request asked for JSON output."""
    if not view.ok or view.req.get("tool_choice") == "none":
        return
    constrained = output_constraint(view.req) is not None
    for ch in view.choices:
        ptr = f"/choices/{ch.index}/message/content"
        m = find_markup(TOOL_MARKUP, ch.content)
        if m:
            yield hit("tool-call markup in content: the tool parser did not map the call", ptr, m[1])
        elif not constrained and (name := json_call(ch.content, view.tools)) is not None:
            yield hit(
                f"the content is a call to {name} written as JSON: the tool parser did not map it",
                ptr,
                ch.content,
            )


@rule(
    "tool-call-in-reasoning", fault=Fault.PARSER, area="markup", endpoints=ALL_ENDPOINTS, needs=(REASONING,)
)
def _tool_in_reasoning(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool-call markup inside reasoning: the reasoning parser did not hand the call to the tool parser.

    vLLM's parsers end the reasoning where a call opens (a model may call straight from its
    thinking, without ``</think>``): a call left in reasoning never reaches ``tool_calls`` (vllm
    #39056; K3 leaving its think channel for the tools channel: vllm #54273), and a section token
    beside a call that was parsed leaked from the parser's state (Kimi-K2 #89, vllm PR #28543)."""
    if not view.ok:
        return
    for ch in view.choices:
        m = find_markup(TOOL_MARKUP, ch.reasoning)
        if m is None:
            continue
        why = (
            "a token of the parsed call leaked into reasoning"
            if ch.calls
            else "the reasoning parser did not end the reasoning where the call opened, so it never became a tool call"
        )
        yield hit(f"tool-call markup inside reasoning: {why}", f"/choices/{ch.index}/message/reasoning", m[1])


@rule("reasoning-markup-in-content", fault=Fault.PARSER, area="markup", endpoints=ALL_ENDPOINTS)
def _think_markup(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Think markup (</think>, <|open|>think) left in content.

    The reasoning parser did not split reasoning from the answer. Where no reasoning parser was meant
    to split it (the family has none, the request turned thinking off, or the family does not think
    unasked and nothing asked), the parser passes the model's text through as it should: the markup
    is the model's."""
    if not view.ok:
        return
    for ch in view.choices:
        m = find_markup(REASONING_MARKUP, ch.content)
        if not m:
            continue  # (who wrote it is asked only of markup found: most answers have none)
        if thinking_off(view, ctx):
            yield hit(
                "reasoning markup in content, with thinking off: the model wrote it",
                f"/choices/{ch.index}/message/content",
                m[1],
                fault=Fault.MODEL,
            )
        else:
            yield hit(
                "reasoning markup in content: the reasoning parser did not split it",
                f"/choices/{ch.index}/message/content",
                m[1],
            )


@rule("special-token-leak", fault=Fault.PARSER, area="markup", endpoints=ALL_ENDPOINTS)
def _special(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Other special tokens (<|close|>message<|sep|>, <|im_end|>) in content or reasoning.

    Kimi chat-template and channel tokens that no field should carry (vllm #51399, PR #38579).
    Text already reported as tool or think markup is not reported twice."""
    if not view.ok:
        return
    for ch in view.choices:
        for name, text in (("content", ch.content), ("reasoning", ch.reasoning)):
            if not text:
                continue
            if find_markup(TOOL_MARKUP, text) or find_markup(REASONING_MARKUP, text):
                continue
            m = find_markup(SPECIAL_TOKENS, text)
            if m:
                yield hit(f"special token in {name}", f"/choices/{ch.index}/message/{name}", m[1])
