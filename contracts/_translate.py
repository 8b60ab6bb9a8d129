"""What a request and an answer mean, whichever of the three APIs carries them.

A gateway that bridges APIs (LiteLLM's ``/v1/messages`` and ``/v1/responses`` in front of an engine's
``/v1/chat/completions`` or ``/v1/responses``) rewrites every byte of an exchange and must keep its
meaning. The two sides of such a pair are compared here in one vocabulary:

- the conversation: roles, text, tool calls (name and arguments as JSON values) and which call each
  tool result answers. Across APIs the ids themselves may differ: Anthropic's tool_use ids must match
  ``^[a-zA-Z0-9_-]+$``, so a bridge maps vLLM's ``functions.get_weather:0`` to another spelling. What
  must hold is the link between a result and its call, so ids are compared as links;
- the tools (name, description, parameters, strict), the tool choice, the output constraint, the
  thinking switch as vLLM reads it, the token limit and the sampling parameters;
- the answer's stop reason (Messages ``tool_use``/``end_turn``/``max_tokens``, Responses
  ``completed``/``incomplete``, chat ``finish_reason``) and its usage under each API's names
  (Anthropic ``input_tokens`` leaves out cached tokens: vLLM's own ``_build_anthropic_usage`` in
  ``entrypoints/anthropic/serving.py`` subtracts ``cache_read_input_tokens``).

Every reading here is of a view's normal form (``ExchangeView.req`` and ``choices``, built in
``_apis``) or, for what that form leaves out, of the request as sent (``raw_req``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._assembly import AssembledChoice
from ._json import loads as bounded_loads
from ._view import ExchangeView, output_constraint

__all__ = [
    "Change",
    "Turn",
    "Usage",
    "answer_kept",
    "api_of",
    "args_value",
    "bridge_spelling",
    "bridged_request_changes",
    "conversation",
    "message_text",
    "output_meaning",
    "same_api",
    "same_or_coerced",
    "same_output",
    "sampling",
    "stop_meaning",
    "thinking_asked",
    "thinking_change",
    "token_limit",
    "tool_choice_meaning",
    "tools_meaning",
    "uncounted_reasoning",
    "usage_meaning",
]


def api_of(view: ExchangeView) -> str:
    """chat | responses | messages (or the path when the view is none of them)."""
    return view.endpoint or view.ex.request.path


def same_api(a: ExchangeView, b: ExchangeView) -> bool:
    return api_of(a) == api_of(b)


# --- values --------------------------------------------------------------------------------------


def args_value(arguments: str) -> tuple[str, Any]:
    """Tool-call arguments as a JSON value (``("json", value)``), or the text when it is not JSON:
    the same arguments with other spacing, or an object re-serialised by a bridge, are the same."""
    try:
        return ("json", bounded_loads(arguments))
    except ValueError:
        return ("text", arguments)


def _leaf(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def same_or_coerced(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """The same arguments (:func:`args_value`), or the same up to vLLM 0.32's coercion of
    non-streamed values to the schema's types (``ParserEngine._fix_arg_types``): every value reads
    the same as text (``42`` and ``"42"``, ``true`` and ``"true"``)."""
    if a == b:
        return True
    if a[0] != "json" or b[0] != "json":
        return False

    def same(x: Any, y: Any) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(same(i, j) for i, j in zip(x, y, strict=True))
        if isinstance(x, dict | list) or isinstance(y, dict | list):
            return False
        return _leaf(x) == _leaf(y)

    return same(a[1], b[1])


def message_text(content: Any) -> str:
    """Message content as text: text parts joined (chat ``text``, Responses ``input_text`` /
    ``output_text``, Anthropic ``text`` blocks), null as empty; any other part as its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                out.append(p["text"])
            else:
                out.append(json.dumps(p, sort_keys=True))
        return "".join(out)
    return json.dumps(content, sort_keys=True)


# --- the conversation ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    role: str
    text: str
    #: (id or link, name, arguments as a JSON value)
    calls: tuple[tuple[str | None, Any, Any], ...] = ()
    #: the call a tool result answers: its id, or its link
    answers: str | None = None


_ROLES = {"developer": "system"}


