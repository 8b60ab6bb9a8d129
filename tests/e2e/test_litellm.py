"""LiteLLM proxy, a real gateway, between the two taps:

    openai / anthropic SDK clients -> caller tap -> LiteLLM (litellm[proxy], own venv) -> engine tap
    -> wirecheck sim

LiteLLM drops ``x-wirecheck-id``; every caller exchange must still pair with its engine exchange, and
with a fault-free simulator the only findings are the changes LiteLLM really makes, each shown from
the recorded bytes. Its bridges too: a Messages or Responses caller in front of the engine's chat
completions (or Responses) pairs across the APIs, and what a bridge changes in meaning is found and
nothing else. Bounded: one LiteLLM start for the module, 24 requests at 4 clients, 48 at 16, and 40
bridged requests at 4.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.support import wire
from tests.support.litellm import MASTER_KEY, litellm_gateway
from tests.support.servers import port_open, running
from wirecheck.contracts import CheckConfig, Exchange, build_view, check_exchanges, pair_taps
from wirecheck.proxy import check_pending
from wirecheck.record import Store, free_port

K2 = "moonshotai/Kimi-K2-Thinking"
# both of LiteLLM's providers for a vLLM upstream: hosted_vllm keeps "stream": false, openai drops it;
# openai/chat_completions/ sends /v1/responses (and /v1/messages) callers to the engine's chat
# completions through LiteLLM's Responses bridge (litellm/responses/main.py)
MODELS = {"kimi": f"hosted_vllm/{K2}", "kimi-oa": f"openai/{K2}", "kimi-cc": f"openai/chat_completions/{K2}"}
HISTORY = wire.tool_turn("Weather in Tokyo?", "sunny, 24 C")


class Gateway:
    def __init__(self, store: Store, caller_url: str) -> None:
        self.store, self.caller_url = store, caller_url


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = Path(tmp_path_factory.mktemp("litellm"))
    sim_port, caller_port, engine_port, gw_port = (free_port() for _ in range(4))
    with ExitStack() as stack:
        # 10 tokens a second: streams spread over seconds. LiteLLM under 16 clients on a busy 2-core
        # machine stalled up to 2.4 s before passing a stream on, whole; with shorter streams that
        # stall is indistinguishable on the wire from a buffering gateway (measured)
        sim = ["sim", "--port", str(sim_port), "--decode-tokens-per-s", "10"]
        stack.enter_context(running(*sim, ready=port_open(sim_port), ready_s=60, logs=tmp / "sim"))
        stack.enter_context(
            running(
                "proxy",
                "--upstream",
                f"http://127.0.0.1:{gw_port}",
                "--listen",
                f"127.0.0.1:{caller_port}",
                "--engine-upstream",
                f"http://127.0.0.1:{sim_port}",
                "--engine-listen",
                f"127.0.0.1:{engine_port}",
                "--store",
                str(tmp / "wc.db"),
                "--no-live-checks",
                "--admin",
                "off",  # not the default 127.0.0.1:8102: tests run side by side (pytest-xdist)
                ready=port_open(caller_port),
                ready_s=60,
                logs=tmp / "proxy",
            )
        )
        t0 = time.monotonic()
        stack.enter_context(litellm_gateway(f"http://127.0.0.1:{engine_port}", MODELS, port=gw_port))
        print(f"LiteLLM started in {time.monotonic() - t0:.1f} s")
        store = Store(tmp / "wc.db", writer=True)
        stack.callback(store.close)
        yield Gateway(store, f"http://127.0.0.1:{caller_port}")


def _request(client: int, n: int) -> dict[str, Any]:
    """The request mix the reference measured: streamed and not, tools, tool results, include_usage.
    Half of them are the same body from every client (only the completion id tells them apart)."""
    kind = (client + n) % 6
    same = n % 2 == 0
    text = "Say hello." if same else f"Say hello to client {client}, request {n}."
    model = "kimi-oa" if client % 2 else "kimi"
    base: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}]}
    if kind == 0:
        return {**base, "stream": False}
    if kind == 1:
        return {**base, "stream": True}
    if kind == 2:
        return {**base, "stream": True, "stream_options": {"include_usage": True}}
    if kind == 3:
        return {
            **base,
            "tools": [wire.WEATHER],
            "messages": [{"role": "user", "content": f"Weather? {text}"}],
        }
    if kind == 4:
        return {**base, "tools": [wire.WEATHER], "stream": True}
    return {**base, "tools": [wire.WEATHER], "messages": HISTORY + base["messages"]}


async def _client(url: str, client: int, count: int) -> int:
    sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
    sent = 0
    async with sdk:
        for n in range(count):
            body = _request(client, n)
            if body.get("stream"):
                stream = await sdk.chat.completions.create(**body)
                async for _ in stream:
                    pass
            else:
                await sdk.chat.completions.create(**body)
            sent += 1
    return sent


def _run(gw: Gateway, clients: int, per_client: int) -> tuple[list[Exchange], float]:
    before = {e.id for e in gw.store.exchanges()}
    t0 = time.monotonic()

    async def main() -> list[int]:
        return await asyncio.gather(*(_client(gw.caller_url, c, per_client) for c in range(clients)))

    sent = sum(asyncio.run(main()))
    took = time.monotonic() - t0
    assert sent == clients * per_client
    deadline = time.monotonic() + 20
    while True:  # the proxy process writes each exchange as it finishes
        new = [e for e in gw.store.exchanges() if e.id not in before and _sent_by_a_client(e)]
        if len(new) >= 2 * sent or time.monotonic() > deadline:
            return new, took
        time.sleep(0.1)


def _sent_by_a_client(ex: Exchange) -> bool:
    """A chat completion: LiteLLM also asks the engine for its model list on its own (a GET of
    /v1/models, seen once during a run), which the engine tap records like any request."""
    return ex.request.method == "POST" and ex.request.path.endswith("/chat/completions")


def _last_user(ex: Exchange) -> str:
    msgs = json.loads(ex.request.body)["messages"]
    return str([m for m in msgs if m["role"] == "user"][-1]["content"])


def _check_run(gw: Gateway, clients: int, per_client: int) -> None:
    exs, took = _run(gw, clients, per_client)
    callers = [e for e in exs if e.tap == "caller"]
    engines = [e for e in exs if e.tap == "engine"]
    assert len(callers) == len(engines) == clients * per_client
    # LiteLLM dropped the correlation header: nothing to pair by there
    assert all(e.correlation is None for e in engines)

    views = [build_view(e) for e in exs]
    pairs = pair_taps(views)
    # correct: the engine side answered with the id the caller got and was asked the same question
    correct = [
        p
        for p in pairs
        if p.caller.ok
        and (p.caller.stream.ids[0] if p.caller.stream else p.caller.body["id"])
        == (p.engine.stream.ids[0] if p.engine.stream else p.engine.body["id"])
        and _last_user(p.caller.ex) == _last_user(p.engine.ex)
    ]
    print(
        f"{clients} clients: {len(correct)}/{len(callers)} pairs correct "
        f"({Counter(p.by for p in pairs)}), {len(callers)} requests in {took:.1f} s"
    )
    assert len(pairs) == len(correct) == len(callers)

    result = check_exchanges(exs, CheckConfig())
    by_pair = {p.caller.id: p for p in pairs}
    seen: Counter[str] = Counter()
    for f in result.findings:
        p = by_pair[f.exchange_id]
        # LiteLLM's real changes, each read off the two sides' bytes, and nothing else:
        if f.rule == "gateway-reasoning-renamed":
            # vLLM's "reasoning" reaches the caller as "reasoning_content" (gateway-litellm.md)
            assert f.message == "reasoning field renamed reasoning -> reasoning_content"
            assert "reasoning" in p.engine.choices[0].reasoning_fields
            assert p.caller.choices[0].reasoning_fields == {"reasoning_content"}
        elif f.rule == "gateway-request-changed":
            # measured here: the hosted_vllm provider strips "additionalProperties": false from a
            # tool's parameters on streamed requests
            where = "/tools/0/function/parameters/additionalProperties"
            assert f.evidence["pointer"] == "/request/body" + where, f.message
            assert (
                json.loads(p.caller.ex.request.body)["tools"][0]["function"]["parameters"][
                    "additionalProperties"
                ]
                is False
            )
            assert "additionalProperties" not in p.engine.req["tools"][0]["function"]["parameters"]
            assert p.caller.req["model"] == "kimi"
        else:
            raise AssertionError(f"unexpected finding {f.rule} ({f.fault}): {f.message}")
        assert (str(f.fault), f.tap) == ("gateway", "caller")
        seen[f.rule] += 1
    reasoned = sum(1 for p in pairs if p.engine.choices and p.engine.choices[0].reasoning)
    print(f"{clients} clients findings: {dict(seen)} ({reasoned} answers with reasoning)")
    assert seen["gateway-reasoning-renamed"] == reasoned > 0
    # the live checker (a worker over the store) pairs the same way and finds the same
    while check_pending(gw.store, settle_s=0):
        pass
    ids = {e.id for e in exs}
    live = Counter(f["rule"] for f in gw.store.findings(limit=100000) if f["exchange_id"] in ids)
    assert live == seen


def test_litellm_4_clients_pair_fully_with_only_litellms_own_changes(gateway: Gateway) -> None:
    _check_run(gateway, 4, 6)


def test_litellm_16_clients_pair_fully_with_only_litellms_own_changes(gateway: Gateway) -> None:
    _check_run(gateway, 16, 3)


# --- bridges: Messages and Responses callers ---------------------------------------------------------

# a tool without "additionalProperties": hosted_vllm strips that keyword (a real change, the test above)
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
BRIDGE_VARIANTS = ("plain", "tools", "history", "thinking-off", "template-kwargs")


def _bridge_mix() -> list[tuple[int, str, str, bool, str]]:
    """(number, alias, api, stream, variant): kimi bridges Messages to chat completions and passes
    Responses on; kimi-cc bridges both to chat completions. Every prompt carries its number, so that
    concurrent requests are told apart by what they ask."""
    out = []
    for alias in ("kimi", "kimi-cc"):
        for api in ("messages", "responses"):
            for stream in (False, True):
                for variant in BRIDGE_VARIANTS:
                    out.append((len(out), alias, api, stream, variant))
    return out


async def _messages_call(
    sdk: anthropic.AsyncAnthropic, n: int, alias: str, stream: bool, variant: str
) -> None:
    question = f"Request {n}: what is the weather in Tokyo?"
    msgs: list[dict[str, Any]] = [{"role": "user", "content": question}]
    kw: dict[str, Any] = {}
    if variant != "plain":
        kw["tools"] = [{"name": "get_weather", "description": "Weather for a city", "input_schema": CITY}]
    if variant == "history":
        msgs += [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_0", "name": "get_weather", "input": {"city": "Tokyo"}}
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_0", "content": "sunny, 24 C"}],
            },
        ]
    if variant == "thinking-off":
        kw["thinking"] = {"type": "disabled"}
    if variant == "template-kwargs":
        kw["extra_body"] = {"chat_template_kwargs": {"thinking": False}}
    if stream:
        async with sdk.messages.stream(model=alias, max_tokens=256, messages=msgs, **kw) as st:  # type: ignore[arg-type]
            async for _ in st:
                pass
    else:
        await sdk.messages.create(model=alias, max_tokens=256, messages=msgs, **kw)  # type: ignore[arg-type]


async def _responses_call(sdk: openai.AsyncOpenAI, n: int, alias: str, stream: bool, variant: str) -> None:
    question = f"Request {n}: what is the weather in Tokyo?"
    inp: Any = question
    kw: dict[str, Any] = {}
    if variant != "plain":
        kw["tools"] = [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Weather for a city",
                "parameters": CITY,
            }
        ]
    if variant == "history":
        inp = [
            {"role": "user", "content": question},
            {
                "type": "function_call",
                "call_id": "call_0",
                "name": "get_weather",
                "arguments": '{"city": "Tokyo"}',
            },
            {"type": "function_call_output", "call_id": "call_0", "output": "sunny, 24 C"},
        ]
    if variant == "thinking-off":
        kw["reasoning"] = {"effort": "none"}
    if variant == "template-kwargs":
        kw["extra_body"] = {"chat_template_kwargs": {"thinking": False}}
    if stream:
        events = await sdk.responses.create(model=alias, input=inp, stream=True, **kw)
        async for _ in events:
            pass
    else:
        await sdk.responses.create(model=alias, input=inp, **kw)


async def _bridge_client(url: str, share: list[tuple[int, str, str, bool, str]]) -> int:
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}
    msg_sdk = anthropic.AsyncAnthropic(
        base_url=url, api_key=MASTER_KEY, default_headers=auth, max_retries=0, timeout=60
    )
    resp_sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
    async with msg_sdk, resp_sdk:
        for n, alias, api, stream, variant in share:
            if api == "messages":
                await _messages_call(msg_sdk, n, alias, stream, variant)
            else:
                await _responses_call(resp_sdk, n, alias, stream, variant)
    return len(share)


def _number(text: Any) -> int | None:
    found = [int(w) for w in str(text).replace(":", " ").split() if w.isdigit()]
    return found[0] if found else None


def _asked(view: Any) -> int | None:
    """The request number a side carries, read from its (normal form's) first user turn."""
    for m in view.req.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            return _number(text.split("what")[0])
    return None


def _responses_answer(text: str) -> tuple[str, str]:
    """(reasoning, content) of a Responses object, or of the response.completed of its stream."""
    events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    body = next((e["response"] for e in events if e.get("type") == "response.completed"), None)
    reasoning = content = ""
    for item in (body or json.loads(text))["output"]:
        parts = "".join(p.get("text", "") for p in item.get("content") or [])
        if item["type"] == "reasoning":
            reasoning += parts
        elif item["type"] == "message":
            content += parts
    return reasoning, content


def _engine_answer(ex: Exchange) -> tuple[str, str]:
    """What the engine answered, read straight from its bytes (not through the checker):
    (reasoning, content)."""
    assert ex.response is not None
    text = ex.response.content.decode()
    if not ex.request.path.endswith("/chat/completions"):
        return _responses_answer(text)
    if "data: " not in text:
        msg = json.loads(text)["choices"][0]["message"]
        return msg.get("reasoning") or "", msg.get("content") or ""
    reasoning = content = ""
    for line in text.splitlines():
        if line.startswith("data: {"):
            for ch in json.loads(line[6:]).get("choices") or []:
                d = ch.get("delta") or {}
                reasoning += d.get("reasoning") or ""
                content += d.get("content") or ""
    return reasoning, content


def _caller_answer(ex: Exchange) -> tuple[str, str]:
    """What the caller got, read the same way from its Messages or Responses bytes."""
    assert ex.response is not None
    text = ex.response.content.decode()
    if not ex.request.path.endswith("/messages"):
        return _responses_answer(text)
    if "event:" not in text:
        blocks = json.loads(text)["content"]
        return "".join(b.get("thinking") or "" for b in blocks), "".join(b.get("text") or "" for b in blocks)
    reasoning = content = ""
    for line in text.splitlines():
        if line.startswith("data: {"):
            d = json.loads(line[6:]).get("delta") or {}
            reasoning += d.get("thinking") or ""
            content += d.get("text") or ""
    return reasoning, content


def _thinking_off(body: dict[str, Any]) -> bool:
    kwargs = body.get("chat_template_kwargs") or {}
    effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
    return (
        kwargs.get("thinking") is False
        or effort == "none"
        or (body.get("thinking") or {}).get("type") == "disabled"
    )


def test_litellm_bridges_pair_across_apis_and_show_only_the_changes_they_make(gateway: Gateway) -> None:
    mix = _bridge_mix()
    before = {e.id for e in gateway.store.exchanges()}

    async def main() -> list[int]:
        shares = [mix[i::4] for i in range(4)]
        return await asyncio.gather(*(_bridge_client(gateway.caller_url, share) for share in shares))

    assert sum(asyncio.run(main())) == len(mix)
    deadline = time.monotonic() + 20
    while True:
        exs = [e for e in gateway.store.exchanges() if e.id not in before]
        if len([e for e in exs if e.tap == "caller"]) >= len(mix) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    callers = [e for e in exs if e.tap == "caller"]
    engines = [e for e in exs if e.tap == "engine" and e.request.method == "POST"]
    assert len(callers) == len(mix) and len(engines) >= len(mix)
    # the engine's answer to which request: by the number each prompt carries (ground truth the
    # pairing does not use: it pairs on the conversation, which the numbers only make unique)
    views = [build_view(e) for e in exs]
    pairs = {p.caller.id: p for p in pair_taps(views)}
    apis = Counter((p.caller.endpoint, p.engine.endpoint) for p in pairs.values())
    print(f"bridged pairs: {dict(apis)}")
    assert len(pairs) == len(callers)
    assert all(_asked(p.caller) == _asked(p.engine) is not None for p in pairs.values())
    # the engine side the /version question stamped; the caller tap's upstream is LiteLLM (no /version)
    assert {e.extra.get("server_version") for e in engines} == {"0.33.0"}
    assert all("server_version" not in e.extra for e in callers)

    result = check_exchanges(exs, CheckConfig())
    found: dict[int, set[str]] = {}
    for f in result.findings:
        p = pairs[f.exchange_id]
        assert (str(f.fault), f.tap) == ("gateway", "caller"), f.message
        if f.rule == "api-stream-order":
            # LiteLLM ends its Messages and Responses streams with a chat completion's data: [DONE]
            # too (the SDKs skip it; an event stream of these APIs has none)
            assert "[DONE]" in f.message and p.caller.ex.response is not None
            assert p.caller.ex.response.content.rstrip().endswith(b"data: [DONE]")
            continue
        found.setdefault(_asked(p.caller) or -1, set()).add(
            "thinking" if f.rule == "gateway-request-changed" and f.message.startswith("thinking") else f.rule
        )
    # what each bridge changed, read from the bytes without the checker: every change found, and
    # nothing found that the bytes do not show
    for p in pairs.values():
        n = _asked(p.caller)
        assert n is not None
        _, alias, api, stream, variant = mix[n]
        (r_e, c_e), (r_c, c_c) = _engine_answer(p.engine.ex), _caller_answer(p.caller.ex)
        changed = set()
        if _thinking_off(json.loads(p.caller.ex.request.body)) and not _thinking_off(
            json.loads(p.engine.ex.request.body)
        ):
            changed.add("thinking")
        if r_e and not r_c:
            changed.add("gateway-reasoning-dropped")
        if c_e.strip() != c_c.strip():
            changed.add("gateway-content-changed")
            if c_e and not c_c.strip():
                changed.add("answer-empty")  # the caller's empty answer, which the engine's was not
        got = found.get(n, set())
        assert got == changed, (alias, api, stream, variant, got, changed)
        if alias == "kimi" and api == "messages":
            assert not got, "the hosted_vllm Messages bridge is faithful"
    counts = Counter(k for v in found.values() for k in v)
    print(f"bridged changes found: {dict(counts)}")
    assert counts["thinking"] and counts["gateway-reasoning-dropped"]
