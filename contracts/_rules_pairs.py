"""Rules over the two sides of one request: the dual tap (what the gateway changed).

Dual tap (DESIGN.md): the engine side is what vLLM sent, the caller side what the caller got. A
difference in meaning is the gateway's, whatever each side looks like alone. Findings land on the
caller-side exchange. Meaning, not bytes: JSON re-serialised with other spacing, ``content`` as a
string or as text parts, and the model name (gateways map aliases) are not differences.

A gateway that bridges APIs (a Messages or Responses caller in front of an engine's chat
completions) is judged on the same meaning read through ``_translate``: Anthropic's usage names,
tool descriptions in another place, ``tool_use`` for vLLM's ``stop`` after a forced call and tool ids
respelled for Anthropic's id pattern are translation, not change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ._assembly import AssembledChoice
from ._families import FAMILIES, detect_family
from ._pairs import CALLER, ENGINE, TapPair, TapSet, request_default
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Hit, Severity, hit, rule
from ._translate import (
    _first_difference,
    args_value,
    bridged_request_changes,
    message_text,
    same_api,
    stop_meaning,
    thinking_change,
    usage_meaning,
)

_REQUEST_KEYS = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "structured_outputs",
    "stream",
)
_STANDARD_REASONING = frozenset({"reasoning", "reasoning_content"})


def _msg_summary(m: Any) -> tuple[Any, ...]:
    if not isinstance(m, dict):
        return ("?",)
    calls = tuple(
        (
            tc.get("id"),
            (tc.get("function") or {}).get("name"),
            args_value((tc.get("function") or {}).get("arguments") or ""),
        )
        for tc in m.get("tool_calls") or []
        if isinstance(tc, dict)
    )
    return (m.get("role"), message_text(m.get("content")), calls, m.get("tool_call_id"))


@rule("gateway-request-changed", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _request_changed(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The request reached the engine with tools, tool_choice, response_format, stream flags, the thinking switch or history changed.

    response_format stripped (CLIProxyAPI #5533), history merged or ``tool`` messages dropped
    (litellm #2662), tool_call_ids rewritten (CLIProxyAPI #3184), ``chat_template_kwargs`` dropped so
    that a model that thinks by default thinks again. Fields a gateway adds are allowed. Across a
    bridge between APIs the request is compared by meaning (conversation, tools with their
    descriptions and schemas, tool choice, output format, token limit, sampling)."""
    c, e = pair.caller.req, pair.engine.req
    if not c or not e:
        return
    model = pair.engine.req.get("model") or pair.engine.model
    family = FAMILIES.get(detect_family(model if isinstance(model, str) else None))
    thinking = thinking_change(pair.caller, pair.engine, family.thinks_by_default if family else None)
    if thinking is not None:
        yield hit(thinking.message, thinking.pointer, thinking.excerpt)
    if not same_api(pair.caller, pair.engine):
        # a bridge rewrote every key: what it kept is judged in one vocabulary
        for change in bridged_request_changes(pair.caller, pair.engine):
            yield hit(f"{change.message} on the way to the engine", change.pointer, change.excerpt)
        return
    for key in _REQUEST_KEYS:
        # judged with defaults applied: ``"stream": false`` dropped is the same request
        # (LiteLLM's openai/ provider drops it), and so is a null field left out
        vc, ve = request_default(c, key), request_default(e, key)
        if c.get(key) is not None and vc != ve:
            where, what = f"/{key}", "removed"
            if e.get(key) is not None:
                where, how = _first_difference(vc, ve, where)
                what = f"changed at {where}: {how}"
            yield hit(
                f"request {key} {what} on the way to the engine",
                f"/request/body{where}",
                json.dumps(c.get(key))[:200],
            )
    so_c, so_e = c.get("stream_options") or {}, e.get("stream_options") or {}
    if (
        isinstance(so_c, dict)
        and isinstance(so_e, dict)
        and so_c.get("include_usage")
        and not so_e.get("include_usage")
    ):
        yield hit(
            "stream_options.include_usage dropped on the way to the engine", "/request/body/stream_options"
        )
    mc, me = c.get("messages"), e.get("messages")
    if isinstance(mc, list) and isinstance(me, list):
        sc, se = [_msg_summary(m) for m in mc], [_msg_summary(m) for m in me]
        if sc != se:
            roles_c, roles_e = [s[0] for s in sc], [s[0] for s in se]
            if roles_c != roles_e:
                yield hit(f"history altered: roles {roles_c} became {roles_e}", "/request/body/messages")
            else:
                i = next(i for i, (a, b) in enumerate(zip(sc, se, strict=True)) if a != b)
                part = (
                    "tool_call_id"
                    if sc[i][3] != se[i][3]
                    else "tool_calls"
                    if sc[i][2] != se[i][2]
                    else "content"
                )
                yield hit(
                    f"history altered: messages[{i}].{part} changed",
                    f"/request/body/messages/{i}",
                    str(sc[i][1])[:200],
                )