def conversation(view: ExchangeView, *, links: bool) -> list[Turn]:
    """The request's messages as turns. ``links``: ids become ``#N`` (the N-th call of the history),
    so that two sides of a bridge that spell ids differently compare equal while a result that answers
    another call than before does not; without it ids are compared as they are."""
    msgs = view.req.get("messages")
    if not isinstance(msgs, list):
        return []
    seen: dict[str, str] = {}

    def link(call_id: Any) -> str | None:
        if not isinstance(call_id, str):
            return None
        if not links:
            return call_id
        return seen.setdefault(call_id, f"#{len(seen)}")

    turns: list[Turn] = []
    for m in msgs:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role"))
        calls = []
        for tc in m.get("tool_calls") or []:
            if not isinstance(tc, dict):
                continue
            fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
            args = fn.get("arguments")
            calls.append(
                (link(tc.get("id")), fn.get("name"), args_value(args) if isinstance(args, str) else args)
            )
        text = message_text(m.get("content"))
        if role == "assistant" and not text and not calls:
            continue  # an empty assistant turn (thinking only, in history) carries nothing to keep
        turns.append(
            Turn(
                _ROLES.get(role, role),
                text,
                tuple(calls),
                link(m.get("tool_call_id")) if role == "tool" else None,
            )
        )
    return _merge_systems(turns)


def _merge_systems(turns: list[Turn]) -> list[Turn]:
    """Leading system turns as one: Anthropic's ``system`` blocks and Responses ``instructions`` reach
    chat as one system message or several, which is the same prompt."""
    lead = [t for t in turns[: next((i for i, t in enumerate(turns) if t.role != "system"), len(turns))]]
    if len(lead) < 2:
        return turns
    return [Turn("system", "\n".join(t.text for t in lead)), *turns[len(lead) :]]


# --- tools, tool choice, output, thinking, limits ---------------------------------------------------


def tools_meaning(view: ExchangeView) -> dict[str, dict[str, Any]]:
    """Declared tools by name: description, parameters (a JSON Schema) and strict. Read from the
    request as sent where the normal form leaves something out (Anthropic descriptions)."""
    out: dict[str, dict[str, Any]] = {}
    raw = view.raw_req if view.endpoint in ("responses", "messages") else view.req
    tools = raw.get("tools") if isinstance(raw, dict) else None
    for i, t in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(t, dict):
            continue
        fn: dict[str, Any] = t["function"] if isinstance(t.get("function"), dict) else t
        name = fn.get("name")
        if not isinstance(name, str):
            name = f"{t.get('type')}#{i}"  # a built-in tool (web search, ...) without a name
        params = fn.get("parameters", fn.get("input_schema"))
        out[name] = {
            "description": fn.get("description") or None,
            "parameters": params if params not in (None, {}) else None,
            "strict": fn.get("strict") is True,  # absent, null and false are all "not strict"
            "index": i,
            "schema_key": "input_schema" if "input_schema" in fn else "parameters",
        }
    return out


def tool_choice_meaning(req: dict[str, Any]) -> Any:
    """``auto`` | ``none`` | ``required`` | ``("function", NAME)``; absent is ``auto`` (vLLM's default
    when tools are given; without tools nothing is called either way)."""
    tc = req.get("tool_choice")
    if tc is None:
        return "auto"
    if isinstance(tc, dict):
        fn = tc.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tc.get("name")
        return ("function", name)
    return tc


def output_meaning(req: dict[str, Any]) -> Any:
    return output_constraint(req)


def thinking_asked(req: dict[str, Any]) -> bool | None:
    """Whether the request turns thinking on (True) or off (False) as vLLM 0.32 reads it; None: it
    does not say (the model's default).

    ``ChatCompletionRequest.build_chat_params`` adds ``enable_thinking = reasoning_effort != "none"``
    to the template kwargs unless the caller set ``enable_thinking``; the Kimi K2 parser then thinks
    unless ``thinking`` or ``enable_thinking`` is given, and with either given thinks when one of
    them is true (``parser/kimi_k2.py``). Anthropic ``thinking.type: disabled`` is
    ``reasoning_effort: none`` (``_handle_thinking``), which the normal form already holds."""
    kwargs = req.get("chat_template_kwargs")
    kw = dict(kwargs) if isinstance(kwargs, dict) else {}
    effort = req.get("reasoning_effort")
    if isinstance(effort, str) and kw.get("enable_thinking") is None:
        kw["enable_thinking"] = effort.lower() != "none"
    values = [kw.get(k) for k in ("thinking", "enable_thinking") if kw.get(k) is not None]
    if not values:
        return None
    return any(bool(v) for v in values)


