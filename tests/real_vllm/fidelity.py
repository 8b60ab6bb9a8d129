"""Wire shape of a chat exchange or a /metrics page, for comparing the simulator with a real vLLM.

A shape keeps what a checker relies on and drops values that differ by nature (text, ids' random
parts, timings): which fields each object has and of what JSON kind, where they appear in a stream,
finish_reason, content null vs "", id patterns, usage details, the content type; for /metrics the
family names, types and label names.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

_ID_PATTERNS = [
    ("chatcmpl-<hex16>", re.compile(r"^chatcmpl-[0-9a-f]{16}$")),
    ("chatcmpl-tool-<hex16>", re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")),
    ("functions.NAME:N", re.compile(r"^functions\.[\w.-]+:\d+$")),
    ("vllm-<ver>-tp<N>-<hex8>", re.compile(r"^vllm-[\w.+]+-tp\d+-[0-9a-f]{8}$")),
    ("vllm-<ver>-<hex8>", re.compile(r"^vllm-[\w.+]+-[0-9a-f]{8}$")),
]
_KEPT_VALUES = {"finish_reason", "object", "role", "type"}


def _kind(key: str, v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        if key in _KEPT_VALUES:
            return f"={v}"
        for name, pat in _ID_PATTERNS:
            if key in ("id", "system_fingerprint") and pat.match(v):
                return name
        return '""' if v == "" else "str"
    if isinstance(v, list):
        return "list" if v else "[]"
    return "object"


def flat(obj: Any, path: str = "") -> set[str]:
    """``path:kind`` for every field, lists collapsed to ``[]``."""
    out: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            p = f"{path}.{k}"
            out.add(f"{p}:{_kind(k, v)}")
            out |= flat(v, p)
    elif isinstance(obj, list):
        for v in obj:
            out |= flat(v, f"{path}[]")
    return out


def _frame_role(obj: dict[str, Any]) -> str:
    """Which frame of a stream this is: role, token, finish or usage."""
    choices = obj.get("choices") or []
    if not choices:
        return "usage"
    ch = choices[0]
    if ch.get("finish_reason"):
        return "finish"
    if (ch.get("delta") or {}).get("role"):
        return "role"
    return "tool" if (ch.get("delta") or {}).get("tool_calls") else "token"


def chat_shape(client: httpx.Client, body: dict[str, Any]) -> set[str]:
    r = client.post("/v1/chat/completions", json=body)
    out = {f"status:{r.status_code}", f"content-type:{r.headers.get('content-type')}"}
    if not body.get("stream"):
        return out | flat(r.json())
    frames = [ln[6:] for ln in r.text.split("\n") if ln.startswith("data: ")]
    out.add(f"last-frame:{frames[-1]}" if frames else "no frames")
    for f in frames[:-1]:
        obj = json.loads(f)
        out |= {f"{_frame_role(obj)}{p}" for p in flat(obj)}
    return out


def metrics_shape(client: httpx.Client) -> set[str]:
    r = client.get("/metrics")
    out = {f"content-type:{r.headers.get('content-type')}"}
    types: dict[str, str] = {}
    for line in r.text.splitlines():
        if line.startswith("# TYPE vllm:"):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
    for line in r.text.splitlines():
        m = re.match(r"^(vllm:[\w:]+?)(_total|_bucket|_sum|_count|_created)?\{(.*)\}", line)
        if not m:
            continue
        base = m[1] if m[1] in types else m[1] + (m[2] or "")
        labels = sorted({kv.split("=", 1)[0] for kv in re.findall(r'(\w+)="', m[3])} - {"le"})
        out.add(f"{base}:{types.get(base, '?')}:{','.join(labels)}")
    return out


def _sse(text: str) -> list[tuple[str | None, Any]]:
    """(event type or None, data) per SSE frame; ``[DONE]`` as data ``"[DONE]"``."""
    out: list[tuple[str | None, Any]] = []
    for frame in text.replace("\r\n", "\n").split("\n\n"):
        event, data = None, None
        for line in frame.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


def _key_order(obj: Any) -> str:
    """How a Responses event's keys are ordered on the wire: ``model`` as vLLM's ``model_dump_json``
    of the openai event models writes them (the declared fields by name, which puts the type last,
    then vLLM's own), else the keys as they came."""
    keys = list(obj) if isinstance(obj, dict) else []
    if "type" not in keys:
        return f"{keys}"
    declared, own = keys[: keys.index("type") + 1], keys[keys.index("type") + 1 :]
    return "model" if declared == [*sorted(declared[:-1]), "type"] and own in ([], ["name"]) else f"{keys}"


def _id_kind(value: Any) -> str:
    for name, pat in _ID_PATTERNS:
        if isinstance(value, str) and pat.match(value):
            return name
    return "other"


def wire_facts(api: str, r: httpx.Response, *, stream: bool) -> set[str]:
    """What a client or a rule acts on, per API: status, content type, how the answer ends, which
    blocks or items it has, call id shapes, and for streams which event types and ending arrive."""
    out = {f"status:{r.status_code}", f"content-type:{r.headers.get('content-type')}"}
    if r.status_code != 200:
        body = r.json()
        return out | {f"error-keys:{sorted(body)}", f"error-type-kind:{type(body.get('error')).__name__}"}
    if not stream:
        body = r.json()
        if api == "chat":
            ch = body["choices"][0]
            msg = ch["message"]
            out |= {f"finish:{ch['finish_reason']}", f"content:{_kind('content', msg.get('content'))}"}
            out |= {f"call-id:{_id_kind(tc['id'])}" for tc in msg.get("tool_calls") or []}
            out.add(f"reasoning:{msg.get('reasoning') is not None}")
        elif api == "responses":
            out |= {f"status:{body['status']}", f"items:{[i['type'] for i in body['output']]}"}
        else:
            out |= {f"stop:{body['stop_reason']}", f"blocks:{[b['type'] for b in body['content']]}"}
        return out
    frames = _sse(r.text)
    out.add(
        f"last:{frames[-1][1] if frames and frames[-1][1] == '[DONE]' else frames[-1][0] if frames else None}"
    )
    for event, data in frames:
        if data == "[DONE]":
            continue
        if api == "chat":
            for ch in data.get("choices") or []:
                if ch.get("finish_reason"):
                    out.add(f"finish:{ch['finish_reason']}")
                out |= {
                    f"call-id:{_id_kind(tc['id'])}"
                    for tc in ch["delta"].get("tool_calls") or []
                    if tc.get("id")
                }
                out |= {f"delta-key:{k}" for k in ch["delta"] if ch["delta"][k] not in (None, "")}
        else:
            out.add(f"event:{event}")
            if api == "responses":
                out.add(f"key-order:{event}:{_key_order(data)}")
            if api == "messages" and event == "message_delta":
                out.add(f"stop:{data['delta'].get('stop_reason')}")
    return out
