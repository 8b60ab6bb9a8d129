"""/v1/responses read as chat: the request, the non-streamed response object and the event stream.

Wire facts from the vLLM 0.32 wheel: ``entrypoints/openai/responses/protocol.py`` (the request: flat
tools, ``text.format`` with ``schema``, ``reasoning.effort``, ``include_reasoning``),
``serving.py`` (the object, its ``status``; ``response.completed`` carries the streamed items as its
``output``) and ``streaming_events.py`` (the simple streaming path: every event numbered from 0 by
``_increment_sequence_number_and_return``; per item ``output_item.added``, for text a
``content_part.added`` at ``content_index`` 0, the deltas, the ``.done`` events repeating the whole,
``output_item.done``; the next item only then, at the next ``output_index``).

Legal and not judged: an event type not listed in ``_ITEM_EVENTS`` (an annotation, a custom or hosted tool's events: forward compatibility); arguments or text that arrive
only whole in their ``.done`` event (no deltas before it); an item without ``content_part`` events.
Finish reasons for the chat rules: ``completed`` is ``tool_calls`` with calls and ``stop`` without,
``incomplete`` (max_output_tokens) is ``length``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._apis import TypedStream, add_call, append, body_parts, finish_body, text_of
from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, _excerpt
from ._sse import SSEEvent

if TYPE_CHECKING:
    from ._view import ExchangeView

__all__ = ["assemble", "normalize_request", "take_body"]

_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
# delta event -> the item type it feeds
_DELTAS = {
    "response.output_text.delta": "message",
    "response.reasoning_text.delta": "reasoning",
    # a bridge's reasoning as the item's summary (LiteLLM's Responses bridge)
    "response.reasoning_summary_text.delta": "reasoning",
    "response.function_call_arguments.delta": "function_call",
}
# .done event -> the key that repeats the whole
_DONES = {
    "response.output_text.done": "text",
    "response.reasoning_text.done": "text",
    "response.reasoning_summary_text.done": "text",
    "response.function_call_arguments.done": "arguments",
}
#: the item events judged here; any other event type is legal and left alone
_ITEM_EVENTS = frozenset(
    {
        *_DELTAS,
        *_DONES,
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
    }
)


def finish_reason(status: Any, choice: AssembledChoice) -> str | None:
    if status == "completed":
        return "tool_calls" if choice.calls else "stop"
    if status == "incomplete":
        return "length"
    return None


# --- the request ------------------------------------------------------------------------------------


def normalize_request(raw: dict[str, Any]) -> dict[str, Any]:
    """The chat-shaped request the rules read (messages, tools, tool_choice, ...)."""
    msgs: list[dict[str, Any]] = []
    if isinstance(raw.get("instructions"), str):
        msgs.append({"role": "system", "content": raw["instructions"]})
    inp = raw.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    for item in inp if isinstance(inp, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            msgs.append({"role": item.get("role"), "content": text_of(item.get("content"))})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if msgs and msgs[-1].get("role") == "assistant" and isinstance(msgs[-1].get("tool_calls"), list):
                msgs[-1]["tool_calls"].append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            msgs.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": text_of(item.get("output"))}
            )
    out: dict[str, Any] = {"messages": msgs}
    tools = raw.get("tools")
    if isinstance(tools, list):
        # Responses tools are flat: {"type": "function", "name", "parameters", "strict"}
        out["tools"] = [
            {
                "type": "function",
                "function": {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t},
            }
            if isinstance(t, dict) and t.get("type") == "function"
            else t
            for t in tools
        ]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict) and tc.get("type") == "function":
        out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
    elif tc is not None:
        out["tool_choice"] = tc
    reasoning = raw.get("reasoning")
    if isinstance(reasoning, dict) and isinstance(reasoning.get("effort"), str):
        out["reasoning_effort"] = reasoning["effort"]
    text = raw.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    # ResponsesRequest.extract_structured_outputs: json_schema reads "schema", json_object any JSON object
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name"), "schema": fmt.get("schema")},
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        out["response_format"] = {"type": "json_object"}
    for src, dst in (
        ("model", "model"),
        ("stream", "stream"),
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("chat_template_kwargs", "chat_template_kwargs"),
        ("include_reasoning", "include_reasoning"),
        ("structured_outputs", "structured_outputs"),
        ("seed", "seed"),
    ):
        if raw.get(src) is not None:
            out[dst] = raw[src]
    return out


# --- the non-streamed object -------------------------------------------------------------------------


def take_body(view: ExchangeView) -> None:
    """Fill ``view.choices`` (one choice) from a response object."""
    items = body_parts(view, "output", "a response needs an object with an output list")
    if items is None:
        return
    body = view.body
    status = body.get("status")
    if view.raw_req.get("background") is True and status in ("queued", "in_progress"):
        # background mode answers at once and the output comes later (GET /v1/responses/{id}):
        # there is no answer here to judge yet
        view.kind = "other"
        return
    choice = AssembledChoice(0, role="assistant")
    for i, item in enumerate(items):
        if isinstance(item, dict):
            _take_item(view, choice, item, f"/output/{i}")
        else:
            view.anomalies.append(
                StreamAnomaly("bad-shape", "output item is not an object", -1, f"/output/{i}")
            )
    choice.finish_reason = finish_reason(status, choice)
    choice.native_finish = status if isinstance(status, str) else None
    finish_body(view, choice)


def _take_item(view: ExchangeView, choice: AssembledChoice, item: dict[str, Any], ptr: str) -> None:
    kind = item.get("type")
    if kind == "reasoning":
        text = text_of(item.get("content")) or text_of(item.get("summary"))
        if text:
            choice.reasoning = append(choice.reasoning, text)
    elif kind == "message":
        choice.content = append(choice.content, text_of(item.get("content")))
    elif kind == "function_call":
        args = item.get("arguments")
        if not isinstance(args, str):
            view.anomalies.append(
                StreamAnomaly("arguments-not-string", _excerpt(args), -1, ptr + "/arguments")
            )
            args = json.dumps(args, ensure_ascii=False)
        add_call(
            choice, item.get("call_id"), item.get("name"), args, ptr, has_arguments_key="arguments" in item
        )


def _item_text(item: Any) -> str | None:
    """What a whole item says: a call's arguments, a message's or reasoning's text."""
    if not isinstance(item, dict):
        return None
    if item.get("type") == "function_call":
        return item.get("arguments") if isinstance(item.get("arguments"), str) else None
    if item.get("type") == "message" and isinstance(item.get("content"), list):
        return text_of(item["content"])
    if item.get("type") == "reasoning":
        # its text, or the summary a bridge puts it in
        text = text_of(item.get("content")) or text_of(item.get("summary"))
        return text if text or isinstance(item.get("content"), list) else None
    return None