def token_limit(req: dict[str, Any]) -> int | None:
    """The answer's token limit: chat ``max_completion_tokens`` or ``max_tokens``, Responses
    ``max_output_tokens`` and Messages ``max_tokens`` (both ``max_tokens`` in the normal form)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = req.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def sampling(view: ExchangeView) -> dict[str, Any]:
    """The sampling parameters the caller set: temperature, top_p, seed, and the stop sequences
    (chat ``stop`` as a string or a list, Messages ``stop_sequences``)."""
    out: dict[str, Any] = {}
    for key in ("temperature", "top_p", "seed"):
        value = view.req.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(value)
    stop = view.raw_req.get("stop_sequences") if view.endpoint == "messages" else view.req.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if isinstance(stop, list) and stop:
        out["stop"] = sorted(str(s) for s in stop)
    return out


# --- the answer ----------------------------------------------------------------------------------


def stop_meaning(choice: AssembledChoice) -> str | None:
    """Why the answer ended, in one vocabulary: ``tool_calls`` | ``stop`` | ``length`` | other.

    The normal form already maps Messages and Responses onto chat's finish reasons; what differs
    between the APIs is how a forced tool call ends: vLLM's chat answers a named ``tool_choice``
    with ``stop`` (real-vllm-cpu.md), which Messages can only say as ``tool_use``."""
    fr = choice.finish_reason
    if fr in ("tool_calls", "stop", "function_call") and choice.calls:
        return "tool_calls"
    if fr in ("stop", "end_turn", "stop_sequence"):
        return "stop"
    return fr


#: Anthropic's tool_use ids (and tool_result's tool_use_id) must match this: a bridge to Messages
#: respells vLLM's ``functions.get_weather:0``
_ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


def bridge_spelling(rule_id: str, caller: ExchangeView, engine: ExchangeView) -> bool:
    """A caller-side finding that is only the bridge's spelling of the engine's answer in the caller's
    API: a call id in Anthropic's id pattern where the engine's id was the model's header."""
    return (
        rule_id == "tool-call-id-format"
        and caller.endpoint == "messages"
        and not same_api(caller, engine)
        and all(
            c.id is not None and _ANTHROPIC_ID.match(c.id) is not None
            for ch in caller.choices
            for c in ch.calls
        )
    )


def answer_kept(caller: ExchangeView, engine: ExchangeView) -> bool:
    """The caller got the answer the engine gave, choice by choice: the same text and calls (names,
    arguments as JSON values). Ids, stop reasons and usage are each API's own spelling; reasoning
    lost on the way is its own finding."""
    if not (caller.ok and engine.ok) or len(caller.choices) != len(engine.choices):
        return False
    for c, e in zip(caller.choices, engine.choices, strict=True):
        if (c.content or "") != (e.content or ""):
            return False
        if [(x.name, args_value(x.arguments)) for x in c.calls] != [
            (x.name, args_value(x.arguments)) for x in e.calls
        ]:
            return False
    return True


def same_output(a: ExchangeView, b: ExchangeView, *, reasoning: bool = True) -> bool:
    """Two answers that are one output of the model, parsed twice: in every choice the same text
    (not empty), the same reasoning (with ``reasoning``), or the same calls with the same arguments.
    Greedy decoding is no proof: vLLM's batches change the sums enough to change a token, and the
    answers then differ for the model's reasons, not the parser's."""
    if not (a.ok and b.ok) or len(a.choices) != len(b.choices) or not a.choices:
        return False
    for x, y in zip(a.choices, b.choices, strict=True):
        text = (x.content or "").strip()
        thought = (x.reasoning or "").strip() if reasoning else ""
        calls_x = [(c.name, args_value(c.arguments)) for c in x.calls]
        calls_y = [(c.name, args_value(c.arguments)) for c in y.calls]
        if not (
            (text and text == (y.content or "").strip())
            or (thought and thought == (y.reasoning or "").strip())
            or (calls_x and calls_x == calls_y)
        ):
            return False
    return True


@dataclass(frozen=True, slots=True)
class Usage:
    #: every prompt count the API's names allow (Anthropic's input may or may not hold cached tokens)
    prompt: frozenset[int]
    completion: int | None
    reasoning: int | None


