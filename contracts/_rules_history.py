"""Rules across the conversation: the history a request carries, and the answer against it.

Every endpoint's history is read into chat messages (``_apis_responses``, ``_apis_messages``), so a
call is an assistant turn's ``tool_calls`` entry and its result a ``tool`` message, whichever API
carried them. vLLM renders the history as given and checks none of this (the chat template sees the
turns in order), but every client library and both upstream APIs hold to it: OpenAI rejects an
assistant turn with ``tool_calls`` not followed by a result for each, Anthropic a ``tool_use``
without its ``tool_result`` in the next user turn, and agent loops key results by call id.

Call ids across turns: who writes an id decides who is to blame when one repeats. A Kimi K2 model
writes its own (``functions.NAME:N``, N a running index per conversation: vLLM's parser takes the
header verbatim, ``vllm/parser/kimi_k2.py``), so the same id in two separate conversations is
normal and only a repeat within one conversation's history is judged; other families' ids are
minted by vLLM (``chatcmpl-tool-<random>``) or its parser (``call_<hex>``), so a repeat is the
parser's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._families import FAMILIES
from ._registry import ALL_ENDPOINTS, CALLS, MESSAGES, TOOL_TURNS, CheckConfig, Fault, Hit, hit, rule
from ._rules_message import _call_hit, _calls, family_of
from ._view import ExchangeView

__all__: list[str] = []


def _history(view: ExchangeView) -> list[tuple[int, dict[str, Any]]]:
    msgs = view.req.get("messages")
    return [(i, m) for i, m in enumerate(msgs) if isinstance(m, dict)] if isinstance(msgs, list) else []


def _call_ids(m: dict[str, Any]) -> list[str]:
    calls = m.get("tool_calls")
    if not isinstance(calls, list):
        return []
    return [tc["id"] for tc in calls if isinstance(tc, dict) and isinstance(tc.get("id"), str) and tc["id"]]


def _server_history(view: ExchangeView) -> bool:
    """The earlier turns live on the server (Responses ``previous_response_id`` or ``conversation``):
    results in the input answer calls the request does not show."""
    return view.endpoint == "responses" and any(
        view.raw_req.get(k) is not None for k in ("previous_response_id", "conversation")
    )


@rule(
    "request-orphan-tool-call-id",
    fault=Fault.CALLER,
    area="request",
    endpoints=ALL_ENDPOINTS,
    needs=(TOOL_TURNS,),
)
def _orphan(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool message answers a tool_call_id that no earlier assistant message issued.

    Each ``role: tool`` message (a Responses ``function_call_output``, a Messages ``tool_result``)
    links to a call of an earlier assistant turn. A broken chain is the caller's, or a gateway's that
    rewrote ids (CLIProxyAPI #3184): the dual tap tells which. Not judged on a Responses request that
    continues a stored response (``previous_response_id``, ``conversation``): its calls are on the
    server."""
    if _server_history(view):
        return
    issued: set[str] = set()
    for i, m in _history(view):
        if m.get("role") == "assistant":
            issued.update(_call_ids(m))
        elif m.get("role") == "tool":
            tid = m.get("tool_call_id")
            if not isinstance(tid, str) or not tid:
                yield hit(f"messages[{i}] (tool) has no tool_call_id", f"/request/body/messages/{i}")
            elif tid not in issued:
                yield hit(
                    f"messages[{i}] answers tool_call_id {tid!r}, which no earlier assistant turn issued",
                    f"/request/body/messages/{i}/tool_call_id",
                    tid,
                )


