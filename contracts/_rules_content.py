"""Rules on the assembled assistant message's text: finish_reason, markup left in content or
reasoning, reasoning itself, structured output. Split from ``_rules_message`` (no module over
600 lines), whose helpers they share."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from ._assembly import AssembledChoice
from ._json import JsonLimitError
from ._json import loads as bounded_loads
from ._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP, find_markup
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Hit, Severity, hit, rule
from ._rules_message import _cap_fault, _forced_name, _not_validated, _stopped_by_length, schema_errors
from ._view import ExchangeView

_KNOWN_FINISH = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call", "repetition", "abort", "error"}
)

# --- finish_reason ---------------------------------------------------------------------------------


@rule("finish-reason-mismatch", fault=Fault.PARSER, area="tools", endpoints=ALL_ENDPOINTS)
def _finish(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """finish_reason disagrees with the tool calls of the message.

    ``tool_calls`` needs calls (an empty one is vllm #54701); calls with ``stop`` are wrong for
    vLLM unless a named ``tool_choice`` forced them (a warning: some upstreams legitimately do it, so
    the dual tap decides); ``length`` stays ``length`` with partial calls."""
    if not view.ok:
        return
    for ch in view.choices:
        ptr = f"/choices/{ch.index}/finish_reason"
        if ch.finish_reason == "tool_calls" and not ch.calls:
            yield hit(
                "finish_reason is tool_calls but the message has no tool calls", ptr, event=ch.finish_event
            )
        elif ch.finish_reason == "stop" and ch.calls and _forced_name(view) is None:
            yield hit(
                "message has tool calls but finish_reason is stop (vLLM sends tool_calls)",
                ptr,
                severity=Severity.WARNING,
                event=ch.finish_event,
            )


@rule("finish-reason-missing", fault=Fault.ENGINE, area="tools", endpoints=ALL_ENDPOINTS)
def _finish_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A choice ends without a finish_reason, or with one outside the known set.

    Every choice ends with one of stop, length, tool_calls, content_filter, repetition. A stream cut
    by the transport is reported by ``transport-error`` instead."""
    if not view.ok:
        return
    for ch in view.choices:
        ptr = f"/choices/{ch.index}/finish_reason"
        if ch.finish_reason is None:
            yield hit("choice has no finish_reason", ptr)
        elif ch.finish_reason not in _KNOWN_FINISH:
            yield hit(
                f"unknown finish_reason {ch.finish_reason!r}",
                ptr,
                ch.finish_reason,
                severity=Severity.WARNING,
            )


# --- markup in text --------------------------------------------------------------------------------


def _markup_left(
    markup: re.Pattern[str], field: str, message: str
) -> Callable[[ExchangeView, CheckConfig], Iterator[Hit]]:
    """A rule for markup a parser should have mapped, left in ``content`` or ``reasoning`` of a choice."""

    def check(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
        if not view.ok:
            return
        for ch in view.choices:
            m = find_markup(markup, ch.content if field == "content" else ch.reasoning)
            if m:
                yield hit(message, f"/choices/{ch.index}/message/{field}", m[1])

    return check


# the rules differ only in the markup, the field and the message: rule id, fault, summary,
# doc, and what the check looks for
for _id, _fault, _summary, _doc, _check in (
    (
        "tool-markup-in-content",
        Fault.PARSER,
        "Tool-call markup of any family (K2 tokens, K3 <|open|>tools, <tool_call>) left in content.",
        """The model wrote a call and the tool parser did not map it (vllm #39056, #42021, #51073), or
        no tool parser is configured.""",
        _markup_left(
            TOOL_MARKUP, "content", "tool-call markup in content: the tool parser did not map the call"
        ),
    ),
    (
        "tool-call-in-reasoning",
        Fault.MODEL,
        "Tool-call markup inside reasoning: the model called a tool before its thinking closed.",
        "A call written before ``</think>`` lands in reasoning, where no tool parser looks.",
        _markup_left(
            TOOL_MARKUP, "reasoning", "tool-call markup inside reasoning: a call before </think> closed"
        ),
    ),
    (
        "reasoning-markup-in-content",
        Fault.PARSER,
        "Think markup (</think>, <|open|>think) left in content.",
        "The reasoning parser did not split reasoning from the answer.",
        _markup_left(
            REASONING_MARKUP, "content", "reasoning markup in content: the reasoning parser did not split it"
        ),
    ),
):
    rule(_id, fault=_fault, area="markup", summary=_summary, doc=_doc, endpoints=ALL_ENDPOINTS)(_check)


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


# --- reasoning -------------------------------------------------------------------------------------


def reasoning_expected(view: ExchangeView, ctx: CheckConfig) -> bool:
    kwargs = view.req.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("thinking", "enable_thinking"):
            if key in kwargs:
                return kwargs[key] is True
    effort = view.req.get("reasoning_effort")
    if isinstance(effort, str):
        return effort.lower() not in ("none", "minimal")
    if view.req.get("include_reasoning") is False:
        return False
    # Not inferred from the model name: thinking models may skip reasoning on some turns, and a
    # false alarm is a defect too. --expect-reasoning says so for a whole capture.
    return ctx.expect_reasoning is True


@rule("reasoning-missing", fault=Fault.PARSER, area="reasoning", endpoints=ALL_ENDPOINTS)
def _reasoning_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Thinking is on but the response has no reasoning field.

    Expected when the request turns thinking on (``chat_template_kwargs.thinking``, ``enable_thinking``,
    ``reasoning_effort``) or ``--expect-reasoning`` is given. Both
    ``reasoning`` (vLLM 0.16+) and ``reasoning_content`` count. Think markup left in content is
    ``reasoning-markup-in-content`` instead."""
    if not view.ok or not reasoning_expected(view, ctx):
        return
    for ch in view.choices:
        if ch.reasoning or ch.reasoning_fields - {"reasoning", "reasoning_content"}:
            continue
        if find_markup(REASONING_MARKUP, ch.content):
            continue
        if not ch.reasoning_fields and not ch.extra_delta_keys & {"reasoning_details", "thinking"}:
            yield hit(
                "thinking is on but no reasoning arrived (check --reasoning-parser)",
                f"/choices/{ch.index}/message/reasoning",
            )


@rule("reasoning-shape", fault=Fault.PARSER, area="reasoning", endpoints=ALL_ENDPOINTS)
def _reasoning_shape(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Reasoning is not a string, or reasoning and reasoning_content disagree.

    Reasoning is text in ``reasoning`` or ``reasoning_content``; vLLM 0.11-0.15 send both with the
    same value, which is legal. An object there (envoyproxy/ai-gateway #2318) breaks clients."""
    for a in view.anomalies:
        if a.kind == "reasoning-not-string":
            yield hit("reasoning is not a string", a.pointer, a.detail, event=a.event)
        elif a.kind == "reasoning-conflict":
            yield hit(
                "reasoning and reasoning_content carry different text", a.pointer, a.detail, event=a.event
            )


# --- structured output -----------------------------------------------------------------------------


def output_constraint(req: dict[str, Any]) -> tuple[str, Any] | None:
    """("json_object", None) | ("json_schema", schema) | ("regex", pattern) | ("choice", [...]) or None."""
    rf = req.get("response_format")
    if isinstance(rf, dict):
        kind = rf.get("type")
        if kind == "json_object":
            return "json_object", None
        if kind == "json_schema":
            js = rf.get("json_schema")
            return "json_schema", js.get("schema", {}) if isinstance(js, dict) else {}
    so = req.get("structured_outputs")
    if isinstance(so, dict):
        if so.get("json") is not None:
            schema = so["json"]
            if isinstance(schema, str):
                try:
                    schema = bounded_loads(schema)
                except ValueError:
                    schema = {}
            return "json_schema", schema
        if so.get("json_object"):
            return "json_object", None
        if isinstance(so.get("regex"), str):
            return "regex", so["regex"]
        if isinstance(so.get("choice"), list):
            return "choice", so["choice"]
    return None


_THINK_END = re.compile(r"</think>|<\|close\|>think<\|sep\|>")


def _constrained_choices(view: ExchangeView) -> Iterator[tuple[AssembledChoice, str, Any]]:
    """Choices under an output constraint, with content as the answer part: reasoning the parser left
    in content is reported by reasoning-markup-in-content, and only what follows it is judged here."""
    if not view.ok:
        return
    c = output_constraint(view.req)
    if c is None:
        return
    for ch in view.choices:
        if ch.calls and not ch.content:
            continue  # the model answered with a tool call
        if ch.content and _THINK_END.search(ch.content):
            answer = AssembledChoice(
                ch.index, content=_THINK_END.split(ch.content)[-1], finish_reason=ch.finish_reason
            )
            yield answer, c[0], c[1]
            continue
        yield ch, c[0], c[1]


@rule("json-output-invalid", fault=Fault.MODEL, area="output", endpoints=ALL_ENDPOINTS)
def _json_invalid(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """response_format / structured_outputs asked for JSON and content is not JSON (or not an object).

    With ``json_object`` the content is a JSON object; with ``json_schema`` it is JSON. Cut by
    ``length`` is ``json-output-truncated`` instead."""
    for ch, kind, _ in _constrained_choices(view):
        if kind not in ("json_object", "json_schema") or _stopped_by_length(ch, view):
            continue
        ptr = f"/choices/{ch.index}/message/content"
        try:
            value = bounded_loads(ch.content or "")
        except ValueError:
            yield hit("content is not JSON although JSON output was requested", ptr, ch.content)
            continue
        if kind == "json_object" and not isinstance(value, dict):
            yield hit(
                f"content is a JSON {type(value).__name__}, json_object asks for an object", ptr, ch.content
            )


@rule(
    "json-output-truncated",
    fault=Fault.CALLER,
    severity=Severity.WARNING,
    area="output",
    endpoints=ALL_ENDPOINTS,
)
def _json_truncated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Requested JSON output was cut off by finish_reason length.

    Not the model's fault: the token cap stopped it mid-document."""
    for ch, kind, _ in _constrained_choices(view):
        if kind in ("json_object", "json_schema") and _stopped_by_length(ch, view):
            try:
                bounded_loads(ch.content or "")
            except ValueError:
                fault, why = _cap_fault(view)
                yield hit(
                    f"JSON output incomplete; {why}",
                    f"/choices/{ch.index}/message/content",
                    ch.content,
                    fault=fault,
                )


@rule("json-output-schema", fault=Fault.MODEL, area="output", endpoints=ALL_ENDPOINTS)
def _json_schema(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """JSON output breaks the requested schema.

    Validated against ``response_format.json_schema.schema`` (or ``structured_outputs.json``)."""
    for ch, kind, schema in _constrained_choices(view):
        if kind != "json_schema":
            continue
        try:
            value = bounded_loads(ch.content or "")
        except ValueError:
            continue
        try:
            errors = schema_errors(schema, value)
        except JsonLimitError as exc:
            yield _not_validated(str(exc), f"/choices/{ch.index}/message/content")
            continue
        if errors:
            yield hit("; ".join(errors), f"/choices/{ch.index}/message/content", ch.content)


@rule("structured-output-violated", fault=Fault.MODEL, area="output", endpoints=ALL_ENDPOINTS)
def _structured(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Content does not match the structured_outputs regex or choice.

    ``structured_outputs.choice``: content is one of the choices; ``regex``: it matches whole."""
    for ch, kind, arg in _constrained_choices(view):
        if _stopped_by_length(ch, view):
            continue
        text = ch.content or ""
        ptr = f"/choices/{ch.index}/message/content"
        if kind == "choice" and text not in arg:
            yield hit(f"content is not one of {arg!r}", ptr, text)
        elif kind == "regex":
            try:
                if re.fullmatch(arg, text) is None:
                    yield hit(f"content does not match {arg!r}", ptr, text)
            except re.error:
                continue
