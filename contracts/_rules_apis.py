"""Framing rules of /v1/responses and /v1/messages: what the chat rules cannot see.

Their message content (tool calls, arguments, reasoning, markup) is judged by the chat rules on the
normalized view (``_apis``); these rules judge the typed event streams themselves, against what vLLM
emits (``entrypoints/openai/responses/streaming_events.py`` and ``serving.py``;
``entrypoints/anthropic/serving.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ._registry import MESSAGES, REGISTRY, RESPONSES, CheckConfig, Fault, Hit, hit, rule
from ._view import ExchangeView


def _anomalies(kinds: tuple[str, ...]) -> Callable[[ExchangeView, CheckConfig], Iterator[Hit]]:
    """A rule that reports the assembler's anomalies of ``kinds``: three findings, then the count."""

    def check(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
        if view.kind != "stream" or view.stream is None:
            return
        seen = 0
        for a in view.stream.anomalies:
            if a.kind in kinds:
                if a.kind == "api-terminal-missing" and view.ex.error is not None:
                    continue  # the transport cut it; transport-error says so
                seen += 1
                if seen <= 3:
                    yield hit(a.detail, f"/events/{a.event}{a.pointer}", event=a.event)
        if seen > 3:
            yield hit(f"{seen - 3} more of the same", "/events")

    return check


#: rule id, the endpoints it judges, the anomaly kinds it reports, its summary, its doc (each an engine fault in area stream)
_FRAMING_RULES = (
    (
        "api-stream-order",
        (RESPONSES, MESSAGES),
        ("api-order", "api-terminal-missing"),
        "A Responses or Messages event stream out of order or short of what its clients read: wrong first or last event, an event for an item or block that is not open, an event name that is not its data's type, a message_start without type or role, a message_delta without usage.",
        """Responses open with ``response.created`` and end with ``response.completed``; an item is
        added, fed and closed by ``response.output_item.done`` before the next is added, its content
        parts counted from 0. Messages open with ``message_start`` (whose ``type`` and ``role`` vLLM
        sets explicitly because strict anthropic SDK clients reject the event without them: vllm
        #45367), carry ``stop_reason`` and ``usage`` in ``message_delta`` and end with
        ``message_stop``; a delta's type fits its block (``input_json_delta`` in ``tool_use``).
        Clients (the openai and anthropic SDKs) build the message from these events and drop or
        reject what breaks them. Event types the checker does not know are legal (both APIs add
        new ones; the SDKs skip them), and so is a thinking block's empty signature (vLLM signs
        with a random string; a bridge in front of a chat engine has none to give).""",
    ),
    (
        "api-stream-sequence",
        (RESPONSES,),
        ("api-sequence",),
        "Responses stream events whose sequence_number does not count 0, 1, 2, ... over every event.",
        """vLLM numbers every event it sends (``_increment_sequence_number_and_return``); a gap or a
        repeat means an event was dropped, replayed or reordered between the engine and the client.""",
    ),
    (
        "api-block-index",
        (MESSAGES,),
        ("api-index",),
        "Messages stream content blocks whose index is not dense from 0, overlap, or are fed after they stop.",
        """One block is open at a time and indexes count 0, 1, 2 (vLLM's ``_ActiveBlockState``); the
        anthropic SDK puts each delta into ``content[index]``, so a wrong index corrupts another
        block.""",
    ),
    (
        "api-stream-disagrees",
        (RESPONSES,),
        ("api-disagree",),
        "A Responses .done event or response.completed disagrees with what the stream's deltas built.",
        """``response.function_call_arguments.done``, ``response.output_item.done`` and the output of
        ``response.completed`` repeat the item whole; clients read either, so both must say the
        same.""",
    ),
)
for _id, _where, _kinds, _summary, _doc in _FRAMING_RULES:
    rule(_id, fault=Fault.ENGINE, area="stream", summary=_summary, doc=_doc, endpoints=_where)(
        _anomalies(_kinds)
    )


def rule_endpoints(rule_id: str) -> tuple[str, ...]:
    """The endpoints a rule judges, as it declared them (docs/rules.md's endpoints column)."""
    return REGISTRY[rule_id].endpoints