@rule(
    "request-tool-call-unanswered",
    fault=Fault.CALLER,
    area="request",
    endpoints=ALL_ENDPOINTS,
    needs=(TOOL_TURNS,),
)
def _unanswered(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call of the history has no tool result before the conversation moves on.

    Every call an assistant turn made is answered by a result before the next user or assistant
    turn (results in any order; system turns between them are neutral). OpenAI and Anthropic reject
    such a history; vLLM renders it, and the model sees a call that never returned and often makes it
    again. A Messages ``tool_result`` placed in an assistant turn is flattened into text by vLLM
    (``Tool result: ...``) and answers nothing."""
    pending: dict[str, int] = {}

    def unanswered(at: str) -> Iterator[Hit]:
        for tid, i in pending.items():
            yield hit(
                f"messages[{i}] called {tid!r}, and no tool result answers it before {at}",
                f"/request/body/messages/{i}/tool_calls",
                tid,
            )
        pending.clear()

    for i, m in _history(view):
        role = m.get("role")
        if role == "tool":
            pending.pop(str(m.get("tool_call_id")), None)
        elif role in ("user", "assistant"):
            yield from unanswered(f"messages[{i}] ({role})")
            if role == "assistant":
                pending.update({tid: i for tid in _call_ids(m)})
    yield from unanswered("the end of the history")


@rule(
    "request-role-misplaced", fault=Fault.CALLER, area="request", endpoints=ALL_ENDPOINTS, needs=(TOOL_TURNS,)
)
def _misplaced(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A history turn carries what its role cannot: tool calls outside an assistant turn, a Messages tool_result outside a user turn or tool_use outside an assistant one.

    Only an assistant turn calls tools and only the caller's side returns results. vLLM passes a
    chat message's ``tool_calls`` to the template whatever its role, and converts a Messages
    ``tool_use`` block into calls of its own turn and a ``tool_result`` block of a non-user turn
    into plain text (anthropic/serving.py ``_convert_block``): the model reads a conversation
    other than the one the caller meant."""
    if view.endpoint == MESSAGES:
        src = view.raw_req.get("messages")
        for i, m in enumerate(src if isinstance(src, list) else []):
            content = m.get("content") if isinstance(m, dict) else None
            role = m.get("role") if isinstance(m, dict) else None
            for j, b in enumerate(content if isinstance(content, list) else []):
                kind = b.get("type") if isinstance(b, dict) else None
                want = {"tool_use": "assistant", "tool_result": "user"}.get(str(kind))
                if want is not None and role != want:
                    yield hit(
                        f"messages[{i}] ({role}) holds a {kind} block, which belongs in a {want} turn",
                        f"/request/body/messages/{i}/content/{j}",
                    )
        return
    for i, m in _history(view):
        if _call_ids(m) and m.get("role") != "assistant":
            yield hit(
                f"messages[{i}] ({m.get('role')}) carries tool_calls, which only an assistant turn makes",
                f"/request/body/messages/{i}/tool_calls",
            )


@rule(
    "tool-call-id-reused",
    fault=Fault.MODEL,
    area="tools",
    endpoints=ALL_ENDPOINTS,
    needs=(
        CALLS,
        TOOL_TURNS,
    ),
)
def _id_reused(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call of the answer reuses an id already used in the conversation's history.

    Agent loops key results by call id: openai-agents stops with "reused a completed tool call ID",
    others overwrite the earlier result. Blame follows who writes the id (the family table): a
    Kimi K2 model writes ``functions.NAME:N`` itself, N counting calls across the conversation, so a
    repeat is the model's; ids vLLM or its parser mints (``chatcmpl-tool-<random>``, ``call_<hex>``)
    repeat only by the parser's fault. The same K2 id in two separate conversations is legal: only
    this request's own history is compared."""
    used: dict[str, int] = {}
    for i, m in _history(view):
        for tid in _call_ids(m):
            used.setdefault(tid, i)
        answered = m.get("tool_call_id")
        if m.get("role") == "tool" and isinstance(answered, str) and answered:
            used.setdefault(answered, i)  # a result whose call lives on the server (previous_response_id)
    if not used:
        return
    family = FAMILIES.get(family_of(view, ctx))
    model_writes = family is not None and family.id_pattern is not None
    fault = Fault.MODEL if model_writes else Fault.PARSER
    who = "the model wrote it" if model_writes else "vLLM's parser minted it"
    for ch, c in _calls(view):
        if c.id and c.id in used:
            message = f"id {c.id!r} was already used in messages[{used[c.id]}] of this conversation ({who})"
            yield _call_hit(view, ch, c, "/id", message, excerpt=c.id, fault=fault)