@rule("gateway-status-changed", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _status(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The caller got another HTTP status than the engine sent.

    A 200 from the engine that reaches the caller as 502, or an engine 500 turned into 200."""
    sc, se = pair.caller.status, pair.engine.status
    if sc is not None and se is not None and sc != se:
        yield hit(f"engine answered {se}, caller got {sc}", "/response/status", sc)


def _choices(pair: TapPair) -> Iterator[tuple[AssembledChoice, AssembledChoice]]:
    if not (pair.caller.ok and pair.engine.ok) and not _cut_alike(pair):
        return
    eng = {ch.index: ch for ch in pair.engine.choices}
    for ch in pair.caller.choices:
        if ch.index in eng:
            yield ch, eng[ch.index]


def _cut_alike(pair: TapPair) -> bool:
    """Both sides are the same stream cut by the engine's in-band error, event for event: what the
    engine sent before its error is compared with what the caller got before the relayed one. The
    demo's ground truth found reasoning dropped by the gateway and unreported whenever the engine
    later failed; a gateway that lost or merged events is not compared this way."""
    c, e = pair.caller, pair.engine
    return (
        c.stream is not None
        and e.stream is not None
        and bool(c.stream.error_frames)
        and bool(e.stream.error_frames)
        and c.status == e.status == 200
        and len(c.events) == len(e.events)
    )


@rule("gateway-reasoning-dropped", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _reasoning_dropped(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The engine sent reasoning; the caller got none.

    A gateway that only knows ``reasoning_content`` drops vLLM's ``reasoning`` (litellm #20246,
    #26501; lm-proxy #69)."""
    for c, e in _choices(pair):
        # merged into content or reshaped into another field are reported by their own rules
        merged = e.reasoning is not None and e.reasoning in (c.content or "")
        reshaped = bool(c.reasoning_fields or c.extra_delta_keys & {"reasoning_details", "thinking"})
        if e.reasoning and not c.reasoning and not merged and not reshaped:
            yield hit(
                "reasoning dropped between the taps", f"/choices/{c.index}/message/reasoning", e.reasoning
            )


@rule("gateway-reasoning-merged", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _reasoning_merged(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The engine's reasoning reached the caller inside content.

    Reasoning prepended to the answer text (higress PR #1842)."""
    for c, e in _choices(pair):
        if e.reasoning and e.reasoning not in (e.content or "") and e.reasoning in (c.content or ""):
            yield hit(
                "reasoning merged into content between the taps",
                f"/choices/{c.index}/message/content",
                c.content,
            )


@rule(
    "gateway-reasoning-reshaped", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS
)
def _reasoning_reshaped(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """Reasoning reached the caller as another type or field (reasoning_details), or with other text.

    ``reasoning_content`` turned into an object (envoyproxy/ai-gateway #2318) or into
    ``reasoning_details`` (bifrost #5325)."""
    for c, e in _choices(pair):
        if not e.reasoning:
            continue
        other = sorted(c.extra_delta_keys & {"reasoning_details", "thinking"})
        if c.reasoning is None and (other or c.reasoning_fields):
            where = ", ".join(other) or ", ".join(sorted(c.reasoning_fields)) + " (not text)"
            yield hit(f"reasoning reshaped into {where}", f"/choices/{c.index}/message")
        elif c.reasoning is not None and c.reasoning != e.reasoning:
            yield hit(
                "reasoning text changed between the taps",
                f"/choices/{c.index}/message/reasoning",
                c.reasoning,
            )


@rule(
    "gateway-reasoning-renamed",
    fault=Fault.GATEWAY,
    severity=Severity.WARNING,
    scope="taps",
    area="gateway",
    endpoints=ALL_ENDPOINTS,
)
def _reasoning_renamed(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """Reasoning moved between reasoning and reasoning_content.

    Both names are in use; a rename is only a fault for clients that read the other one."""
    if not pair.caller.is_chat or not pair.engine.is_chat:
        return  # the field names are chat's: the other APIs carry reasoning in items and blocks
    for c, e in _choices(pair):
        if e.reasoning and c.reasoning == e.reasoning:
            ce, cc = e.reasoning_fields & _STANDARD_REASONING, c.reasoning_fields & _STANDARD_REASONING
            if cc and ce and not cc & ce:
                yield hit(
                    f"reasoning field renamed {'/'.join(sorted(ce))} -> {'/'.join(sorted(cc))}",
                    f"/choices/{c.index}/message",
                )


@rule("gateway-content-changed", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _content(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The answer text differs between the taps.

    Text that was added, cut or duplicated on the way (a mid-stream retry concatenating partial and
    full text: nuguard #455). Reasoning merged into content is reported as such instead."""
    for c, e in _choices(pair):
        tc, te = c.content or "", e.content or ""
        if tc == te:
            continue
        if e.reasoning and e.reasoning in tc and tc.replace(e.reasoning, "", 1).strip() == te.strip():
            continue
        yield hit("content differs between the taps", f"/choices/{c.index}/message/content", tc)


@rule(
    "gateway-tool-calls-changed", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS
)
def _tool_calls(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool calls differ between the taps: count, names, ids, indexes, or re-encoded or repaired arguments.

    Re-indexed calls (litellm #33678), ids rewritten (CLIProxyAPI #3878), arguments double-encoded
    (praxis-proxy/ai #558). Arguments that are the same JSON with other spacing are the same. Across
    a bridge between APIs an id may be respelled (Anthropic's ids must match ``^[a-zA-Z0-9_-]+$``),
    as long as every call keeps an id of its own; arguments the engine sent as broken JSON that reach
    the caller as valid JSON were repaired by the bridge, which hides the model's error."""
    bridged = not same_api(pair.caller, pair.engine)
    for c, e in _choices(pair):
        ptr = f"/choices/{c.index}/message/tool_calls"
        if len(c.calls) != len(e.calls):
            yield hit(f"engine sent {len(e.calls)} tool call(s), caller got {len(c.calls)}", ptr)
            continue
        mapped: dict[str, str | None] = {}
        for i, (cc, ce) in enumerate(zip(c.calls, e.calls, strict=True)):
            p = pair.caller.call_pointer(c, cc)
            if cc.name != ce.name:
                yield hit(f"call {i}: name {ce.name!r} became {cc.name!r}", p + "/function/name", cc.name)
            if not bridged and cc.id != ce.id:
                yield hit(
                    f"call {i}: id {ce.id!r} became {cc.id!r} (tool_call_id chain breaks)", p + "/id", cc.id
                )
            elif bridged and (not cc.id or (cc.id in mapped and mapped[cc.id] != ce.id)):
                what = "lost" if not cc.id else f"is also call {list(mapped).index(cc.id)}'s"
                yield hit(f"call {i}: id {ce.id!r} {what} (a tool result cannot name its call)", p, cc.id)
            if cc.id:
                mapped.setdefault(cc.id, ce.id)
            if not bridged and pair.caller.kind == pair.engine.kind == "stream" and cc.index != ce.index:
                yield hit(f"call {i}: stream index {ce.index} became {cc.index}", p)
            kc, vc = args_value(cc.arguments)
            ke, ve = args_value(ce.arguments)
            if (kc, vc) == (ke, ve):
                continue
            if kc == "json" and isinstance(vc, str) and args_value(vc) == (ke, ve):
                yield hit(
                    f"call {i}: arguments double-encoded (a JSON string holding the JSON)",
                    p + "/function/arguments",
                    cc.arguments,
                )
            elif kc == "json" and ke == "text":
                yield hit(
                    f"call {i}: arguments repaired: the engine sent {ce.arguments[:80]!r}, which is not "
                    f"JSON, and the caller got {cc.arguments[:80]!r} (the model's error is hidden)",
                    p + "/function/arguments",
                    cc.arguments,
                )
            else:
                yield hit(f"call {i}: arguments changed", p + "/function/arguments", cc.arguments)


@rule(
    "gateway-finish-reason-changed",
    fault=Fault.GATEWAY,
    scope="taps",
    area="gateway",
    endpoints=ALL_ENDPOINTS,
)
def _finish(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """finish_reason (or stop_reason, status) differs between the taps.

    ``tool_calls`` turned into ``stop`` (litellm #21041, #12240; envoyproxy/ai-gateway PR #2399). vLLM
    ends a forced (named ``tool_choice``) call with ``stop``; a gateway that says ``tool_calls``
    (LiteLLM) or Messages' ``tool_use`` there says what the answer is, and is not reported."""
    bridged = not same_api(pair.caller, pair.engine)
    for c, e in _choices(pair):
        if bridged and e.finish_reason == "tool_calls" and not e.calls:
            continue  # the engine's reason contradicts its message; another API cannot say it
        if c.finish_reason != e.finish_reason and c.finish_reason != stop_meaning(e):
            yield hit(
                f"finish_reason {e.finish_reason!r} became {c.finish_reason!r}",
                f"/choices/{c.index}/finish_reason",
            )


@rule("gateway-usage-changed", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _usage(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """Usage dropped or recomputed between the taps.

    The final usage chunk dropped, or rewritten by counting text (OmniRoute #9750, headroom PR #2026).
    Compared under each API's names: Messages and Responses ``input_tokens`` / ``output_tokens``,
    where Anthropic's ``input_tokens`` may leave out ``cache_read_input_tokens``."""
    if not (pair.caller.ok and pair.engine.ok):
        return
    uc, ue = pair.caller.usage, pair.engine.usage
    so = pair.caller.req.get("stream_options")
    if (
        pair.caller.is_chat
        and pair.caller.kind == "stream"
        and not (isinstance(so, dict) and so.get("include_usage") is True)
    ):
        # the caller did not ask for usage: a gateway that asks upstream for its own accounting and
        # strips the usage chunk again (LiteLLM, gateway-litellm.md) changed nothing the caller wanted
        return
    if ue and not uc:
        yield hit("engine sent usage, caller got none", "/usage")
    elif ue and uc and pair.caller.is_chat and pair.engine.is_chat:
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            if key in ue and uc.get(key) != ue.get(key):
                yield hit(f"usage.{key} {ue.get(key)} became {uc.get(key)}", f"/usage/{key}")
    elif ue and uc:
        mc, me = usage_meaning(pair.caller), usage_meaning(pair.engine)
        if mc is None or me is None:
            return
        if mc.prompt and me.prompt and not mc.prompt & me.prompt:
            yield hit(f"prompt tokens {sorted(me.prompt)[0]} became {sorted(mc.prompt)[0]}", "/usage")
        if None not in (mc.completion, me.completion) and mc.completion != me.completion:
            yield hit(f"completion tokens {me.completion} became {mc.completion}", "/usage")


@rule("gateway-error-hidden", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _error_hidden(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """An engine error (in-band frame or transport failure) reached the caller as a normal ending.

    ``data: {"error":...}`` swallowed and replaced by a normal stop (litellm #40578)."""
    e, c = pair.engine, pair.caller
    engine_failed = bool(e.stream and e.stream.error_frames) or (
        e.ex.error is not None and e.ex.error.kind != "client_abort"
    )
    caller_failed = (
        bool(c.stream and c.stream.error_frames) or c.ex.error is not None or (c.status or 0) >= 400
    )
    if engine_failed and not caller_failed:
        yield hit("the engine failed but the caller saw a normal response", "/events")


@rule("gateway-stream-buffered", fault=Fault.GATEWAY, scope="taps", area="gateway", endpoints=ALL_ENDPOINTS)
def _buffered(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The gateway buffered the stream: tokens spread over time at the engine arrived at once at the caller.

    TTFT 272 ms direct vs 1740 ms through the gateway (litellm #26102); nginx ``proxy_buffering``
    (dstack #4269). Judged from per-chunk arrival offsets: the caller's token span against the
    engine's. Not judged when the caller tap's own loop was held up long enough to squeeze that span
    itself (its ``stall_ms``: a tap reads what arrived while it was held up as arriving at once)."""
    if pair.caller.stream is None or pair.engine.stream is None:
        return
    # Every data event counts, not only those with output left after the gateway: a gateway that
    # drops reasoning still passes the emptied chunks on at the engine's pace, and judging by the
    # caller's remaining text alone called that buffering (half the demo's findings).
    tc = _data_times(pair.caller)
    te = _data_times(pair.engine)
    if len(te) < 3 or len(tc) < 1:
        return
    span_e, span_c = te[-1] - te[0], tc[-1] - tc[0]
    stall = pair.caller.ex.extra.get("stall_ms")
    if isinstance(stall, int | float) and stall >= STALL_SQUEEZE * (span_e - span_c):
        return  # the caller tap's own hold-up explains the squeeze: its offsets cannot tell
    if span_e >= ctx.buffer_min_span_ms and span_c <= ctx.buffer_ratio * span_e:
        yield hit(
            f"engine sent {len(te)} events over {span_e:.0f} ms, caller got {len(tc)} within "
            f"{span_c:.0f} ms (first at {tc[0]:.0f} ms at the caller)",
            "/response/chunks",
        )


#: a hold-up reads up to the proxy's timer tick (5 ms) shorter than it was: one of 80 % of the
#: squeeze is taken to explain it
STALL_SQUEEZE = 0.8


def _data_times(view: Any) -> list[float]:
    """Arrival offsets of the stream's data events, ``[DONE]`` left out (it follows the last chunk
    at once either way)."""
    return [ev.t_ms for ev in view.events if ev.t_ms is not None and ev.data.strip() != "[DONE]"]


@rule(
    "gateway-retried",
    fault=Fault.GATEWAY,
    severity=Severity.INFO,
    scope="taps",
    area="gateway",
    endpoints=ALL_ENDPOINTS,
)
def _retried(pair: TapPair, ctx: CheckConfig) -> Iterator[Hit]:
    """The gateway sent one caller request to the engine more than once (a retry).

    LiteLLM retries 500/503 before any output (gateway-litellm.md); the attempt that answered is
    compared with the caller side, the earlier ones are listed here. A retry after output had
    reached the caller duplicates text (nuguard #455) and is reported by the content rules."""
    if not pair.retries:
        return
    tried = ", ".join(
        f"{r.id} ({r.status if r.status is not None else r.ex.error.kind if r.ex.error else '-'})"
        for r in pair.retries
    )
    yield hit(
        f"{len(pair.retries) + 1} engine attempts for one request: {tried}, then {pair.engine.id} "
        f"({pair.engine.status}) answered",
        "/request",
    )


@rule(
    "taps-unpaired",
    fault=Fault.UNKNOWN,
    severity=Severity.WARNING,
    scope="set",
    area="gateway",
    endpoints=ALL_ENDPOINTS,
)
def _unpaired(tap_set: TapSet, ctx: CheckConfig) -> Iterator[Hit]:
    """Both taps recorded chat, Responses or Messages requests and none could be paired: nothing between them was compared.

    Pairing uses the correlation id, then the chat completion id, then a request fingerprint and
    time (a gateway that dropped the header left the check silent about the gateway)."""
    callers, engines = tap_set.agents.get(CALLER, 0), tap_set.agents.get(ENGINE, 0)
    if tap_set.pairs or not callers or not engines:
        return
    h = hit(
        f"{callers} caller and {engines} engine exchanges, none paired (no shared "
        "correlation id, completion id or request): the gateway went unchecked; are both taps on the "
        "same deployment?",
        "",
    )
    h.exchange_id, h.tap = tap_set.first[CALLER].id, CALLER
    yield h