def usage_meaning(view: ExchangeView) -> Usage | None:
    """Usage under the API's names: chat ``prompt_tokens`` / ``completion_tokens``, Responses and
    Messages ``input_tokens`` / ``output_tokens``. A Messages stream spreads it over ``message_start``
    and ``message_delta``: both are read."""
    u = _messages_stream_usage(view) if view.endpoint == "messages" and view.stream else view.usage
    if not isinstance(u, dict):
        return None
    if "prompt_tokens" in u or "completion_tokens" in u:
        details = u.get("completion_tokens_details")
        return Usage(
            frozenset(v for v in [_int(u.get("prompt_tokens"))] if v is not None),
            _int(u.get("completion_tokens")),
            _int(details.get("reasoning_tokens")) if isinstance(details, dict) else None,
        )
    inp = _int(u.get("input_tokens"))
    prompts = set() if inp is None else {inp}
    cache = sum(_int(u.get(k)) or 0 for k in ("cache_read_input_tokens", "cache_creation_input_tokens"))
    if inp is not None and cache:
        prompts.add(inp + cache)
    details = u.get("output_tokens_details")
    return Usage(
        frozenset(prompts),
        _int(u.get("output_tokens")),
        _int(details.get("reasoning_tokens")) if isinstance(details, dict) else None,
    )


