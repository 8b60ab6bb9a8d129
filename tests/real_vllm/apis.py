"""One request of the real tier, sent on any of the three APIs through wirecheck's proxy.

Requests are written in chat form and rewritten for ``/v1/responses`` and ``/v1/messages`` by the
scenarios' own writer (``wirecheck.generators``' endpoint bodies), plus what that writer leaves
out: ``tool_choice`` in each API's form, ``max_tokens``, and the vLLM extensions both endpoints
accept (``vllm_xargs`` for the script, ``chat_template_kwargs``). Each request carries a tag header,
by which the test finds the exchange the proxy recorded.
"""

from __future__ import annotations

import concurrent.futures
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx

from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges
from wirecheck.generators._endpoints import ENDPOINT_PATHS, endpoint_body
from wirecheck.record import Store

APIS = ("chat", "responses", "messages")
#: every request's max_tokens unless it sets one: a tiny model that a grammar leads astray (the
#: processor steers to the shortest legal completion) then stops early instead of writing the
#: whole context's worth of junk and holding the tier for minutes
MAX_TOKENS = 512
TAG = "x-realtier-tag"
#: vLLM extensions that /v1/responses and /v1/messages accept as they are
_PASSED = ("vllm_xargs", "chat_template_kwargs")


def _tool_choice(api: str, choice: Any) -> Any:
    if api == "chat":
        return choice
    named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
    if api == "responses":
        return {"type": "function", "name": named} if named else choice
    if named:
        return {"type": "tool", "name": named}
    return {"type": {"auto": "auto", "required": "any", "none": "none"}[choice]}


def body_for(api: str, chat: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """The chat-form request ``chat`` as a request of ``api``."""
    chat = {"max_tokens": MAX_TOKENS, **chat}
    base = {**chat, "stream": stream}
    if stream and api == "chat":
        base["stream_options"] = {"include_usage": True}
    out = endpoint_body(api, base)
    if api == "chat":
        return out
    for key in _PASSED:
        if key in chat:
            out[key] = chat[key]
    if "tool_choice" in chat:
        out["tool_choice"] = _tool_choice(api, chat["tool_choice"])
    if "max_tokens" in chat:
        out["max_output_tokens" if api == "responses" else "max_tokens"] = chat["max_tokens"]
    return out


@dataclass
class Sent:
    """One request sent through the proxy, and what came back to the client."""

    api: str
    stream: bool
    body: dict[str, Any]
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    status: int = 0
    text: str = ""


def send(url: str, sent: Sent, timeout: float = 120.0) -> Sent:
    with httpx.Client(base_url=url, timeout=timeout) as c:
        r = c.post(ENDPOINT_PATHS[sent.api], json=sent.body, headers={TAG: sent.tag})
        sent.status, sent.text = r.status_code, r.text
    return sent


def send_all(url: str, requests: Iterable[Sent], workers: int = 6) -> list[Sent]:
    """Send concurrently (vLLM batches them: the tier's wall time, not its meaning, depends on it)."""
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda s: send(url, s), requests))


def recorded(store: Store, tags: Iterable[str], *, timeout_s: float = 30.0) -> dict[str, Exchange]:
    """The recorded exchange of each tagged request, once the proxy has written them all whole."""
    want = set(tags)
    deadline = time.monotonic() + timeout_s
    while True:
        store.flush()
        found: dict[str, Exchange] = {}
        for ex in store.exchanges():
            tag = next((v for k, v in ex.request.headers if k.lower() == TAG), None)
            if tag in want and ex.response is not None:
                found[tag] = ex
        if len(found) == len(want) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def findings(ex: Exchange, **cfg: Any) -> list[Finding]:
    return check_exchanges([ex], CheckConfig(direct=True, **cfg)).findings


def serious(found: list[Finding]) -> list[str]:
    """Error and warning findings, each as ``rule (severity, blame): message``."""
    return [f"{f.rule} ({f.severity}, {f.fault}): {f.message}" for f in found if str(f.severity) != "info"]


def judged(found: list[Finding]) -> set[tuple[str, str]]:
    """(rule, blame) of each error and warning finding."""
    return {(f.rule, str(f.fault)) for f in found if str(f.severity) != "info"}
