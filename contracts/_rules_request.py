"""Rules on the request (the caller's side of the contract) and on HTTP status and transport."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from ._json import key_text, key_value
from ._registry import (
    ALL_ENDPOINTS,
    CHAT,
    ERROR_STATUS,
    EXCHANGE_ERROR,
    TOOLS,
    CheckConfig,
    Fault,
    Hit,
    Severity,
    hit,
    rule,
)
from ._view import ExchangeView
from ._wire import ChatMessage, ChatRequest

_GUIDED = (
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_decoding_backend",
    "guided_whitespace_pattern",
)


@rule("request-malformed", fault=Fault.CALLER, area="request", endpoints=(CHAT,))
def _malformed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The chat request body is not a JSON object with a messages list.

    vLLM answers such bodies with 400 (``Bad Request``, ``param`` like ``body.messages``)."""
    if not view.is_chat:
        return
    if view.request_problem:
        yield hit(
            view.request_problem, "/request/body", view.ex.request.body[:200].decode("utf-8", "replace")
        )
        return
    msgs = view.req.get("messages")
    if not isinstance(msgs, list) or not msgs:
        yield hit("messages is missing or empty", "/request/body/messages")
        return
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            yield hit(f"messages[{i}] has no role", f"/request/body/messages/{i}")
            return
    if _surely_valid(view.req, msgs):
        return
    try:
        ChatRequest.model_validate(view.req)
    except ValidationError as exc:
        for err in exc.errors()[:3]:
            where = "/".join(str(p) for p in err["loc"])
            yield hit(f"{where}: {err['msg']}", f"/request/body/{where}", json.dumps(err.get("input"))[:200])


#: for each field ChatRequest and ChatMessage type, the classes of a value the model surely takes
#: (None aside): each a subset of what pydantic's lax mode takes for its type; ``()`` for a field
#: typed Any. A field not here (a list of tools or calls) is left to the model
_SURE_REQUEST: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "tool_choice": (),
    "parallel_tool_calls": (bool,),
    "response_format": (dict,),
    "structured_outputs": (dict,),
    "stream": (bool,),
    "stream_options": (dict,),
    "max_tokens": (int,),
    "max_completion_tokens": (int,),
    "temperature": (float,),  # an int too large for a float is refused: left to the model
    "seed": (int,),
    "chat_template_kwargs": (dict,),
}
_SURE_MESSAGE: dict[str, tuple[type, ...]] = {
    "role": (str,),
    "content": (),
    "name": (str,),
    "tool_call_id": (str,),
    "reasoning": (),
    "reasoning_content": (),
}
_REQUEST_FIELDS = frozenset(ChatRequest.model_fields) - {"messages"}
_MESSAGE_FIELDS = frozenset(ChatMessage.model_fields)


def _sure(obj: dict[str, Any], fields: frozenset[str], sure: dict[str, tuple[type, ...]]) -> bool:
    for key, value in obj.items():
        if key in fields and value is not None:
            kinds = sure.get(key)
            if kinds is None or (kinds and value.__class__ not in kinds):
                return False
    return True


def _surely_valid(req: dict[str, Any], msgs: list[dict[str, Any]]) -> bool:
    """The request passes ChatRequest for certain (every typed field of it and of its messages holds
    a value of a class its type takes, or null; the rest the model keeps as it is): validating it
    was the costliest rule on a plain request (2.3 of 3.2 us). Anything else is validated."""
    return _sure(req, _REQUEST_FIELDS, _SURE_REQUEST) and all(
        _sure(m, _MESSAGE_FIELDS, _SURE_MESSAGE) for m in msgs
    )


