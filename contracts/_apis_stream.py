"""Stream assembly of /v1/responses and /v1/messages typed event streams into one chat choice.

The counterpart of ``_assembly`` for chat chunks: content, reasoning and calls are folded into an
:class:`AssembledChoice` the chat rules read, and every departure from vLLM's event order
(``entrypoints/openai/responses/streaming_events.py``, ``entrypoints/anthropic/serving.py``) is kept as
an ``api-*`` anomaly for ``_rules_apis``.
"""

from __future__ import annotations

import json
from typing import Any

from ._apis import _MESSAGES_STOP, _RESPONSES_TERMINAL, _append, _responses_finish, _text, add_call
from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, _excerpt, frame_object
from ._sse import SSEEvent

__all__ = ["assemble_api_stream"]


class _Assembler:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.st = AssembledStream()
        self.choice = AssembledChoice(0, role="assistant")
        self.st.choices[0] = self.choice
        self.terminal: int | None = None
        self.seq_reported = False
        # responses: item_id -> [output_index, type, accumulated text, open, call]
        self.items: dict[str, list[Any]] = {}
        self.by_index: dict[int, str] = {}
        # messages: the open block (index, type, call) and the next index expected
        self.block: tuple[int, str, AssembledCall | None] | None = None
        self.next_block = 0
        self.stop_reason_seen = False

    def flag(self, kind: str, detail: str, n: int, pointer: str = "") -> None:
        self.st.anomalies.append(StreamAnomaly(kind, detail, n, pointer))

    def token(self, ev: SSEEvent) -> None:
        self.st.token_events += 1
        if ev.t_ms is not None:
            if self.st.first_token_ms is None:
                self.st.first_token_ms = ev.t_ms
            self.st.last_token_ms = ev.t_ms
            self.st.token_times.append(ev.t_ms)

    def feed(self, ev: SSEEvent) -> None:
        n = ev.index
        st = self.st
        if st.first_event_ms is None:
            st.first_event_ms = ev.t_ms
        if ev.data.strip() == "[DONE]":
            # the chat terminator is not part of these endpoints (no [DONE] in vLLM's api_router)
            self.flag("api-order", "data: [DONE] on a typed event stream", n)
            return
        obj = frame_object(st, ev.data, n)
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
        if self.endpoint == "responses":
            self.responses_event(kind, obj, ev)
        else:
            self.messages_event(kind, obj, ev)

    # -- /v1/responses

    def responses_event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
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
            self.take_response_meta(resp, n)
        if kind in _RESPONSES_TERMINAL:
            self.terminal = n
            self.st.done = 1
            self.st.done_event = n
            if kind == "response.failed":
                err = resp.get("error") if isinstance(resp, dict) else None
                self.st.error_frames.append((n, err or "response.failed"))
            for open_id, entry in self.items.items():
                if entry[3]:
                    self.flag("api-order", f"item {open_id} was never closed by response.output_item.done", n)
            status = resp.get("status") if isinstance(resp, dict) else None
            self.choice.finish_reason = _responses_finish(status, self.choice)
            self.choice.finish_event = n
            if isinstance(resp, dict):
                self.compare_final(resp, n)
            return
        if kind == "response.output_item.added":
            self.item_added(obj, n)
            return
        iid = obj.get("item_id")
        if kind == "response.output_item.done":
            item_obj = obj.get("item")
            iid = item_obj.get("id") if isinstance(item_obj, dict) else None
        if not kind.endswith((".delta", ".done")) and kind != "response.content_part.added":
            return  # response.in_progress and events this checker does not judge
        item = self.items.get(iid) if isinstance(iid, str) else None
        if item is None:
            self.flag("api-order", f"{kind} for an item that was never added ({iid!r})", n, "/item_id")
            return
        if not item[3]:
            self.flag("api-order", f"{kind} for item {iid} after its output_item.done", n, "/item_id")
            return
        if obj.get("output_index", item[0]) != item[0]:
            self.flag(
                "api-order",
                f"{kind}: output_index {obj.get('output_index')} for item {iid} at {item[0]}",
                n,
                "/output_index",
            )
        delta = obj.get("delta")
        if kind in (
            "response.output_text.delta",
            "response.reasoning_text.delta",
            "response.reasoning_summary_text.delta",
            "response.function_call_arguments.delta",
        ):
            if not isinstance(delta, str):
                self.flag("api-order", f"{kind} without a string delta", n, "/delta")
                return
            want = {
                "response.output_text.delta": "message",
                "response.reasoning_text.delta": "reasoning",
                # a bridge's reasoning as the item's summary (LiteLLM's Responses bridge)
                "response.reasoning_summary_text.delta": "reasoning",
                "response.function_call_arguments.delta": "function_call",
            }[kind]
            if item[1] != want:
                self.flag("api-order", f"{kind} for a {item[1]} item", n, "/type")
                return
            item[2] += delta
            if want == "message":
                self.choice.content = _append(self.choice.content, delta)
            elif want == "reasoning":
                self.choice.reasoning = _append(self.choice.reasoning, delta)
                self.choice.reasoning_fields.add("reasoning")
            else:
                call: AssembledCall = item[4]
                call.arguments += delta
                call.deltas += 1
            self.token(ev)
            return
        done_text = {
            "response.output_text.done": "text",
            "response.reasoning_text.done": "text",
            "response.reasoning_summary_text.done": "text",
            "response.function_call_arguments.done": "arguments",
        }.get(kind)
        if done_text is not None and isinstance(obj.get(done_text), str) and obj[done_text] != item[2]:
            self.flag(
                "api-disagree",
                f"{kind} repeats {_excerpt(obj[done_text])}, the deltas built {_excerpt(item[2])}",
                n,
                f"/{done_text}",
            )
        if kind == "response.output_item.done":
            item[3] = False
            final = _item_text(obj.get("item"))
            if final is not None and final != item[2]:
                self.flag(
                    "api-disagree",
                    f"output_item.done holds {_excerpt(final)}, the deltas built {_excerpt(item[2])}",
                    n,
                    "/item",
                )

    def take_response_meta(self, resp: dict[str, Any], n: int) -> None:
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
        open_ones = [k for k, v in self.items.items() if v[3]]
        if open_ones:
            self.flag("api-order", f"item added while {open_ones[0]} is still open", n, "/item")
        kind = item.get("type")
        call = None
        if kind == "function_call":
            args = str(item["arguments"]) if isinstance(item.get("arguments"), str) else ""
            ptr = f"/output/{len(self.items)}"
            call = add_call(self.choice, item.get("call_id"), item.get("name"), args, ptr, first_event=n)
        self.items[item["id"]] = [oi if isinstance(oi, int) else len(self.items), kind, "", True, call]

    def compare_final(self, resp: dict[str, Any], n: int) -> None:
        """response.completed carries the whole response: its calls must be the streamed ones."""
        out = resp.get("output")
        if not isinstance(out, list):
            return
        final = [i for i in out if isinstance(i, dict) and i.get("type") == "function_call"]
        streamed = self.choice.calls
        if len(final) != len(streamed):
            self.flag(
                "api-disagree",
                f"response.completed lists {len(final)} function calls, the stream {len(streamed)}",
                n,
                "/response/output",
            )
            return
        for i, (f, s) in enumerate(zip(final, streamed, strict=True)):
            if f.get("arguments") != s.arguments or f.get("name") != s.name or f.get("call_id") != s.id:
                self.flag(
                    "api-disagree",
                    f"response.completed call {i} differs from the streamed call",
                    n,
                    "/response/output",
                )

    # -- /v1/messages

    def messages_event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        if self.st.frames == 1 and kind != "message_start":
            self.flag("api-order", f"the stream opens with {kind}, not message_start", n, "/type")
        if kind == "message_start":
            msg = obj.get("message")
            if self.st.frames != 1:
                self.flag("api-order", "message_start again inside the stream", n, "/type")
            if isinstance(msg, dict):
                if isinstance(msg.get("id"), str):
                    self.st.ids.append(msg["id"])
                if isinstance(msg.get("model"), str):
                    self.st.model = msg["model"]
                if isinstance(msg.get("usage"), dict):
                    self.st.usage = msg["usage"]
            return
        if kind == "content_block_start":
            idx, block = obj.get("index"), obj.get("content_block")
            if self.block is not None:
                self.flag("api-index", f"block {idx} starts while block {self.block[0]} is open", n, "/index")
            if idx != self.next_block:
                self.flag(
                    "api-index", f"content block index {idx!r}, expected {self.next_block}", n, "/index"
                )
            btype = block.get("type") if isinstance(block, dict) else None
            call = None
            if btype == "tool_use" and isinstance(block, dict):
                inp = block.get("input")
                # the SDK starts from the block's input; vLLM sends {} and streams the JSON text
                args = "" if inp in (None, {}) else json.dumps(inp, ensure_ascii=False)
                ptr = f"/content/{idx}"
                call = add_call(self.choice, block.get("id"), block.get("name"), args, ptr, first_event=n)
            elif btype == "text" and isinstance(block, dict) and block.get("text"):
                self.choice.content = _append(self.choice.content, str(block["text"]))
            elif btype == "thinking" and isinstance(block, dict) and block.get("thinking"):
                self.choice.reasoning = _append(self.choice.reasoning, str(block["thinking"]))
            self.block = (idx if isinstance(idx, int) else self.next_block, str(btype), call)
            self.next_block = self.block[0] + 1
            return
        if kind == "content_block_delta":
            self.block_delta(obj, ev)
            return
        if kind == "content_block_stop":
            idx = obj.get("index")
            if self.block is None or idx != self.block[0]:
                self.flag(
                    "api-index", f"content_block_stop for block {idx!r}, which is not open", n, "/index"
                )
            self.block = None
            return
        if kind == "message_delta":
            delta = obj.get("delta")
            sr = delta.get("stop_reason") if isinstance(delta, dict) else None
            if self.block is not None:
                self.flag("api-order", f"message_delta while block {self.block[0]} is open", n)
            if isinstance(sr, str):
                self.stop_reason_seen = True
                self.choice.finish_reason = _MESSAGES_STOP.get(sr, sr)
                self.choice.finish_event = n
                self.choice.stop_reason = delta.get("stop_sequence") if isinstance(delta, dict) else None
            if isinstance(obj.get("usage"), dict):
                self.st.usage = obj["usage"]
            return
        if kind == "message_stop":
            self.terminal = n
            self.st.done = 1
            self.st.done_event = n
            if self.block is not None:
                self.flag("api-order", f"message_stop while block {self.block[0]} is open", n)
            if not self.stop_reason_seen:
                self.flag("api-order", "message_stop without a message_delta carrying stop_reason", n)
            return
        if kind != "ping":
            self.flag("api-order", f"unknown event type {kind!r}", n, "/type")

    def block_delta(self, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        idx, delta = obj.get("index"), obj.get("delta")
        if self.block is None or idx != self.block[0]:
            self.flag("api-index", f"delta for block {idx!r}, which is not open", n, "/index")
            return
        if not isinstance(delta, dict):
            self.flag("api-order", "content_block_delta without a delta object", n, "/delta")
            return
        dtype, btype, call = delta.get("type"), self.block[1], self.block[2]
        fits = {
            "text_delta": ("text", "text"),
            "thinking_delta": ("thinking", "thinking"),
            "signature_delta": ("thinking", "signature"),
            "input_json_delta": ("tool_use", "partial_json"),
        }.get(str(dtype))
        if fits is None or fits[0] != btype:
            self.flag("api-order", f"{dtype} inside a {btype} block", n, "/delta/type")
            return
        value = delta.get(fits[1])
        if not isinstance(value, str):
            self.flag("api-order", f"{dtype} without a string {fits[1]}", n, "/delta")
            return
        if dtype == "text_delta":
            self.choice.content = _append(self.choice.content, value)
        elif dtype == "thinking_delta":
            self.choice.reasoning = _append(self.choice.reasoning, value)
            self.choice.reasoning_fields.add("reasoning")
        elif dtype == "input_json_delta" and call is not None:
            call.arguments += value
            call.deltas += 1
        else:
            return  # a signature is not output
        self.token(ev)

    def finish(self) -> AssembledStream:
        if self.terminal is None:
            last = "response.completed" if self.endpoint == "responses" else "message_stop"
            self.flag("api-terminal-missing", f"the stream ended without {last}", self.st.events)
        if self.choice.reasoning is None:
            self.choice.reasoning_fields.discard("reasoning")
        return self.st


def _item_text(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    if item.get("type") == "function_call":
        return item.get("arguments") if isinstance(item.get("arguments"), str) else None
    if item.get("type") in ("message", "reasoning") and isinstance(item.get("content"), list):
        return _text(item["content"])
    return None


def assemble_api_stream(endpoint: str, events: list[SSEEvent]) -> AssembledStream:
    """Assemble a Responses or Messages event stream into one choice, recording every anomaly."""
    asm = _Assembler(endpoint)
    asm.st.events = len(events)
    for ev in events:
        asm.feed(ev)
    return asm.finish()