# --- the event stream --------------------------------------------------------------------------------


@dataclass(slots=True)
class _Item:
    """An output item as its events built it."""

    id: str
    index: int
    type: Any
    call: AssembledCall | None = None
    call_id: Any = None
    name: Any = None
    text: str = ""
    #: delta events that fed it, and whether a .done carried the whole instead
    deltas: int = 0
    whole: bool = False
    #: the content_index of each content_part.added
    parts: list[int] = field(default_factory=list)
    open: bool = True


class _Stream(TypedStream):
    LAST = "response.completed"

    def __init__(self) -> None:
        super().__init__()
        self.seq_reported = False
        self.items: dict[str, _Item] = {}

    def event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        seq = obj.get("sequence_number")
        if seq != self.st.frames - 1 and not self.seq_reported:
            self.seq_reported = True
            self.flag(
                "api-sequence",
                f"sequence_number is {seq!r}, expected {self.st.frames - 1}",
                n,
                "/sequence_number",
            )
        if self.st.frames == 1 and kind != "response.created":
            self.flag("api-order", f"the stream opens with {kind}, not response.created", n, "/type")
        resp = obj.get("response")
        if isinstance(resp, dict):
            self.take_meta(resp, n)
        if kind in _TERMINAL:
            self.terminate(kind, resp, n)
        elif kind == "response.output_item.added":
            self.item_added(obj, n)
        elif kind in _ITEM_EVENTS:
            self.item_event(kind, obj, ev)
        # anything else (response.in_progress, a summary, an annotation, a hosted tool's events, an
        # event type newer than this checker) is legal and carries nothing the chat view reads

    def terminate(self, kind: str, resp: Any, n: int) -> None:
        self.end(n)
        if kind == "response.failed":
            err = resp.get("error") if isinstance(resp, dict) else None
            self.st.error_frames.append((n, err or "response.failed"))
        for item in self.items.values():
            if item.open:
                self.flag("api-order", f"item {item.id} was never closed by response.output_item.done", n)
        status = resp.get("status") if isinstance(resp, dict) else None
        self.choice.finish_reason = finish_reason(status, self.choice)
        self.choice.native_finish = status if isinstance(status, str) else None
        self.choice.finish_event = n
        if isinstance(resp, dict):
            self.compare_final(resp, n)

    def take_meta(self, resp: dict[str, Any], n: int) -> None:
        rid, model = resp.get("id"), resp.get("model")
        if isinstance(rid, str):
            if not self.st.ids:
                self.st.ids.append(rid)
            elif rid != self.st.ids[0]:
                self.flag("chunk-id-changed", f"{self.st.ids[0]} -> {rid}", n, "/response/id")
        if isinstance(model, str) and model:
            if self.st.model is None:
                self.st.model = model
            elif model != self.st.model:
                self.flag("model-changed", f"{self.st.model} -> {model}", n, "/response/model")
        if isinstance(resp.get("usage"), dict):
            self.st.usage = resp["usage"]

    def item_added(self, obj: dict[str, Any], n: int) -> None:
        item = obj.get("item")
        oi = obj.get("output_index")
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            self.flag("api-order", "output_item.added without an item id", n, "/item")
            return
        if oi != len(self.items):
            self.flag(
                "api-order",
                f"output_index {oi!r}, expected {len(self.items)} (items are counted from 0)",
                n,
                "/output_index",
            )
        open_ones = [i.id for i in self.items.values() if i.open]
        if open_ones:
            self.flag("api-order", f"item added while {open_ones[0]} is still open", n, "/item")
        kind = item.get("type")
        entry = _Item(item["id"], oi if isinstance(oi, int) else len(self.items), kind)
        if kind == "function_call":
            args = str(item["arguments"]) if isinstance(item.get("arguments"), str) else ""
            ptr = f"/output/{len(self.items)}"
            entry.call = add_call(
                self.choice, item.get("call_id"), item.get("name"), args, ptr, first_event=n
            )
            entry.call_id, entry.name, entry.text = item.get("call_id"), item.get("name"), args
        self.items[item["id"]] = entry

    def item_event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        raw_item = obj.get("item")
        iid = (
            raw_item.get("id")
            if kind == "response.output_item.done" and isinstance(raw_item, dict)
            else obj.get("item_id")
        )
        item = self.items.get(iid) if isinstance(iid, str) else None
        if item is None:
            self.flag("api-order", f"{kind} for an item that was never added ({iid!r})", n, "/item_id")
            return
        if not item.open:
            self.flag("api-order", f"{kind} for item {iid} after its output_item.done", n, "/item_id")
            return
        if obj.get("output_index", item.index) != item.index:
            self.flag(
                "api-order",
                f"{kind}: output_index {obj.get('output_index')} for item {iid} at {item.index}",
                n,
                "/output_index",
            )
        if "content_index" in obj:
            self.content_index(kind, item, obj["content_index"], n)
        if kind in _DELTAS:
            self.delta(kind, item, obj.get("delta"), ev)
        elif kind in _DONES:
            self.done(kind, item, obj, n)
        elif kind == "response.output_item.done":
            self.item_done(item, raw_item, n)

    def content_index(self, kind: str, item: _Item, ci: Any, n: int) -> None:
        """Content parts count from 0 per item; every event about one names a part that was added
        (an item whose server sends no content_part events is not judged on them)."""
        if kind == "response.content_part.added":
            if ci != len(item.parts):
                self.flag(
                    "api-order",
                    f"content_part.added at content_index {ci!r}, expected {len(item.parts)}",
                    n,
                    "/content_index",
                )
            item.parts.append(ci)
        elif item.parts and ci not in item.parts:
            self.flag(
                "api-order",
                f"{kind}: content_index {ci!r}, but item {item.id} has parts {item.parts}",
                n,
                "/content_index",
            )

    def delta(self, kind: str, item: _Item, delta: Any, ev: SSEEvent) -> None:
        n = ev.index
        if not isinstance(delta, str):
            self.flag("api-order", f"{kind} without a string delta", n, "/delta")
            return
        want = _DELTAS[kind]
        if item.type != want:
            self.flag("api-order", f"{kind} for a {item.type} item", n, "/type")
            return
        item.text += delta
        item.deltas += 1
        self.take_text(item, delta)
        self.token(ev)

    def take_text(self, item: _Item, text: str) -> None:
        # the last reasoning delta, while no other output follows it: a Responses stream has no
        # finish per delta, so the end may have come in that delta's engine step
        self.choice.reasoning_at_end = text if item.type == "reasoning" else ""
        if item.type == "message":
            self.choice.content = append(self.choice.content, text)
        elif item.type == "reasoning":
            self.choice.reasoning = append(self.choice.reasoning, text)
            self.choice.reasoning_fields.add("reasoning")
        elif item.call is not None:
            item.call.arguments += text
            item.call.deltas += 1

    def whole_text(self, item: _Item, text: str) -> bool:
        """Text that arrives whole in a .done after no delta is the item's text (legal: a server may
        send arguments only in function_call_arguments.done). True when it was taken so."""
        if item.deltas or item.whole or not text:
            return False
        item.whole = True
        if text != item.text:  # arguments an output_item.added already carried are not taken twice
            if item.call is not None:
                item.call.arguments = ""
            item.text = text
            self.take_text(item, text)
        return True

    def done(self, kind: str, item: _Item, obj: dict[str, Any], n: int) -> None:
        key = _DONES[kind]
        value = obj.get(key)
        if isinstance(value, str) and not self.whole_text(item, value) and value != item.text:
            self.flag(
                "api-disagree",
                f"{kind} repeats {_excerpt(value)}, the deltas built {_excerpt(item.text)}",
                n,
                f"/{key}",
            )
        name = obj.get("name")
        if kind == "response.function_call_arguments.done" and isinstance(name, str) and name != item.name:
            self.flag(
                "api-disagree", f"{kind} names {name!r}, the item was added as {item.name!r}", n, "/name"
            )

    def item_done(self, item: _Item, final: Any, n: int) -> None:
        item.open = False
        if not isinstance(final, dict):
            return
        if final.get("type") != item.type:
            self.flag(
                "api-disagree",
                f"output_item.done is a {final.get('type')} item, added as {item.type}",
                n,
                "/item/type",
            )
            return
        if item.type == "function_call":
            for key, was in (("call_id", item.call_id), ("name", item.name)):
                if key in final and final[key] != was:
                    self.flag(
                        "api-disagree",
                        f"output_item.done has {key} {final[key]!r}, added as {was!r}",
                        n,
                        f"/item/{key}",
                    )
        text = _item_text(final)
        if text is not None and not self.whole_text(item, text) and text != item.text:
            self.flag(
                "api-disagree",
                f"output_item.done holds {_excerpt(text)}, the deltas built {_excerpt(item.text)}",
                n,
                "/item",
            )

    def compare_final(self, resp: dict[str, Any], n: int) -> None:
        """response.completed carries the whole response: its output is what was streamed (vLLM's
        ``responses_full_generator`` returns the streamed items themselves)."""
        out = resp.get("output")
        if not isinstance(out, list):
            return
        streamed = list(self.items.values())
        if not out and streamed:
            self.flag(
                "api-disagree",
                f"response.completed has an empty output; the stream built {len(streamed)} item(s)",
                n,
                "/response/output",
            )
            return
        finals = [i for i in out if isinstance(i, dict)]
        if len(finals) != len(streamed):
            self.flag(
                "api-disagree",
                f"response.completed lists {len(finals)} output items, the stream {len(streamed)}",
                n,
                "/response/output",
            )
            return
        for i, (final, item) in enumerate(zip(finals, streamed, strict=True)):
            where = f"/response/output/{i}"
            if final.get("type") != item.type:
                self.flag(
                    "api-disagree",
                    f"response.completed item {i} is a {final.get('type')}, the stream's a {item.type}",
                    n,
                    where,
                )
            elif item.type == "function_call" and (
                final.get("call_id") != item.call_id
                or final.get("name") != item.name
                or final.get("arguments") != item.text
            ):
                self.flag(
                    "api-disagree", f"response.completed call {i} differs from the streamed call", n, where
                )
            elif (
                item.type != "function_call" and (text := _item_text(final)) is not None and text != item.text
            ):
                self.flag(
                    "api-disagree",
                    f"response.completed item {i} holds {_excerpt(text)}, the stream built {_excerpt(item.text)}",
                    n,
                    where,
                )


def assemble(events: list[SSEEvent], *, plain: bool | None = None) -> AssembledStream:
    """A Responses event stream as one chat choice, every departure from vLLM's order recorded."""
    return _Stream().run(events, plain)
