"""Rules on the assembled assistant message's text: finish_reason, markup left in content or
reasoning, reasoning itself, structured output. Split from ``_rules_message`` (no module over
600 lines), whose helpers they share."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._assembly import AssembledChoice
from ._families import FAMILIES
from ._json import JsonLimitError
from ._json import loads as bounded_loads
from ._markup import REASONING_MARKUP, find_markup
from ._registry import (
    ALL_ENDPOINTS,
    ANOMALY,
    CHAT,
    CONSTRAINT,
    MESSAGES,
    RESPONSES,
    CheckConfig,
    Fault,
    Hit,
    Severity,
    hit,
    rule,
)
from ._rules_message import (
    _cap_fault,
    _forced_name,
    _not_validated,
    _stopped_by_length,
    family_of,
    schema_errors,
    stop_sequence,
)
from ._view import ExchangeView, output_constraint

_KNOWN_FINISH = frozenset(
    {"stop", "length", "tool_calls", "content_filter", "function_call", "repetition", "abort", "error"}
)

# --- finish_reason ---------------------------------------------------------------------------------


@rule("finish-reason-mismatch", fault=Fault.PARSER, area="tools", endpoints=ALL_ENDPOINTS)
def _finish(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """finish_reason disagrees with the tool calls of the message.

    ``tool_calls`` needs calls (an empty one is vllm #54701); calls with ``stop`` are wrong for
    vLLM unless a named ``tool_choice`` forced them (a warning: some upstreams legitimately do it, so
    the dual tap decides); ``length`` stays ``length`` with partial calls. On /v1/messages the stop
    reason is made by vLLM's Messages layer, not the parser: a complete call is ``tool_use``, forced
    or not, so ``end_turn`` there is the engine's (vLLM 0.29 labelled forced calls so: vllm-project
    agentic-api PR #296)."""
    if not view.ok:
        return
    for ch in view.choices:
        ptr = f"/choices/{ch.index}/finish_reason"
        if ch.finish_reason == "tool_calls" and not ch.calls:
            yield hit(
                "finish_reason is tool_calls but the message has no tool calls", ptr, event=ch.finish_event
            )
        elif view.endpoint == "messages" and ch.finish_reason == "stop" and ch.calls:
            # _to_anthropic_stop_reason: a complete call is tool_use, forced or not; only a stop
            # string that cut the last call short ends the turn with stop_sequence
            if stop_sequence(ch, view) is None or _complete(ch.calls[-1].arguments):
                yield hit(
                    f"the message has tool_use blocks but stop_reason is {ch.native_finish}: vLLM's "
                    "Messages layer labels a complete call tool_use",
                    ptr,
                    event=ch.finish_event,
                    fault=Fault.ENGINE,
                )
        elif ch.finish_reason == "stop" and ch.calls and _forced_name(view) is None:
            yield hit(
                "message has tool calls but finish_reason is stop (vLLM sends tool_calls)",
                ptr,
                severity=Severity.WARNING,
                event=ch.finish_event,
            )


def _complete(arguments: str) -> bool:
    try:
        bounded_loads(arguments)
    except ValueError:
        return False
    return True


@rule(
    "stop-sequence-unrequested",
    fault=Fault.ENGINE,
    severity=Severity.WARNING,
    area="tools",
    endpoints=(CHAT, MESSAGES),
)
def _stop_sequence(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The answer says a stop sequence ended it, and the request set no such stop sequence.

    vLLM reports the stop string that matched as the choice's ``stop_reason`` (an int there is a stop
    token) and /v1/messages as ``stop_reason: "stop_sequence"`` with the string in ``stop_sequence``
    (anthropic/serving.py ``_to_anthropic_stop_reason``); both come from the request's ``stop`` /
    ``stop_sequences``. A warning: a deployment's generation config may add stop strings of its own."""
    if not view.ok:
        return
    for ch in view.choices:
        ptr = f"/choices/{ch.index}/stop_reason"
        named = ch.native_finish == "stop_sequence" or isinstance(ch.stop_reason, str)
        if not named or stop_sequence(ch, view) is not None:
            continue
        if ch.stop_reason is None:
            yield hit(
                "stop_reason is stop_sequence but no stop_sequence is named", ptr, event=ch.finish_event
            )
        else:
            yield hit(
                f"ended by the stop sequence {ch.stop_reason!r}, which the request did not set",
                ptr,
                ch.stop_reason,
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


# --- reasoning -------------------------------------------------------------------------------------


def _reasons(view: ExchangeView, ctx: CheckConfig) -> bool:
    """The model can send reasoning at all: its family has a reasoning parser, or it is none the
    table knows (then the request's word is taken)."""
    family = FAMILIES.get(family_of(view, ctx))
    return family is None or family.reasoning_parser is not None


def reasoning_expected(view: ExchangeView, ctx: CheckConfig) -> bool:
    """Whether this request makes a reasoning field part of the answer's contract, per endpoint.

    ``include_reasoning: false`` drops reasoning from the answer whatever the model did (chat
    serving.py, responses serving.py); ``chat_template_kwargs`` ``thinking`` / ``enable_thinking``
    turn the template's thinking on or off and win over an effort (``build_chat_params`` sets
    ``enable_thinking`` from ``reasoning_effort`` only when the caller did not); an effort other than
    none or minimal asks the model to think, and is nothing to a family without a reasoning parser
    (Qwen3-Coder); a model the family table does not know is taken at the request's word; Messages
    ``thinking.type`` enabled
    only sets a token budget, so it is expected of families that think unasked. A family without a
    reasoning parser never sends the field."""
    if view.req.get("include_reasoning") is False:
        return False
    kwargs = view.req.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("thinking", "enable_thinking"):
            if key in kwargs:
                return kwargs[key] is True and _reasons(view, ctx)
    effort = view.req.get("reasoning_effort")
    if isinstance(effort, str):
        return effort.lower() not in ("none", "minimal") and _reasons(view, ctx)
    thinking = view.raw_req.get("thinking") if view.endpoint == "messages" else None
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        family = FAMILIES.get(family_of(view, ctx))
        return family is not None and family.reasoning_parser is not None and family.thinks_by_default
    # Not inferred from the model name: thinking models may skip reasoning on some turns, and a
    # false alarm is a defect too. --expect-reasoning says so for a whole capture.
    return ctx.expect_reasoning is True


def thinking_off(view: ExchangeView, ctx: CheckConfig) -> bool:
    """No reasoning parser was meant to split this answer: the family has none (Qwen3-Coder), the
    request turned thinking off (``chat_template_kwargs`` ``thinking`` / ``enable_thinking`` given and
    none true, ``reasoning_effort: none``, Messages ``thinking`` disabled), or the family does not think unasked (DeepSeek V3.1) and
    nothing in the request asked. vLLM's reasoning parsers then pass the text through (DeepSeek V3's
    is the identity parser unless thinking is on), so think markup in the answer is what the model
    wrote. A model the family table does not know is never judged off."""
    family = FAMILIES.get(family_of(view, ctx))
    if family is None:
        return False
    if family.reasoning_parser is None:
        return True
    kwargs = view.req.get("chat_template_kwargs")
    given = [kwargs[k] for k in ("thinking", "enable_thinking") if isinstance(kwargs, dict) and k in kwargs]
    if given:
        return not any(v is True for v in given)
    effort = view.req.get("reasoning_effort")
    if isinstance(effort, str):
        return effort.lower() == "none"
    thinking = view.raw_req.get("thinking") if view.endpoint == "messages" else None
    if isinstance(thinking, dict) and thinking.get("type") == "disabled":
        # vLLM's Messages serving sends reasoning_effort "none" for it (enabled only sets a budget)
        return True
    return not family.thinks_by_default


@rule("reasoning-missing", fault=Fault.PARSER, area="reasoning", endpoints=ALL_ENDPOINTS)
def _reasoning_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Thinking is on but the response has no reasoning field.

    Expected when the request turns thinking on for a model that reasons (``chat_template_kwargs``
    ``thinking`` / ``enable_thinking``, a ``reasoning_effort`` above minimal, Responses
    ``reasoning.effort``, Messages ``output_config.effort``, or Messages ``thinking`` enabled for a
    family that thinks unasked) or ``--expect-reasoning`` is given; never with ``include_reasoning:
    false``, thinking turned off, or a family without a reasoning parser. Both ``reasoning`` (vLLM
    0.16+) and ``reasoning_content`` count. Think markup left in content is
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


@rule(
    "reasoning-shape",
    fault=Fault.PARSER,
    area="reasoning",
    endpoints=ALL_ENDPOINTS,
    needs=(ANOMALY + "reasoning-not-string", ANOMALY + "reasoning-conflict"),
)
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


@rule("reasoning-unrequested", fault=Fault.ENGINE, area="reasoning", endpoints=(CHAT, RESPONSES))
def _reasoning_unrequested(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Reasoning arrived although the request turned it off with include_reasoning false.

    vLLM still lets the model think but drops the reasoning from the answer, streamed and not, and
    hides logprobs and token ids that would leak it (``include_reasoning`` in chat_completion and
    responses ``serving.py``, the parsers' ``parse_delta``): reasoning on the wire means the server
    ignored the field (an older vLLM, another server) or a gateway added it back."""
    if not view.ok or view.req.get("include_reasoning") is not False:
        return
    for ch in view.choices:
        if ch.reasoning:
            yield hit(
                "include_reasoning is false but the answer carries reasoning",
                f"/choices/{ch.index}/message/reasoning",
                ch.reasoning,
            )


# --- structured output -----------------------------------------------------------------------------


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


@rule("json-output-invalid", fault=Fault.ENGINE, area="output", endpoints=ALL_ENDPOINTS, needs=(CONSTRAINT,))
def _json_invalid(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """response_format / structured_outputs asked for JSON and content is not JSON (or not an object).

    With ``json_object`` the content is a JSON object; with ``json_schema`` it is JSON. Cut by
    ``length`` is ``json-output-truncated`` instead. vLLM does not ask the model to comply: it
    constrains decoding to the format (structured outputs: xgrammar or guidance mask every token,
    ``extract_structured_outputs`` in the chat and responses protocol.py; Messages
    ``output_config.format`` too), so output that breaks it means the constraint was not applied,
    the engine's fault (the V1 engine ignoring a schema: vllm #13038); at a caller tap alone a
    gateway that dropped the format is not ruled out."""
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
    needs=(CONSTRAINT,),
)
def _json_truncated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Requested JSON output was cut off by finish_reason length.

    Not the model's fault: the token cap stopped it mid-document."""
    for ch, kind, _ in _constrained_choices(view):
        if kind in ("json_object", "json_schema") and _stopped_by_length(ch, view):
            try:
                bounded_loads(ch.content or "")
            except ValueError:
                fault, why = _cap_fault(view, ch)
                yield hit(
                    f"JSON output incomplete; {why}",
                    f"/choices/{ch.index}/message/content",
                    ch.content,
                    fault=fault,
                )


@rule("json-output-schema", fault=Fault.ENGINE, area="output", endpoints=ALL_ENDPOINTS, needs=(CONSTRAINT,))
def _json_schema(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """JSON output breaks the requested schema.

    Validated against ``response_format.json_schema.schema`` (or ``structured_outputs.json``). Like
    ``json-output-invalid``, the engine's: vLLM decodes under the schema, so a value outside it was
    not constrained (or the schema uses a keyword the grammar backend does not enforce)."""
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


@rule(
    "structured-output-violated",
    fault=Fault.ENGINE,
    area="output",
    endpoints=ALL_ENDPOINTS,
    needs=(CONSTRAINT,),
)
def _structured(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Content does not match the structured_outputs regex or choice.

    ``structured_outputs.choice``: content is one of the choices; ``regex``: it matches whole. The
    engine's, as vLLM decodes under the choice or regex."""
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
