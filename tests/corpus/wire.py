"""Wire writers for the corpus: the bytes vLLM 0.32 writes on /v1/chat/completions, /v1/responses and
/v1/messages, and what LiteLLM's proxy writes to its callers, each exchange with ids, times and a
prompt of its own case.

Written from the installed vLLM 0.32 (``entrypoints/openai/chat_completion/serving.py``,
``entrypoints/openai/responses/streaming_events.py`` and ``serving.py``,
``entrypoints/anthropic/serving.py`` and ``protocol.py``) and LiteLLM 1.108 (``litellm/types/utils.py``
``ModelResponseStream``, ``responses/litellm_completion_transformation/streaming_iterator.py``,
``llms/anthropic/experimental_pass_through/adapters/streaming_iterator.py``), never from the checker:
a writer that shared the checker's reading could not catch the checker's mistakes.

Every id a case shows (completion ids, minted tool-call ids, Responses item ids, the fingerprint's
hash) is derived from the case id, so no two cases share one; a test holds that.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from wirecheck.contracts import Chunk, Exchange, ExchangeError, HttpRequest, HttpResponse

#: 2026-01-01T00:00:00Z: every case's clock starts somewhere in the year after it
_EPOCH_2026 = 1767225600

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
MESSAGES = "/v1/messages"

VLLM_SSE = [("content-type", "text/event-stream; charset=utf-8"), ("server", "uvicorn")]
VLLM_JSON = [("content-type", "application/json"), ("server", "uvicorn")]


def compact(obj: Any) -> str:
    """JSON as pydantic's ``model_dump_json`` and starlette's ``JSONResponse`` write it."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


@dataclass(slots=True)
class Wire:
    """One case's identity on the wire: its ids, its clock, the server version it reports."""

    case: str
    model: str
    #: the vLLM version the report names (it is what ``system_fingerprint`` carries)
    version: str = "0.32.0"
    tp: int | None = None
    _frames: int = field(default=0, repr=False)

    @property
    def created(self) -> int:
        return _EPOCH_2026 + int(_digest(self.case, "t")[:8], 16) % 20_000_000

    @property
    def started_at(self) -> str:
        return datetime.fromtimestamp(self.created, UTC).isoformat().replace("+00:00", "Z")

    def hex(self, salt: str, n: int = 16) -> str:
        return _digest(self.case, salt)[:n]

    @property
    def cid(self) -> str:
        return f"chatcmpl-{self.hex('cid')}"

    @property
    def fingerprint(self) -> str | None:
        """``system_fingerprint`` as the server writes it; None before vLLM 0.20, which added it
        (https://github.com/vllm-project/vllm/pull/40537): older servers leave the version off the wire."""
        if _release(self.version) < (0, 20):
            return None
        tp = f"-tp{self.tp}" if self.tp else ""
        return f"vllm-{self.version}{tp}-{self.hex('fp', 8)}"

    def tool_id(self, n: int = 0) -> str:
        """An id vLLM mints for a parser that writes none (``make_tool_call_id``)."""
        return f"chatcmpl-tool-{self.hex(f'tool{n}')}"

    def call_id(self, n: int = 0) -> str:
        """A Responses ``call_id`` for a parser that writes none (``call_<16 hex>``)."""
        return f"call_{self.hex(f'call{n}')}"


def _release(version: str) -> tuple[int, ...]:
    head = re.match(r"\d+(\.\d+)*", version)
    return tuple(int(p) for p in head.group(0).split(".")) if head else ()


# --- exchanges ---------------------------------------------------------------------------------------


