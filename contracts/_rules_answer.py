"""Rules for answers that end normally but carry nothing: no content, no tool call.

A real vLLM 0.32 shows two ways to get there (shared reference real-vllm-cpu.md):

- the Kimi K2 parser drops a tool call whose header lacks ``:N`` silently: the message is empty and
  ``finish_reason`` is ``stop``; only usage shows that the model wrote tokens after its reasoning;
- a ``<think>`` that never closes makes the whole output reasoning: ``content`` is null.

Usage tells them apart: ``completion_tokens`` minus ``reasoning_tokens`` is the output outside the
reasoning (plus EOS). Without usage (a stream without ``include_usage``) the two cannot be told apart,
and the finding says so with fault ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._assembly import AssembledChoice
from ._families import rows_saying
from ._markup import TOOL_MARKUP, find_markup
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Hit, Severity, hit, rule
from ._rules_message import _stopped_by_length
from ._translate import usage_meaning
from ._view import ExchangeView, output_constraint

__all__: list[str] = []


def _empty(ch: AssembledChoice) -> bool:
    return ch.finish_reason == "stop" and not ch.calls and not (ch.content or "").strip()


def _outside_reasoning(view: ExchangeView) -> int | None:
    """Completion tokens not counted as reasoning (EOS included), when usage says so (under any of
    the three APIs' names: ``_translate.usage_meaning``)."""
    if len(view.choices) != 1:
        return None
    usage = usage_meaning(view)
    if usage is None or usage.completion is None:
        return None
    return usage.completion - (usage.reasoning or 0)


def _judged(view: ExchangeView) -> bool:
    """Requests whose empty answers other rules already judge: forced tools, structured output, a
    call left in reasoning (tool-call-in-reasoning: the parser kept it there, which is why the
    answer is empty and the reasoning looks unclosed)."""
    tc = view.req.get("tool_choice")
    return (
        tc == "required"
        or isinstance(tc, dict)
        or output_constraint(view.req) is not None
        or any(find_markup(TOOL_MARKUP, ch.reasoning) for ch in view.choices)
    )


@rule("reasoning-unclosed", fault=Fault.MODEL, area="reasoning", endpoints=ALL_ENDPOINTS)
def _reasoning_unclosed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The whole answer is reasoning: the model never closed its thinking, so content is empty.

    vLLM's reasoning parsers file everything after an unclosed ``<think>`` (or K3 think channel) as
    reasoning; the caller gets ``content: null`` with ``finish_reason: stop``. Usage confirms it: no
    completion token outside the reasoning but EOS."""
    if not view.ok or _judged(view):
        return
    outside = _outside_reasoning(view)
    for ch in view.choices:
        if (
            _empty(ch)
            and ch.reasoning
            and outside is not None
            and outside <= 1
            and not _stopped_by_length(ch, view)
        ):
            yield hit(
                "the answer is all reasoning and no content: the thinking never closed (no </think>), "
                "so the reasoning parser took the whole output",
                f"/choices/{ch.index}/message/content",
                ch.content,
            )


# which parsers drop malformed calls silently is the family table's to say
_SILENT_DROPS = rows_saying(
    lambda f: f"vLLM's {f.tool_parser} parser drops {f.silent_call_drop}" if f.silent_call_drop else None
)


@rule(
    "answer-empty",
    fault=Fault.MODEL,
    area="tools",
    endpoints=ALL_ENDPOINTS,
    summary="The answer ends with stop but carries no content and no tool call.",
    doc=f"""An agent gets nothing to act on. When usage shows tokens written after the reasoning, the
    parser dropped them ({_SILENT_DROPS} without a trace): tokens that vanished between the model and
    the wire are the parser's (token accounting, as ``output-tokens-vanished``). Without usage the
    cause cannot be told (fault unknown).""",
)
def _answer_empty(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    if not view.ok or _judged(view):
        return
    outside = _outside_reasoning(view)
    for ch in view.choices:
        if not _empty(ch) or _stopped_by_length(ch, view):
            continue
        ptr = f"/choices/{ch.index}/message"
        if outside is None:
            yield hit(
                "no content and no tool call; without usage it cannot be told whether the thinking never "
                "closed or the parser dropped a malformed tool call (send stream_options.include_usage)",
                ptr,
                fault=Fault.UNKNOWN,
                severity=Severity.WARNING,
            )
        elif outside > 2:
            # a call left in reasoning never gets here (_judged: tool-call-in-reasoning says it)
            yield hit(
                f"no content and no tool call, yet usage shows {outside} completion tokens outside the "
                "reasoning: the parser dropped them (a Kimi K2 tool-call header without :N is dropped "
                "silently)",
                ptr,
                fault=Fault.PARSER,
            )
        elif outside == 2 or not ch.reasoning:
            yield hit("the model closed its thinking and wrote nothing: no content, no tool call", ptr)