def uncounted_reasoning(view: ExchangeView, usage: Usage, choice: AssembledChoice) -> int:
    """The most reasoning tokens a stream's usage may have left out of ``reasoning_tokens``.

    vLLM 0.32's engine parsers (kimi_k2, glm45, hermes, minimax_m2: ``parser/engine``) count a
    delta's reasoning tokens as they lex it, but in the delta that carries the end of sequence
    they cannot find the EOS token's text (the detokenizer leaves the stop token out), so that
    delta's tokens count nowhere. When the thinking closed earlier the count is exact; when it
    never closed, the reasoning the end arrived with is missing from the count, by as many tokens
    as the engine's step grouped into that delta: one token a delta, nothing; under load, any.
    What reached the wire bounds it: at most one token per byte of that reasoning text. The
    whole answer's count is made in one pass and is exact."""
    if view.stream is None or usage.reasoning is None:
        return 0
    return len(choice.reasoning_at_end.encode())


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _messages_stream_usage(view: ExchangeView) -> dict[str, Any] | None:
    merged: dict[str, Any] = {}
    for ev in view.events:
        data = ev.data
        if "message_" not in data and "\\" not in data:
            # no type of message_start or message_delta can be in it, not even escaped: not read
            # again (a stream's text deltas are nearly all its events)
            continue
        try:
            obj = bounded_loads(data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        msg = obj.get("message")
        usage = msg.get("usage") if obj.get("type") == "message_start" and isinstance(msg, dict) else None
        if obj.get("type") == "message_delta":
            usage = obj.get("usage")
        if isinstance(usage, dict):
            # message_delta's counts are cumulative: a later one replaces an earlier one
            merged.update({k: v for k, v in usage.items() if v is not None})
    return merged or None


# --- the request across a bridge ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One difference in meaning between what the caller asked and what reached the engine."""

    message: str
    #: a JSON pointer into the caller's request body
    pointer: str
    excerpt: Any = None


def _first_difference(a: Any, b: Any, at: str) -> tuple[str, str]:
    """Where two JSON values first differ, as a JSON pointer and what happened there: a schema
    keyword removed from a tool shows as ``/tools/0/function/parameters/additionalProperties``."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                return f"{at}/{k}", f"{json.dumps(a[k])[:60]} removed"
            if a[k] != b[k]:
                return _first_difference(a[k], b[k], f"{at}/{k}")
        for k in b:
            if k not in a:
                return f"{at}/{k}", f"{json.dumps(b[k])[:60]} added"
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{at}/{i}")
        if len(a) != len(b):
            return at, f"{len(a)} item(s) became {len(b)}"
    return at, f"{json.dumps(a)[:60]} became {json.dumps(b)[:60]}"


_THINKING_KEYS = ("thinking", "chat_template_kwargs", "reasoning", "reasoning_effort")


def thinking_change(caller: ExchangeView, engine: ExchangeView, default: bool | None) -> Change | None:
    """The thinking switch the caller set, lost or flipped on the way: ``chat_template_kwargs``
    dropped by a bridge brings thinking back on a model that thinks by default. ``default``: whether
    the engine's model thinks when not told (the family table's; None: not known). Where the engine's
    request does not say, reasoning in its answer shows that thinking was on."""
    c, e = thinking_asked(caller.req), thinking_asked(engine.req)
    thought = engine.ok and any(ch.reasoning for ch in engine.choices)
    rc = c if c is not None else default
    re_ = e if e is not None else True if thought else default
    if rc is None or re_ is None or rc == re_:
        return None
    where = next((k for k in _THINKING_KEYS if k in (caller.raw_req or caller.req)), "")
    said = "on" if rc else "off"
    if e is None and thought and not rc:
        got = "without it, and the model thought (its answer carries reasoning)"
    elif e is None:
        got = f"without it, so the model's default ({'on' if re_ else 'off'}) applies"
    else:
        got = f"turned {'on' if re_ else 'off'}"
    return Change(
        f"thinking was {said} in the caller's request and reached the engine {got}",
        f"/request/body/{where}" if where else "/request/body",
        (caller.raw_req or caller.req).get(where) if where else None,
    )


def bridged_request_changes(caller: ExchangeView, engine: ExchangeView) -> list[Change]:
    """What a bridge changed in the request's meaning (besides the thinking switch): the
    conversation, the tools, the tool choice, the output constraint, parallel calls, the token limit
    and sampling, and whether the answer streams."""
    out: list[Change] = []
    tc, te = conversation(caller, links=True), conversation(engine, links=True)
    if tc != te:
        out.append(_turns_change(tc, te))
    out.extend(_tools_changes(tools_meaning(caller), tools_meaning(engine)))
    for what, value in (
        ("tool_choice", tool_choice_meaning),
        ("output format", output_meaning),
        ("parallel_tool_calls", lambda r: r.get("parallel_tool_calls") is not False),
    ):
        vc, ve = value(caller.req), value(engine.req)
        if vc != ve:
            out.append(Change(f"{what} {json.dumps(vc)} became {json.dumps(ve)}", "/request/body", vc))
    lc, le = token_limit(caller.req), token_limit(engine.req)
    if lc is not None and lc != le:
        how = "dropped" if le is None else f"became {le}"
        out.append(Change(f"the token limit {lc} {how}", "/request/body", lc))
    sc, se = sampling(caller), sampling(engine)
    for key, vc in sc.items():
        if se.get(key) != vc:
            how = "dropped" if key not in se else f"became {se[key]}"
            out.append(Change(f"{key} {vc} {how}", "/request/body", vc))
    if caller.wants_stream != engine.wants_stream:
        out.append(
            Change(
                f"the caller asked for {'a stream' if caller.wants_stream else 'one answer'} and the "
                f"engine was asked for {'a stream' if engine.wants_stream else 'one answer'}",
                "/request/body/stream",
            )
        )
    return out


def _turns_change(tc: list[Turn], te: list[Turn]) -> Change:
    roles_c, roles_e = [t.role for t in tc], [t.role for t in te]
    if roles_c != roles_e:
        return Change(f"history altered: roles {roles_c} became {roles_e}", "/request/body")
    i, (a, b) = next((i, p) for i, p in enumerate(zip(tc, te, strict=True)) if p[0] != p[1])
    part = (
        "the call it answers"
        if a.answers != b.answers
        else "tool calls"
        if [c[1:] for c in a.calls] != [c[1:] for c in b.calls]
        else "which calls later results answer"
        if a.calls != b.calls
        else "text"
    )
    return Change(f"history altered: turn {i} ({a.role}): {part} changed", "/request/body", a.text[:200])


def _tools_changes(tc: dict[str, dict[str, Any]], te: dict[str, dict[str, Any]]) -> list[Change]:
    out = []
    if tc.keys() != te.keys():
        gone, new = sorted(tc.keys() - te.keys()), sorted(te.keys() - tc.keys())
        what = "; ".join(p for p in (f"removed {gone}" if gone else "", f"added {new}" if new else "") if p)
        return [Change(f"tools changed: {what}", "/request/body/tools")]
    for name, c in tc.items():
        e = te[name]
        ptr = f"/request/body/tools/{c['index']}"
        if c["parameters"] != e["parameters"]:
            where, how = _first_difference(c["parameters"], e["parameters"], "")
            out.append(
                Change(
                    f"tool {name}: parameters changed at {where or '/'}: {how}",
                    f"{ptr}/{c['schema_key']}{where}",
                    c["parameters"],
                )
            )
        if c["description"] != e["description"]:
            out.append(Change(f"tool {name}: description changed", ptr + "/description", c["description"]))
        if c["strict"] != e["strict"]:
            out.append(Change(f"tool {name}: strict {c['strict']} became {e['strict']}", ptr + "/strict"))
    return out