def exchange(
    w: Wire,
    path: str,
    request: dict[str, Any] | bytes,
    response: list[bytes] | dict[str, Any] | bytes | None,
    *,
    tap: str = "engine",
    status: int = 200,
    headers: list[tuple[str, str]] | None = None,
    first_ms: float = 180.0,
    gap_ms: float = 24.0,
    times: list[float] | None = None,
    correlation: str | None = None,
    error: ExchangeError | None = None,
    suffix: str = "",
    offset_ms: float = 0.0,
) -> Exchange:
    """One exchange of case ``w`` at ``tap``: ``response`` as SSE frames (one chunk each, the first
    ``first_ms`` in and then ``gap_ms`` apart unless ``times`` says), a JSON body, or raw bytes."""
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    resp: HttpResponse | None = None
    if isinstance(response, list):
        ts = times or [first_ms + i * gap_ms for i in range(len(response))]
        chunks = [Chunk(t, f) for t, f in zip(ts, response, strict=True)]
        resp = HttpResponse(status, list(headers or VLLM_SSE), b"", chunks)
    elif isinstance(response, dict):
        resp = HttpResponse(status, list(headers or VLLM_JSON), compact(response).encode())
    elif isinstance(response, bytes):
        resp = HttpResponse(status, list(headers or VLLM_JSON), response)
    started = w.started_at
    if offset_ms:
        moment = datetime.fromtimestamp(w.created + offset_ms / 1000, UTC)
        started = moment.isoformat().replace("+00:00", "Z")
    return Exchange(
        id=f"{w.case}-{tap}{suffix}",
        tap=tap,
        request=HttpRequest("POST", path, [("content-type", "application/json")], body),
        response=resp,
        correlation=correlation,
        started_at=started,
        error=error,
    )


# --- chat completions (vLLM) ----------------------------------------------------------------------------


def chunk(
    w: Wire,
    delta: dict[str, Any],
    finish: str | None = None,
    *,
    index: int = 0,
    stop_reason: Any = None,
    usage: dict[str, Any] | None = None,
    fingerprint: bool = False,
) -> dict[str, Any]:
    """A token or finish chunk as vLLM 0.32 serialises it: explicit nulls, ``stop_reason`` on the
    finish chunk, ``system_fingerprint`` there when usage is not streamed separately."""
    ch: dict[str, Any] = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        ch["stop_reason"] = stop_reason
    ch["token_ids"] = None
    out: dict[str, Any] = {
        "id": w.cid,
        "object": "chat.completion.chunk",
        "created": w.created,
        "model": w.model,
        "choices": [ch],
    }
    if usage is not None:
        out["usage"] = usage
    if fingerprint and w.fingerprint is not None:
        out["system_fingerprint"] = w.fingerprint
    out["kv_transfer_params"] = None
    return out


def role_chunk(w: Wire, *, index: int = 0, usage: dict[str, Any] | None = None) -> dict[str, Any]:
    choice = {
        "index": index,
        "delta": {"role": "assistant", "content": ""},
        "logprobs": None,
        "finish_reason": None,
    }
    out: dict[str, Any] = {
        "id": w.cid,
        "object": "chat.completion.chunk",
        "created": w.created,
        "model": w.model,
        "choices": [choice],
    }
    if usage is not None:
        out["usage"] = usage
    out["prompt_token_ids"] = None
    out["prompt_text"] = None
    return out


def usage(prompt: int, completion: int, reasoning: int | None = None) -> dict[str, Any]:
    u: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if reasoning is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return u


def usage_chunk(w: Wire, prompt: int, completion: int, reasoning: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": w.cid,
        "object": "chat.completion.chunk",
        "created": w.created,
        "model": w.model,
        "choices": [],
        "usage": usage(prompt, completion, reasoning),
    }
    if w.fingerprint is not None:
        out["system_fingerprint"] = w.fingerprint
    return out


def sse(*objs: Any, done: bool = True) -> list[bytes]:
    """``data: <json>`` frames, one per object (a string is sent as it is; one starting with ``:`` is
    an SSE comment line), then ``[DONE]``."""
    out = [
        f"{o}\n\n".encode()
        if isinstance(o, str) and o.startswith(":")
        else f"data: {o if isinstance(o, str) else compact(o)}\n\n".encode()
        for o in objs
    ]
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


def tool_delta(call_id: str | None, name: str | None, args: str | None, *, index: int = 0) -> dict[str, Any]:
    """One ``tool_calls`` entry of a delta: the opening one carries id, type and name."""
    d: dict[str, Any] = {}
    if call_id is not None:
        d["id"] = call_id
        d["type"] = "function"
    d["index"] = index
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    d["function"] = fn
    return d