@rule("request-guided-fields", fault=Fault.CALLER, area="request", endpoints=(CHAT,))
def _guided(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Removed guided_* fields: vLLM ignores them with HTTP 200 and unconstrained output.

    ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar`` were removed in vLLM
    0.12; only the server log warns. Use ``response_format`` or ``structured_outputs``."""
    for key in _GUIDED:
        if key in view.req:
            yield hit(
                f"{key} is ignored by vLLM >= 0.12 (use response_format or structured_outputs)",
                f"/request/body/{key}",
                json.dumps(view.req[key])[:200],
            )


@rule("request-empty-tools", fault=Fault.CALLER, area="request", endpoints=ALL_ENDPOINTS, needs=(TOOLS,))
def _empty_tools(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """tools is an empty list where the endpoint rejects one, or tool_choice asks for a call without tools.

    Per endpoint, as vLLM 0.32 validates: chat rejects ``tools: []`` and any ``tool_choice`` but none
    without tools with 400 (``ChatCompletionRequest.check_tool_usage``, ``parameter=tools`` /
    ``tool_choice``); /v1/responses takes ``tools: []`` and turns auto or none without tools into
    none, rejecting only required or a named function (``ResponsesRequest.check_tool_usage``);
    /v1/messages sets its tools after the chat validators, so ``tools: []`` passes, and ``any`` or a
    named tool without tools is the caller's (Anthropic's contract). openai-agents sends
    ``tools: []`` on every Responses request without tools: legal there."""
    tools = view.req.get("tools")
    tc = view.req.get("tool_choice")
    forcing = tc == "required" or _named(tc)
    if view.endpoint == "chat":
        if tools == []:
            yield hit("tools is an empty list (omit it instead)", "/request/body/tools")
        elif tc not in (None, "none") and tools is None:
            yield hit(f"tool_choice {tc!r} without tools", "/request/body/tool_choice")
    elif forcing and not tools:
        yield hit(
            f"tool_choice {tc!r} asks for a call but no tools are declared", "/request/body/tool_choice"
        )


def _named(tc: Any) -> bool:
    return isinstance(tc, dict) and tc.get("type") == "function"


@rule(
    "request-tool-schema-invalid",
    fault=Fault.CALLER,
    severity=Severity.WARNING,
    area="request",
    endpoints=ALL_ENDPOINTS,
    needs=(TOOLS,),
)
def _tool_schema(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool's parameters are not a valid JSON Schema.

    Arguments cannot be judged against a broken schema, and constrained decoding may reject it."""
    for name, params in view.tools.items():
        if params is None:
            continue
        if not isinstance(params, dict):
            yield hit(f"{name}: parameters is not an object", "/request/body/tools")
            continue
        problem = _schema_problem(key_text(params))
        if problem is None:
            continue
        text = json.dumps(params)
        too_deep, message = problem
        if too_deep:
            yield hit(f"{name}: {message}", "/request/body/tools")
        else:
            yield hit(f"{name}: {message}", "/request/body/tools", text[:200])


@lru_cache(maxsize=512)
def _schema_problem(params_key: bytes) -> tuple[bool, str] | None:
    """Why these tool parameters (``key_text``: in their own key order, as the first error found
    may depend on it) are not a valid JSON Schema: (too deep to follow, message), or None. The
    meta-schema check is the costliest step of checking an exchange with tools (a quarter of
    benchmarks/check_throughput.py), and an agent sends the same tools with every request: each
    distinct schema is checked once."""
    try:
        Draft202012Validator.check_schema(key_value(params_key))
    except SchemaError as exc:
        return False, str(exc.message)
    except RecursionError:  # the meta-schema validation recurses per level
        return True, "parameters nest deeper than the JSON Schema validator can follow"
    return None


