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
from dataclasses import dataclass

from ._assembly import AssembledChoice
from ._families import FAMILIES, rows_saying
from ._markup import TOOL_MARKUP, find_markup
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Hit, Severity, hit, rule
from ._rules_message import _stopped_by_length, family_of
from ._translate import uncounted_reasoning, usage_meaning
from ._view import ExchangeView, output_constraint

__all__: list[str] = []


def _empty(ch: AssembledChoice) -> bool:
    return ch.finish_reason == "stop" and not ch.calls and not (ch.content or "").strip()


def _any_empty(view: ExchangeView) -> bool:
    """Whether any answer is empty (``_empty``): the two rules on empty answers ask the request and
    the usage (``_judged``, ``_outside_reasoning``) only then; most answers are not."""
    return any(map(_empty, view.choices))


@dataclass(frozen=True, slots=True)
class _Outside:
    """Completion tokens outside the reasoning, as usage counts them and as any delta grouping
    allows (``_translate.uncounted_reasoning``: a stream's count may leave out the reasoning that
    came with the end when the thinking never closed; when it closed, the count is exact)."""

    #: completion minus reasoning tokens, as usage says
    counted: int
    #: the fewest the model may have written: ``counted`` less the reasoning that may be uncounted
    least: int
    #: what an answer that is all reasoning still counts outside it: end of sequence, and the
    #: opening think tag where the family's model writes it (``Family.writes_think_open``)
    markup: int

    @property
    def all_reasoning(self) -> bool:
        return self.least <= self.markup

    @property
    def dropped(self) -> bool:
        """More than the markup and a closing tag, whatever the grouping: written and dropped."""
        return not self.all_reasoning and self.counted > self.markup + 1


def _outside_reasoning(view: ExchangeView, ctx: CheckConfig) -> _Outside | None:
    """Completion tokens not counted as reasoning, when usage says so (under any of the three
    APIs' names: ``_translate.usage_meaning``)."""
    if len(view.choices) != 1:
        return None
    usage = usage_meaning(view)
    if usage is None or usage.completion is None:
        return None
    counted = usage.completion - (usage.reasoning or 0)
    family = FAMILIES.get(family_of(view, ctx))
    markup = 2 if family is not None and family.writes_think_open else 1
    return _Outside(counted, counted - uncounted_reasoning(view, usage, view.choices[0]), markup)


def _judged(view: ExchangeView) -> bool:
    """Requests whose empty answers other rules already judge: forced tools, structured output, a
    call left in reasoning (tool-call-in-reasoning: the parser kept it there, which is why the
    answer is empty and the reasoning looks unclosed)."""
    judged: bool | None = view.memo.get("judged")  # two rules ask it of each view
    if judged is None:
        tc = view.req.get("tool_choice")
        judged = view.memo["judged"] = bool(
            tc == "required"
            or isinstance(tc, dict)
            or output_constraint(view.req) is not None
            or any(find_markup(TOOL_MARKUP, ch.reasoning) for ch in view.choices)
        )
    return judged


@rule("reasoning-unclosed", fault=Fault.MODEL, area="reasoning", endpoints=ALL_ENDPOINTS)
def _reasoning_unclosed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The whole answer is reasoning: the model never closed its thinking, so content is empty.

    vLLM's reasoning parsers file everything after an unclosed ``<think>`` (or K3 think channel) as
    reasoning; the caller gets ``content: null`` with ``finish_reason: stop``. Usage confirms it: no
    completion token outside the reasoning but EOS (and the opening tag, where the family's model
    writes it). A stream's count may leave out the reasoning that came in one delta with the end
    (vLLM 0.32's engine parsers), by at most one token per byte of it: a count that this explains
    is still all reasoning, as the same answer streamed one token a delta shows."""
    if not view.ok or not _any_empty(view) or _judged(view):
        return
    outside = _outside_reasoning(view, ctx)
    for ch in view.choices:
        if (
            _empty(ch)
            and ch.reasoning
            and outside is not None
            and outside.all_reasoning
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
    if not view.ok or not _any_empty(view) or _judged(view):
        return
    outside = _outside_reasoning(view, ctx)
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
        elif outside.dropped:
            # a call left in reasoning never gets here (_judged: tool-call-in-reasoning says it)
            yield hit(
                f"no content and no tool call, yet usage shows {outside.least} completion tokens outside "
                "the reasoning: the parser dropped them (a Kimi K2 tool-call header without :N is "
                "dropped silently)",
                ptr,
                fault=Fault.PARSER,
            )
        elif not (ch.reasoning and outside.all_reasoning):
            # all in reasoning: reasoning-unclosed says it
            yield hit("the model closed its thinking and wrote nothing: no content, no tool call", ptr)