def tool_call(call_id: str, name: str, args: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def completion(
    w: Wire,
    msg: dict[str, Any],
    finish: str | None,
    use: dict[str, Any],
    *,
    stop_reason: Any = None,
    choices: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A non-streamed chat completion as vLLM 0.32's ``model_dump`` writes it."""
    if choices is None:
        choices = [
            {
                "index": 0,
                "message": msg,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": stop_reason,
                "token_ids": None,
            }
        ]
    u = {
        "prompt_tokens": use["prompt_tokens"],
        "total_tokens": use["total_tokens"],
        "completion_tokens": use["completion_tokens"],
        "prompt_tokens_details": None,
        "completion_tokens_details": use.get("completion_tokens_details"),
    }
    return {
        "id": w.cid,
        "object": "chat.completion",
        "created": w.created,
        "model": w.model,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": w.fingerprint,
        "usage": u,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": None,
    }


def error_body(message: str, status: int, kind: str, param: str | None = None) -> dict[str, Any]:
    """vLLM's error response (``ErrorResponse``): the HTTP status is ``code``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}


def function_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


# --- /v1/responses (vLLM) ------------------------------------------------------------------------------


def flat_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat ``tools`` entry in the Responses shape (name and parameters at the top)."""
    fn = tool["function"]
    return {
        "type": "function",
        "name": fn["name"],
        "description": fn.get("description"),
        "parameters": fn["parameters"],
        "strict": None,
    }


@dataclass(slots=True)
class Responses:
    """A Responses answer as vLLM's simple (non-harmony) path writes it: ``response.created`` and
    ``in_progress``, one item at a time (reasoning, message, function call, in the order the parser
    produced them), ``response.completed`` repeating every item; ``sequence_number`` counts every event.
    Field order: the openai SDK's models (alphabetical, ``type`` last) that vLLM dumps."""

    w: Wire
    request: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    output: list[dict[str, Any]] = field(default_factory=list)
    _item: int = 0

    def _emit(self, event: dict[str, Any]) -> None:
        kind = event.pop("type")
        extra = {k: event.pop(k) for k in ("name",) if k in event}
        event["sequence_number"] = len(self.events)
        ordered = dict(sorted(event.items()))
        self.events.append({**ordered, "type": kind, **extra})

    def response(self, status: str, use: dict[str, Any] | None) -> dict[str, Any]:
        r = self.request
        return {
            "id": f"resp_{self.w.hex('resp')}",
            "created_at": self.w.created,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": r.get("instructions"),
            "metadata": None,
            "model": self.w.model,
            "object": "response",
            "output": list(self.output) if status != "in_progress" else [],
            "parallel_tool_calls": r.get("parallel_tool_calls", True),
            "temperature": r.get("temperature", 1.0),
            "tool_choice": r.get("tool_choice", "auto"),
            "tools": r.get("tools", []),
            "top_p": r.get("top_p", 1.0),
            "background": False,
            "max_output_tokens": r.get("max_output_tokens", 4096),
            "max_tool_calls": None,
            "previous_response_id": r.get("previous_response_id"),
            "prompt": None,
            "reasoning": r.get("reasoning"),
            "service_tier": "auto",
            "status": status,
            "text": r.get("text"),
            "top_logprobs": None,
            "truncation": "disabled",
            "usage": use,
            "user": None,
            "presence_penalty": None,
            "frequency_penalty": None,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "input_messages": None,
            "output_messages": None,
        }

    def start(self) -> Responses:
        initial = self.response("in_progress", None)
        self._emit({"type": "response.created", "response": initial})
        self._emit({"type": "response.in_progress", "response": initial})
        return self

    def reasoning(self, *pieces: str) -> Responses:
        oi, rid = self._item, f"rs_{self.w.hex(f'rs{self._item}')}"
        added = {
            "id": rid,
            "summary": [],
            "type": "reasoning",
            "content": None,
            "encrypted_content": None,
            "status": "in_progress",
        }
        self._emit({"type": "response.output_item.added", "item": added, "output_index": oi})
        self._emit(
            {
                "type": "response.content_part.added",
                "content_index": 0,
                "item_id": rid,
                "output_index": oi,
                "part": {"text": "", "type": "reasoning_text"},
            }
        )
        for p in pieces:
            self._emit(
                {
                    "type": "response.reasoning_text.delta",
                    "content_index": 0,
                    "delta": p,
                    "item_id": rid,
                    "output_index": oi,
                }
            )
        text = "".join(pieces)
        part = {"text": text, "type": "reasoning_text"}
        self._emit(
            {
                "type": "response.reasoning_text.done",
                "content_index": 0,
                "item_id": rid,
                "output_index": oi,
                "text": text,
            }
        )
        self._emit(
            {
                "type": "response.content_part.done",
                "content_index": 0,
                "item_id": rid,
                "output_index": oi,
                "part": part,
            }
        )
        item = {
            "id": rid,
            "summary": [],
            "type": "reasoning",
            "content": [part],
            "encrypted_content": None,
            "status": "completed",
        }
        self._emit({"type": "response.output_item.done", "item": item, "output_index": oi})
        self.output.append(item)
        self._item += 1
        return self

    def text(self, *pieces: str) -> Responses:
        oi, mid = self._item, f"msg_{self.w.hex(f'msg{self._item}')}"
        added = {
            "id": mid,
            "content": [],
            "role": "assistant",
            "status": "in_progress",
            "type": "message",
            "phase": None,
        }
        self._emit({"type": "response.output_item.added", "item": added, "output_index": oi})
        self._emit(
            {
                "type": "response.content_part.added",
                "content_index": 0,
                "item_id": mid,
                "output_index": oi,
                "part": {"annotations": [], "text": "", "type": "output_text", "logprobs": []},
            }
        )
        for p in pieces:
            self._emit(
                {
                    "type": "response.output_text.delta",
                    "content_index": 0,
                    "delta": p,
                    "item_id": mid,
                    "logprobs": [],
                    "output_index": oi,
                }
            )
        text = "".join(pieces)
        part = {"annotations": [], "text": text, "type": "output_text", "logprobs": None}
        self._emit(
            {
                "type": "response.output_text.done",
                "content_index": 0,
                "item_id": mid,
                "logprobs": [],
                "output_index": oi,
                "text": text,
            }
        )
        self._emit(
            {
                "type": "response.content_part.done",
                "content_index": 0,
                "item_id": mid,
                "output_index": oi,
                "part": part,
            }
        )
        item = {
            "id": mid,
            "content": [part] if text else [],
            "role": "assistant",
            "status": "completed",
            "type": "message",
            "phase": None,
        }
        self._emit({"type": "response.output_item.done", "item": item, "output_index": oi})
        self.output.append(item)
        self._item += 1
        return self

    def call(
        self,
        name: str,
        *pieces: str,
        call_id: str | None = None,
        done_args: str | None = None,
        completed_call_id: str | None = None,
    ) -> Responses:
        """A function call item: ``pieces`` as argument deltas, ``done_args`` what ``.done`` says
        (the joined pieces unless given), ``completed_call_id`` what the item in
        ``response.completed`` says (the streamed one unless given)."""
        oi, fid = self._item, f"fc_{self.w.hex(f'fc{self._item}')}"
        cid = call_id or self.w.tool_id(oi)  # make_tool_call_id() unless the parser gives one
        added = {
            "arguments": "",
            "call_id": cid,
            "name": name,
            "type": "function_call",
            "id": fid,
            "namespace": None,
            "status": "in_progress",
        }
        self._emit({"type": "response.output_item.added", "item": added, "output_index": oi})
        for p in pieces:
            self._emit(
                {
                    "type": "response.function_call_arguments.delta",
                    "delta": p,
                    "item_id": fid,
                    "output_index": oi,
                }
            )
        args = "".join(pieces) if done_args is None else done_args
        self._emit(
            {
                "type": "response.function_call_arguments.done",
                "arguments": args,
                "item_id": fid,
                "output_index": oi,
                "name": name,
            }
        )
        item = {
            "arguments": args,
            "call_id": cid,
            "name": name,
            "type": "function_call",
            "id": fid,
            "namespace": None,
            "status": "completed",
        }
        self._emit({"type": "response.output_item.done", "item": item, "output_index": oi})
        self.output.append({**item, "call_id": completed_call_id or cid})
        self._item += 1
        return self

    def raw(self, event: dict[str, Any]) -> Responses:
        """An event as given (an event type vLLM does not write, an item of another shape)."""
        self._emit(dict(event))
        return self

    def completed(
        self,
        input_tokens: int,
        output_tokens: int,
        reasoning_tokens: int = 0,
        *,
        status: str = "completed",
        output: list[dict[str, Any]] | None = None,
    ) -> Responses:
        if output is not None:
            self.output = output
        final = self.response(status, responses_usage(input_tokens, output_tokens, reasoning_tokens))
        kind = "response.completed" if status == "completed" else f"response.{status}"
        self._emit({"type": kind, "response": final})
        return self

    def frames(self) -> list[bytes]:
        """``event: <type>`` and ``data: <json>`` per event (vLLM's Responses api_router)."""
        return [f"event: {e['type']}\ndata: {compact(e)}\n\n".encode() for e in self.events]

    def body(
        self, input_tokens: int, output_tokens: int, reasoning_tokens: int = 0, status: str = "completed"
    ) -> dict[str, Any]:
        return self.response(status, responses_usage(input_tokens, output_tokens, reasoning_tokens))


def responses_usage(input_tokens: int, output_tokens: int, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cache_write_tokens": 0,
            "cached_tokens": 0,
            "input_tokens_per_turn": [input_tokens],
            "cached_tokens_per_turn": [0],
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": reasoning_tokens,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [output_tokens],
            "tool_output_tokens_per_turn": [0],
        },
        "total_tokens": input_tokens + output_tokens,
    }


# --- /v1/messages (vLLM) ------------------------------------------------------------------------------


def anthropic_tool(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool["function"]
    return {"name": fn["name"], "description": fn.get("description"), "input_schema": fn["parameters"]}


@dataclass(slots=True)
class Messages:
    """A Messages answer as vLLM's ``message_stream_converter`` writes it: ``message_start`` from the
    role chunk (continuous usage: the prompt count, 0 output), one block open at a time with dense
    indexes, a thinking block closed by its ``signature_delta``, ``message_delta`` with the stop
    reason and usage from the usage chunk, then ``message_stop``. Keys in the order of vLLM's
    ``AnthropicStreamEvent`` (type, message, delta, content_block, index, error, usage)."""

    w: Wire
    input_tokens: int
    events: list[dict[str, Any]] = field(default_factory=list)
    content: list[dict[str, Any]] = field(default_factory=list)
    _index: int = 0

    @property
    def mid(self) -> str:
        return self.w.cid

    def start(self) -> Messages:
        self.events.append(
            {
                "type": "message_start",
                "message": {
                    "id": self.mid,
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": self.w.model,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": self.input_tokens, "output_tokens": 0},
                },
            }
        )
        return self

    def _block(self, block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        i = self._index
        self.events.append({"type": "content_block_start", "content_block": block, "index": i})
        for d in deltas:
            self.events.append({"type": "content_block_delta", "delta": d, "index": i})
        self.events.append({"type": "content_block_stop", "index": i})
        self._index += 1

    def thinking(self, *pieces: str) -> Messages:
        sig = self.w.hex(f"sig{self._index}", 32)
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces]
        deltas.append({"type": "signature_delta", "signature": sig})
        self._block({"type": "thinking", "thinking": ""}, deltas)
        self.content.append({"type": "thinking", "thinking": "".join(pieces), "signature": sig})
        return self

    def text(self, *pieces: str) -> Messages:
        self._block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])
        self.content.append({"type": "text", "text": "".join(pieces)})
        return self

    def tool(self, call_id: str, name: str, *pieces: str) -> Messages:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        self._block({"type": "tool_use", "id": call_id, "name": name, "input": {}}, deltas)
        self.content.append(
            {"type": "tool_use", "id": call_id, "name": name, "input": json.loads("".join(pieces))}
        )
        return self

    def stop(self, stop_reason: str, output_tokens: int, stop_sequence: str | None = None) -> Messages:
        self.events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": {"input_tokens": self.input_tokens, "output_tokens": output_tokens},
            }
        )
        self.events.append({"type": "message_stop"})
        return self

    def frames(self) -> list[bytes]:
        """``event: <type>`` and ``data: <json>`` per event; no ``[DONE]`` (the anthropic router)."""
        return [f"event: {e['type']}\ndata: {compact(e)}\n\n".encode() for e in self.events]

    def body(self, stop_reason: str, output_tokens: int, stop_sequence: str | None = None) -> dict[str, Any]:
        """The non-streamed answer: ``model_dump(exclude_none=True)``."""
        out: dict[str, Any] = {
            "id": self.mid,
            "type": "message",
            "role": "assistant",
            "content": self.content or [{"type": "text", "text": ""}],
            "model": self.w.model,
            "stop_reason": stop_reason,
        }
        if stop_sequence is not None:
            out["stop_sequence"] = stop_sequence
        out["usage"] = {"input_tokens": self.input_tokens, "output_tokens": output_tokens}
        return out


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
