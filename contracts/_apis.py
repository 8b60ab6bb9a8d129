"""/v1/responses and /v1/messages: what the two typed APIs share, read into the view the chat rules judge.

The contract behind both endpoints is the chat one (vLLM builds them on its chat machinery): a tool
call names a declared tool, its arguments are JSON valid against the schema, reasoning stays out of the
answer. So a Responses or Messages exchange is normalized into the same :class:`AssembledChoice`
(content, reasoning, calls, finish_reason) and a chat-shaped request (``messages``, ``tools``,
``tool_choice``), and every message rule runs unchanged: invalid arguments on /v1/responses fire
``tool-call-args-invalid-json`` exactly as on /v1/chat/completions. What is particular to each
endpoint (typed event order, ``sequence_number``, content block indexes, ``.done`` events that must
repeat what the deltas built) is kept as ``api-*`` anomalies for the rules in ``_rules_apis``.

Each endpoint has its module (``_apis_responses``, ``_apis_messages``): the request read as chat, the
non-streamed body, the event stream. This one holds their common ground: which endpoint a path is,
text of content parts, calls, and the typed-stream base whose ``feed`` both streams go through.

Forward compatibility: an event type this checker does not know is legal on both streams (OpenAI and
Anthropic add event types; their SDKs skip unknown ones), so it is counted and otherwise left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._assembly import (
    AssembledCall,
    AssembledChoice,
    AssembledStream,
    StreamAnomaly,
    frame_object,
    frames_plain,
)
from ._sse import SSEEvent

if TYPE_CHECKING:
    from ._view import ExchangeView

__all__ = [
    "API_ENDPOINTS",
    "TypedStream",
    "add_call",
    "append",
    "body_parts",
    "endpoint_of",
    "finish_body",
    "text_of",
]

#: the endpoints read here; "chat" is /v1/chat/completions itself
API_ENDPOINTS = ("responses", "messages")


def endpoint_of(method: str, path: str) -> str | None:
    """chat | responses | messages for a POST to one of them (any mount point), else None."""
    if method != "POST":
        return None
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/chat/completions"):
        return "chat"
    if p.endswith("/responses"):
        return "responses"
    if p.endswith("/messages"):
        return "messages"
    return None


def text_of(content: Any) -> str:
    """The text of a content value: a string, or the ``text`` of each part of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def append(old: str | None, new: str) -> str:
    return new if old is None else old + new


def add_call(
    choice: AssembledChoice,
    call_id: Any,
    name: Any,
    arguments: str,
    pointer: str,
    *,
    has_arguments_key: bool = True,
    first_event: int = 0,
) -> AssembledCall:
    """Append a function call read from a Responses ``function_call`` item or a Messages ``tool_use``
    block, whole or streamed: an id or a name that is not a string counts as absent, as on the chat
    wire (tool-call-shape and tool-call-id-missing report it)."""
    call = AssembledCall(
        index=len(choice.calls),
        id=call_id if isinstance(call_id, str) else None,
        type="function",
        name=name if isinstance(name, str) else "",
        arguments=arguments,
        first_event=first_event,
        has_arguments_key=has_arguments_key,
        pointer=pointer,
    )
    choice.calls.append(call)
    return call


def body_parts(view: ExchangeView, key: str, problem: str) -> list[Any] | None:
    """The list a non-streamed answer holds its parts in (``output``, ``content``); None, with the
    view marked unreadable, when the body is not an object with that list."""
    body = view.body
    if not isinstance(body, dict) or not isinstance(body.get(key), list):
        view.body_problem = problem
        view.kind = "other"
        return None
    parts: list[Any] = body[key]
    return parts


def finish_body(view: ExchangeView, choice: AssembledChoice) -> None:
    """What every non-streamed answer ends with: its model and usage on the view, its one choice."""
    body = view.body if isinstance(view.body, dict) else {}
    view.model = body.get("model") if isinstance(body.get("model"), str) else None
    usage = body.get("usage")
    view.usage = usage if isinstance(usage, dict) else None
    if choice.reasoning is not None:
        choice.reasoning_fields.add("reasoning")
    view.choices = [choice]


class TypedStream:
    """One typed event stream folded into one assistant choice. Subclasses judge their events in
    ``event`` and name the event that ends the stream in ``LAST``."""

    LAST = ""

    def __init__(self) -> None:
        self.st = AssembledStream()
        self.choice = AssembledChoice(0, role="assistant")
        self.st.choices[0] = self.choice
        self.terminal: int | None = None
        #: what :func:`frames_plain` says of the stream (``run``); False: each frame is asked
        self.plain = False

    def flag(self, kind: str, detail: str, n: int, pointer: str = "") -> None:
        self.st.anomalies.append(StreamAnomaly(kind, detail, n, pointer))

    def token(self, ev: SSEEvent) -> None:
        self.st.token_events += 1
        if ev.t_ms is not None:
            if self.st.first_token_ms is None:
                self.st.first_token_ms = ev.t_ms
            self.st.last_token_ms = ev.t_ms
            self.st.token_times.append(ev.t_ms)

    def run(self, events: list[SSEEvent], plain: bool | None = None) -> AssembledStream:
        self.st.events = len(events)
        self.plain = frames_plain(events) if plain is None else plain
        for ev in events:
            self.feed(ev)
        return self.finish()

    def feed(self, ev: SSEEvent) -> None:
        n = ev.index
        st = self.st
        if st.first_event_ms is None:
            st.first_event_ms = ev.t_ms
        if ev.data.strip() == "[DONE]":
            # the chat terminator is not part of these endpoints (no [DONE] in vLLM's api_routers)
            self.flag("api-order", "data: [DONE] on a typed event stream", n)
            return
        obj = frame_object(st, ev.data, n, plain=self.plain)
        if obj is None:
            return
        kind = obj.get("type")
        if not isinstance(kind, str):
            self.flag("api-order", "event data has no type", n, "/type")
            return
        if ev.event is not None and ev.event != kind:
            self.flag("api-order", f"event: {ev.event} carries data of type {kind}", n, "/type")
        if self.terminal is not None and kind != "ping":
            self.flag("api-order", f"{kind} after the stream's last event", n, "/type")
            return
        if kind == "error":
            # vLLM ends both streams with the error event (no response.completed, no message_stop)
            st.error_frames.append((n, obj.get("error", obj)))
            self.terminal = n
            return
        self.event(kind, obj, ev)

    def event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
        raise NotImplementedError

    def end(self, n: int) -> None:
        """The stream's last event arrived at ``n``."""
        self.terminal = n
        self.st.done = 1
        self.st.done_event = n

    def finish(self) -> AssembledStream:
        if self.terminal is None:
            self.flag("api-terminal-missing", f"the stream ended without {self.LAST}", self.st.events)
        if self.choice.reasoning is None:
            self.choice.reasoning_fields.discard("reasoning")
        return self.st