@rule("http-server-error", fault=Fault.ENGINE, area="http", endpoints=ALL_ENDPOINTS, needs=(ERROR_STATUS,))
def _server_error(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """HTTP 5xx from the upstream.

    500 is an engine error, 503 admission (queue full) or a dead engine; vLLM never reports engine
    errors as a finish_reason."""
    if view.status is not None and view.status >= 500:
        yield hit(f"HTTP {view.status}: {_error_message(view)}", "/response/status", view.status)


@rule("http-client-error", fault=Fault.CALLER, area="http", endpoints=ALL_ENDPOINTS, needs=(ERROR_STATUS,))
def _client_error(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """HTTP 4xx: the request broke the server's contract.

    vLLM answers schema errors with 400 (never 422), unknown models with 404, a wrong key with 401.
    A non-streamed ``/v1/messages`` is the exception: vLLM ``json.loads`` the model's tool arguments
    to build ``tool_use.input`` (anthropic/serving.py), so invalid arguments come back as a 400 with
    the JSON error as its message: that one is the model's. A 400 whose validation error rejects a
    type the endpoint's API defines (a Messages ``thinking`` block in the history, a Responses
    ``reasoning`` item), sent by the request, is the server's: its request model is older than the
    API its clients speak (vLLM 0.14 refused thinking blocks: intel/llm-scaler #341), and so is one
    that rejects an explicit null the API allows for an optional field (a Responses item's ``"id":
    null``, which OpenAI accepts and SDKs send: vllm #54224)."""
    if view.status is not None and 400 <= view.status < 500:
        msg = _error_message(view)
        unknown = _legal_input_rejected(view)
        if unknown is not None:
            yield hit(
                f"HTTP {view.status}: the server's request model rejects {unknown}, which the "
                f"{view.endpoint} API allows: the server is stricter or older than its clients",
                "/response/status",
                _error_message(view, 240),
                fault=Fault.ENGINE,
            )
            return
        if view.endpoint == "messages" and view.status == 400 and _JSON_ERROR.match(msg):
            yield hit(
                f"HTTP 400: {msg}: vLLM could not read the model's tool arguments as JSON",
                "/response/status",
                view.status,
                fault=Fault.MODEL,
            )
            return
        yield hit(f"HTTP {view.status}: {msg}", "/response/status", view.status)


#: the type names each API defines for what a request sends (content blocks, input items, content
#: parts): a validation error that rejects one of these, when the request sent it, is the server's
_LEGAL_TYPES = {
    "messages": frozenset(
        {
            "text", "image", "document", "search_result", "thinking", "redacted_thinking", "tool_use",
            "tool_result", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
            "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload",
            "tool_reference",
        }
    ),
    "responses": frozenset(
        {
            "message", "function_call", "function_call_output", "reasoning", "item_reference",
            "input_text", "input_image", "input_file", "input_audio", "output_text", "refusal",
            "custom_tool_call", "custom_tool_call_output", "computer_call", "computer_call_output",
            "web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
            "local_shell_call", "local_shell_call_output", "mcp_call", "mcp_list_tools",
            "mcp_approval_request", "mcp_approval_response",
        }
    ),
    "chat": frozenset({"text", "image_url", "input_audio", "file", "refusal"}),
}  # fmt: skip
#: fields each API lets a caller send as null (optional, nullable in the OpenAI and Anthropic
#: schemas): SDKs and agent frameworks send explicit nulls for them
_NULLABLE = {
    "responses": frozenset(
        {"id", "status", "name", "annotations", "logprobs", "summary", "encrypted_content"}
    ),
    "messages": frozenset({"cache_control", "citations", "is_error", "signature", "stop_sequence"}),
    "chat": frozenset(
        {"name", "refusal", "audio", "function_call", "tool_calls", "reasoning", "reasoning_content"}
    ),
}
# what a pydantic validation error says it rejected: 'input': 'thinking' (or input_value=...), and a
# null under a named field (".id\n  Input should be ... input_value=None", "'loc': (..., 'id'), ...
# 'input': None")
_REJECTED = re.compile(r"(?:'input': |input_value=)'([a-z_]{2,40})'")
_NULL_FIELD = re.compile(
    r"\.(\w+)\s+Input should be [^\n]*input_value=None|'(\w+)'\), 'msg': [^}]*'input': None"
)


def _legal_input_rejected(view: ExchangeView) -> str | None:
    """What of a legal request the server's validation rejected: a type the endpoint's API defines
    that the request sent, or a null the API allows for an optional field. None otherwise."""
    legal = _LEGAL_TYPES.get(str(view.endpoint))
    if legal is None or view.status != 400:
        return None
    msg = _error_message(view, 4000)
    if "Input should be" not in msg and "Input tag" not in msg:
        return None
    body = view.ex.request.body
    for value in _REJECTED.findall(msg):
        if value in legal and f'"{value}"'.encode() in body:
            return repr(value)
    for field_a, field_b in _NULL_FIELD.findall(msg):
        name = field_a or field_b
        if name in _NULLABLE[str(view.endpoint)] and re.search(rf'"{name}"\s*:\s*null'.encode(), body):
            return f"an explicit null {name}"
    return None


# json.JSONDecodeError messages (what vLLM's json.loads of tool arguments raises)
_JSON_ERROR = re.compile(
    r"(Expecting (value|property name|',' delimiter|':' delimiter)|Unterminated string|Extra data"
    r"|Invalid control character|Invalid \\escape)"
)


@rule(
    "error-body-shape",
    fault=Fault.ENGINE,
    severity=Severity.WARNING,
    area="http",
    endpoints=ALL_ENDPOINTS,
    needs=(ERROR_STATUS,),
)
def _error_body(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """An error response whose body is not {"error": {"message", ...}}.

    OpenAI clients read ``error.message``. vLLM's 401 body ``{"error": "Unauthorized"}`` is legal."""
    if view.kind != "error" or view.status is None:
        return
    body = view.body
    if view.body_problem or not isinstance(body, dict) or "error" not in body:
        yield hit(
            'error body is not {"error": {...}}',
            "/response/body",
            view.ex.response.content[:200].decode("utf-8", "replace") if view.ex.response else None,
        )
        return
    err = body["error"]
    if isinstance(err, str) and view.status == 401:
        return
    if not isinstance(err, dict) or not isinstance(err.get("message"), str):
        yield hit("error has no message string", "/response/body/error", json.dumps(err)[:200])


@rule("response-malformed", fault=Fault.ENGINE, area="http", endpoints=ALL_ENDPOINTS)
def _response_malformed(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A 2xx chat completion whose body is not a chat.completion object.

    The body is JSON with ``choices[].message``; anything else cannot be read by a client."""
    if not view.is_agent or view.status is None or not 200 <= view.status < 300 or view.kind == "stream":
        return
    if view.kind == "none":
        yield hit("empty response body", "/response/body")
    elif view.body_problem:
        content = view.ex.response.content if view.ex.response else b""
        yield hit(view.body_problem, "/response/body", content[:200].decode("utf-8", "replace"))
    for a in view.anomalies:
        if a.kind == "bad-shape":
            yield hit(a.detail, a.pointer)


_TRANSPORT_FAULT = {
    "client_abort": (Fault.CALLER, Severity.INFO),
    # the caller's request could not be written as HTTP (a header HTTP refuses): never sent
    "request_invalid": (Fault.CALLER, Severity.ERROR),
    "store_gap": (Fault.UNKNOWN, Severity.INFO),
}


@rule("transport-error", fault=Fault.ENGINE, area="http", endpoints=ALL_ENDPOINTS, needs=(EXCHANGE_ERROR,))
def _transport(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The exchange broke on the transport: refused, reset mid-stream, timeout, client abort.

    Recorded by the proxy as the exchange's ``error``. A client abort is the caller's and only
    informational; a request that could not be written as HTTP (``request_invalid``) is the
    caller's; a record gap (store overflow) says evidence is missing."""
    err = view.ex.error
    if err is None or view.closed_after_done:  # the stream had ended: nothing was lost
        return
    fault, severity = _TRANSPORT_FAULT.get(err.kind, (None, None))
    where = f" at {err.t_ms:.0f} ms" if err.t_ms is not None else ""
    yield hit(f"{err.kind}{where}: {err.message}".rstrip(": "), "/error", fault=fault, severity=severity)


#: rules still run on an exchange whose capture was cut: they need no body past the cut
TRUNCATION_SAFE = frozenset({"capture-truncated", "transport-error"})


def truncated_sides(view: ExchangeView) -> dict[str, dict[str, int]]:
    """The body sides the proxy recorded only in part (the exchange's ``truncated`` field)."""
    marks = view.ex.extra.get("truncated")
    if not isinstance(marks, dict):
        return {}
    return {k: v for k, v in marks.items() if k in ("request", "response") and isinstance(v, dict)}


@rule(
    "capture-truncated", fault=Fault.UNKNOWN, severity=Severity.WARNING, area="http", endpoints=ALL_ENDPOINTS
)
def _capture_truncated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The proxy recorded a body only up to its record limit; the rest was forwarded, not kept.

    The proxy forwards bodies of any size but keeps at most ``--record-limit`` bytes of each
    (``truncated`` in the exchange format). The other rules are not run on such an exchange, since a
    cut body would read as a malformed one: the evidence is incomplete, and this says so."""
    for side, mark in sorted(truncated_sides(view).items()):
        yield hit(
            f"the {side} body was recorded only to {mark.get('recorded')} of {mark.get('size')} bytes",
            f"/truncated/{side}",
        )


def _error_message(view: ExchangeView, limit: int = 200) -> str:
    body = view.body
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:limit]
        if isinstance(err, str):
            return err[:limit]
    if view.ex.response is not None:
        return view.ex.response.content[:120].decode("utf-8", "replace") or "(empty body)"
    return "(no response)"
