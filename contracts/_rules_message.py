"""Rules on the assembled assistant message's tool calls and tool_choice, and the helpers the message
rules share. They judge streamed and non-streamed responses alike (see ``_view``); finish_reason,
markup, reasoning and structured output are in ``_rules_content`` (split at 600 lines)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ._assembly import AssembledCall, AssembledChoice
from ._families import FAMILIES, detect_family
from ._json import JsonLimitError, key_text, key_value
from ._json import loads as bounded_loads
from ._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP, find_markup
from ._registry import ALL_ENDPOINTS, ANOMALY, CALLS, TOOLS, CheckConfig, Fault, Hit, Severity, hit, rule
from ._translate import usage_meaning
from ._view import ExchangeView

# --- helpers shared by the rules ---------------------------------------------------------------------


@lru_cache(maxsize=512)
def _validator(schema_key: bytes) -> Draft202012Validator | None:
    schema = key_value(schema_key)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    except RecursionError:
        # the validator recurses per level; a schema it cannot follow is a limit, not a crash
        raise JsonLimitError("schema nested deeper than the JSON Schema validator can follow") from None
    return Draft202012Validator(schema)


def schema_validator(schema: Any) -> Draft202012Validator | None:
    """A cached 2020-12 validator, or None when ``schema`` is not a valid JSON Schema."""
    if not isinstance(schema, dict | bool):
        return None
    return _validator(key_text(schema, sort_keys=True))


def schema_errors(schema: Any, value: Any, limit: int = 3) -> list[str]:
    v = schema_validator(schema)
    if v is None:
        return []
    out = []
    try:
        found = sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))
    except RecursionError:
        raise JsonLimitError("value nested deeper than the JSON Schema validator can follow") from None
    for err in found:
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        out.append(f"{where}: {err.message}")
        if len(out) >= limit:
            break
    return out


def _not_validated(message: str, pointer: str) -> Hit:
    """A value the validator could not follow: said plainly, neither blamed nor passed."""
    return hit(f"not validated: {message}", pointer, fault=Fault.UNKNOWN, severity=Severity.WARNING)


def _cut_json(text: str) -> bool:
    """True when ``text`` is the start of a valid JSON document cut short (closing it parses)."""
    stack: list[str] = []
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and (not stack or stack.pop() != ch):
            return False
    if not stack and not in_str:
        return False
    head = text + ('"' if in_str else "")
    closers = "".join(reversed(stack))
    for tail in ("", "null", ": null"):
        body = head.rstrip().rstrip(",") if not tail else head
        try:
            bounded_loads(body + tail + closers)
            return True
        except ValueError:
            continue
    return False


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def read_arguments(view: ExchangeView, call: AssembledCall) -> tuple[Any, ValueError | None]:
    """A call's arguments as bounded loads reads them: (the value, None), or (None, why not: a
    ``JsonLimitError`` past the bounds, a ``json.JSONDecodeError`` where they are not JSON). Read
    once a view: half a dozen rules judge them, and an agent's arguments run to kilobytes."""
    memo: dict[int, tuple[str, Any, ValueError | None]] | None = view.memo.get("arguments")
    if memo is None:
        memo = view.memo["arguments"] = {}
    text = call.arguments
    held = memo.get(id(call))  # the view holds its calls: an id is never another call's while it lives
    if held is not None and held[0] is text:
        return held[1], held[2]
    try:
        value, err = bounded_loads(text), None
    except ValueError as exc:
        # kept without its traceback, whose frames would hold this memo (a cycle for the GC)
        value, err = None, exc.with_traceback(None)
    memo[id(call)] = (text, value, err)
    return value, err


def _parse_args(view: ExchangeView, call: AssembledCall) -> tuple[bool, Any]:
    value, err = read_arguments(view, call)
    return err is None, value


def _not_json(view: ExchangeView, call: AssembledCall) -> json.JSONDecodeError | None:
    """Why a call's arguments are not JSON, or None: JSON, or past the bounds (``json-limit``'s).
    Any other refusal of bounded loads is raised, as bounded loads raised it."""
    err = read_arguments(view, call)[1]
    if err is None or isinstance(err, JsonLimitError):
        return None
    if not isinstance(err, json.JSONDecodeError):
        raise err
    return err


def family_of(view: ExchangeView, ctx: CheckConfig) -> str:
    """The family to judge this exchange against: the configured one, else the one detector's."""
    if ctx.family != "auto":
        return ctx.family
    # worked out once a view: several rules ask it of each
    family: str | None = view.memo.get("family")
    if family is None:
        ids = (c.id for ch in view.choices for c in ch.calls)
        family = view.memo["family"] = detect_family(view.model or view.req.get("model"), ids)
    return family


def _cap(view: ExchangeView) -> int | None:
    # max_completion_tokens wins over max_tokens (ChatCompletionRequest.build_tok_params); Responses'
    # max_output_tokens and Messages' max_tokens are read into max_tokens
    cap = view.req.get("max_completion_tokens") or view.req.get("max_tokens")
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None


def _used_whole_cap(view: ExchangeView) -> bool:
    """The caller's max_tokens was spent to the last token (usage against the request).

    finish_reason alone cannot say so: a real vLLM 0.32 reports a tool call cut by max_tokens as
    ``tool_calls`` when not streamed and ``length`` when streamed (shared reference
    real-vllm-cpu.md). Usage covers all choices, so this only judges single-choice answers.
    """
    cap = _cap(view)
    usage = usage_meaning(view)
    used = usage.completion if usage is not None else None
    return cap is not None and len(view.choices) == 1 and used is not None and used >= cap


def stop_sequence(choice: AssembledChoice, view: ExchangeView) -> str | None:
    """The caller's stop string that ended this choice, if one did: vLLM reports the matched string
    as the choice's ``stop_reason`` (Messages: ``stop_sequence``), an int there is a stop token."""
    stop = view.req.get("stop")
    wanted = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    matched = choice.stop_reason
    return matched if isinstance(matched, str) and matched in wanted else None


def _stopped_by_length(choice: AssembledChoice, view: ExchangeView | None = None) -> bool:
    """The output was cut by a limit the caller set: finish_reason says length, or usage shows the
    caller's max_tokens used up whatever finish_reason says, or one of the caller's stop strings
    ended it (vLLM stops there, inside a tool call too: anthropic/serving.py keeps such a call
    incomplete rather than reporting tool_use)."""
    if choice.finish_reason == "length":
        return True
    return view is not None and (_used_whole_cap(view) or stop_sequence(choice, view) is not None)


def _cut_call(view: ExchangeView, choice: AssembledChoice, call: AssembledCall) -> bool:
    """The last call of a choice cut by a length limit: its name, id and arguments may be partial.
    A real vLLM 0.32 closes such a call with what it has (``{}``, a name like ``functions.``, a
    minted id), so none of that is the model's."""
    return _stopped_by_length(choice, view) and bool(choice.calls) and call is choice.calls[-1]


def _cap_fault(view: ExchangeView, choice: AssembledChoice) -> tuple[Fault, str]:
    cap = _cap(view)
    matched = stop_sequence(choice, view)
    if choice.finish_reason != "length" and matched is not None:
        return Fault.CALLER, f"the caller's stop sequence {matched!r} ended the output there"
    if cap and _used_whole_cap(view) and all(ch.finish_reason != "length" for ch in view.choices):
        reasons = ", ".join(sorted({str(ch.finish_reason) for ch in view.choices}))
        return (
            Fault.CALLER,
            f"usage.completion_tokens reached max_tokens={cap} (finish_reason says {reasons}): the caller's limit cut the output",
        )
    if cap:
        return Fault.CALLER, f"finish_reason is length: max_tokens={cap} cut the output"
    return Fault.UNKNOWN, "finish_reason is length: the output hit the model's length limit"


def _forced_name(view: ExchangeView) -> str | None:
    tc = view.req.get("tool_choice")
    if isinstance(tc, dict):
        fn = tc.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return str(fn["name"])
    return None


def _calls(view: ExchangeView) -> Iterator[tuple[AssembledChoice, AssembledCall]]:
    if not view.ok:
        return
    for ch in view.choices:
        for c in ch.calls:
            yield ch, c


def _call_hit(
    view: ExchangeView,
    ch: AssembledChoice,
    c: AssembledCall,
    where: str,
    message: str,
    *,
    excerpt: str | None = None,
    fault: Fault | None = None,
) -> Hit:
    """A finding on one call: the pointer to ``where`` in it, on whichever wire it came (chat,
    Responses, Messages), and the event its first delta arrived in."""
    return hit(message, view.call_pointer(ch, c, where), excerpt, event=c.first_event, fault=fault)


# --- tool calls ------------------------------------------------------------------------------------


@rule("tool-call-undeclared", fault=Fault.MODEL, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _undeclared(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call names a tool the request did not declare.

    The name must be one of ``tools[].function.name``. The main residual error of Kimi K2 after
    parser fixes (Moonshot's vendor verifier). An empty name is ``tool-call-shape``. A declared name
    cut short by max_tokens is the caller's limit, not the model's (``tool-call-args-truncated``). A
    name that carries markup or a special token (``query_dataset<|channel|>commentary``: vllm
    #32587) was cut from the model's output by the parser at the wrong place: the parser's."""
    for ch, c in _calls(view):
        if c.name and c.name not in view.tools:
            stem = c.name.removeprefix("functions.")
            if _cut_call(view, ch, c) and any(t.startswith(stem) or stem.startswith(t) for t in view.tools):
                # a cut inside the call header: the name is a declared one cut short by the caller's
                # max_tokens, reported by tool-call-args-truncated (seen on vLLM 0.32)
                continue
            declared = ", ".join(sorted(view.tools)) or "none"
            token = next(
                (m for p in (TOOL_MARKUP, REASONING_MARKUP, SPECIAL_TOKENS) if (m := find_markup(p, c.name))),
                None,
            )
            if token is not None:
                message = f"tool name {c.name!r} carries model markup: the parser cut the name wrong (declared: {declared})"
                yield _call_hit(view, ch, c, "/function/name", message, excerpt=c.name, fault=Fault.PARSER)
                continue
            message = f"tool {c.name!r} was not declared (declared: {declared})"
            yield _call_hit(view, ch, c, "/function/name", message, excerpt=c.name)


@rule(
    "tool-call-shape",
    fault=Fault.PARSER,
    area="tools",
    endpoints=ALL_ENDPOINTS,
    needs=(
        CALLS,
        ANOMALY + "arguments-not-string",
    ),
)
def _shape(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call lacks its name or type 'function', or arguments are not a JSON string.

    Each call is ``{"id", "type": "function", "function": {"name", "arguments": <string>}}``."""
    for ch, c in _calls(view):
        if not c.name:
            yield _call_hit(view, ch, c, "/function/name", "tool call has no function name")
        if c.type not in ("function", None) or (c.type is None and view.kind == "json"):
            yield _call_hit(view, ch, c, "/type", f"tool call type is {c.type!r}, expected 'function'")
    for a in view.anomalies:
        if a.kind == "arguments-not-string":
            yield hit(
                "function.arguments is not a string (the wire carries JSON text)",
                a.pointer,
                a.detail,
                event=a.event,
            )


@rule("tool-call-args-invalid-json", fault=Fault.MODEL, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _args_json(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool call arguments are not valid JSON.

    Arguments must parse as JSON. When the choice stopped on ``length`` this is reported as
    ``tool-call-args-truncated`` instead (vLLM closes a cut call with partial arguments). Arguments
    that are sound up to an abrupt end, with the call closed normally, were cut by the parser
    (Kimi K2 truncated arguments, vllm PR #38579): the parser is blamed; a syntax error inside the
    document is the model's."""
    for ch, c in _calls(view):
        if not c.name or _stopped_by_length(ch, view):
            continue
        exc = _not_json(view, c)
        if exc is None:
            continue
        where = "/function/arguments"
        if not c.arguments:
            yield _call_hit(view, ch, c, where, f"{c.name}: empty arguments")
        elif exc.pos >= len(c.arguments.rstrip()) or _cut_json(c.arguments):
            message = f"{c.name}: arguments end mid-document ({exc.msg}): cut short by the parser"
            yield _call_hit(view, ch, c, where, message, excerpt=c.arguments, fault=Fault.PARSER)
        else:
            message = f"{c.name}: arguments are not JSON ({exc.msg} at {exc.pos})"
            yield _call_hit(view, ch, c, where, message, excerpt=c.arguments)
    yield from _aborted_args(view)


# a cut literal or number (``tr``, ``-``) may still become JSON: not judged when the stream was cut
_OPEN_TAIL = re.compile(r"(?:t(?:r(?:ue?)?)?|f(?:a(?:l(?:se?)?)?)?|n(?:u(?:ll?)?)?|-)\s*$")


def _aborted_args(view: ExchangeView) -> Iterator[Hit]:
    """A stream the caller closed mid-call is not judged as a message, but arguments that no
    continuation can make JSON are already the model's fault: the anthropic SDK parses each
    ``partial_json`` as it arrives and closes the stream on the first invalid one."""
    err = view.ex.error
    if view.ok or view.kind != "stream" or err is None or err.kind != "client_abort" or not view.is_agent:
        return
    if view.stream is not None and view.stream.error_frames:
        return
    for ch in view.choices:
        for c in ch.calls:
            if not c.name or not c.arguments or _cut_json(c.arguments) or _OPEN_TAIL.search(c.arguments):
                continue
            exc = _not_json(view, c)
            if exc is None:
                continue
            message = f"{c.name}: arguments are not JSON ({exc.msg} at {exc.pos}); the caller closed the stream there"
            yield _call_hit(view, ch, c, "/function/arguments", message, excerpt=c.arguments)


@rule(
    "tool-call-args-truncated",
    fault=Fault.CALLER,
    severity=Severity.WARNING,
    area="tools",
    endpoints=ALL_ENDPOINTS,
    needs=(CALLS,),
)
def _args_truncated(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool call arguments were cut off by finish_reason length.

    Legal vLLM behaviour, but the call cannot be executed: raise ``max_tokens``. The cut call is
    judged incomplete when its arguments do not parse, are not an object, or break the schema (vLLM
    0.32 closes a cut call with ``{}``)."""
    for ch, c in _calls(view):
        ok, value = _parse_args(view, c)
        incomplete = not ok or (
            _cut_call(view, ch, c)
            and (
                not isinstance(value, dict)
                or c.name not in view.tools  # the header itself was cut: the name is a fragment
                or bool(schema_errors(view.tools[c.name], value))
            )
        )
        if _stopped_by_length(ch, view) and incomplete:
            fault, why = _cap_fault(view, ch)
            message = f"{c.name}: arguments incomplete; {why}"
            yield _call_hit(view, ch, c, "/function/arguments", message, excerpt=c.arguments, fault=fault)


@rule("tool-call-args-not-object", fault=Fault.MODEL, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _args_object(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool call arguments are JSON but not an object.

    Function arguments are a JSON object. A JSON *string* holding an object is double encoding."""
    for ch, c in _calls(view):
        ok, value = _parse_args(view, c)
        if ok and not isinstance(value, dict) and not _cut_call(view, ch, c):
            extra = ""
            if isinstance(value, str):
                try:
                    if isinstance(bounded_loads(value), dict):
                        extra = " (a JSON string holding an object: double-encoded)"
                except ValueError:
                    pass
            message = f"{c.name}: arguments are a JSON {type(value).__name__}{extra}"
            yield _call_hit(view, ch, c, "/function/arguments", message, excerpt=c.arguments)


@rule("tool-call-args-schema", fault=Fault.MODEL, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _args_schema(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Tool call arguments break the tool's parameters schema (JSON Schema 2020-12).

    Validated with jsonschema's Draft 2020-12 validator against ``function.parameters``."""
    for ch, c in _calls(view):
        if c.name not in view.tools or _cut_call(view, ch, c):
            continue
        ok, value = _parse_args(view, c)
        if not ok or not isinstance(value, dict):
            continue
        try:
            errors = schema_errors(view.tools[c.name], value)
        except JsonLimitError as exc:
            yield _not_validated(f"{c.name}: {exc}", view.call_pointer(ch, c, "/function/arguments"))
            continue
        if errors:
            yield _call_hit(
                view, ch, c, "/function/arguments", f"{c.name}: " + "; ".join(errors), excerpt=c.arguments
            )


@rule("tool-call-id-missing", fault=Fault.PARSER, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _id_missing(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call has no id.

    Without an id the tool result cannot be linked back (``tool_call_id``)."""
    for ch, c in _calls(view):
        if not c.id:
            yield _call_hit(view, ch, c, "/id", f"{c.name or 'tool call'}: no id")


@rule("tool-call-id-duplicate", fault=Fault.PARSER, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,))
def _id_dup(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Two tool calls of one message share an id.

    Ids are unique within a message, or tool results become ambiguous."""
    for ch in view.choices if view.ok else []:
        seen: dict[str, AssembledCall] = {}
        for c in ch.calls:
            if c.id and c.id in seen:
                yield _call_hit(view, ch, c, "/id", f"id {c.id!r} used by two calls", excerpt=c.id)
            elif c.id:
                seen[c.id] = c


@rule(
    "tool-call-id-format",
    fault=Fault.MODEL,
    severity=Severity.WARNING,
    area="tools",
    endpoints=ALL_ENDPOINTS,
    needs=(CALLS,),
)
def _id_format(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A tool call id the model writes itself (Kimi K2: functions.NAME:IDX) has another shape, or disagrees with the name.

    Judged for families whose model writes the id itself (the family table's id format; for Kimi
    K2 the call header ``functions.<name>:<idx>``). A header like ``search:0`` (no ``functions.``
    prefix) is the model's; a name that disagrees with the id is the parser's. Other families mint
    ids (``chatcmpl-tool-<hex>``) and are not judged here."""
    family = FAMILIES.get(family_of(view, ctx))
    if family is None or family.id_pattern is None:
        return
    pattern = _compiled(family.id_pattern)
    near = family.id_near_miss
    for ch, c in _calls(view):
        if not c.id or _cut_call(view, ch, c):
            continue
        m = pattern.match(c.id)
        if m is None:
            shape = near[1] if near and _compiled(near[0]).match(c.id) else "not that shape"
            message = f"id {c.id!r} is {shape} (expected {family.id_shape})"
            yield _call_hit(view, ch, c, "/id", message, excerpt=c.id)
        elif c.name and m["name"] != c.name:
            message = f"id {c.id!r} names {m['name']!r} but the call names {c.name!r}"
            yield _call_hit(view, ch, c, "/id", message, excerpt=c.id, fault=Fault.PARSER)


@rule("tool-choice-violated", fault=Fault.MODEL, area="tools", endpoints=ALL_ENDPOINTS, needs=(TOOLS,))
def _tool_choice(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """The response ignores tool_choice none, required or a named function.

    ``none``: no calls, and no call markup either. vLLM does not run the tool parser then, so a
    call the model writes anyway stays in content as text, the model's (``_extract_tool_calls`` in
    vllm/parser/abstract_parser.py; engine-based parsers strip it instead), and a call returned as
    ``tool_calls`` is the parser's, which should not have produced one (Gemma 4: vllm PR #46875);
    ``required``: at least
    one call; named: a call to that function. Under required or named, markup left in content means
    the parser, not the model, lost the call. Messages ``tool_choice`` any and tool are required and
    named (anthropic/serving.py ``_convert_tool_choice``), Responses ``{"type": "function",
    "name"}`` is named."""
    if not view.ok or not view.tools:
        return
    tc = view.req.get("tool_choice")
    forced = _forced_name(view)
    for ch in view.choices:
        markup = find_markup(TOOL_MARKUP, ch.content)
        # markup left in content or reasoning, or finish_reason tool_calls with the calls gone: the
        # model did call, and the parser lost it
        lost = (
            markup is not None
            or find_markup(TOOL_MARKUP, ch.reasoning) is not None
            or (ch.finish_reason == "tool_calls" and not ch.calls)
        )
        fault = Fault.PARSER if lost else None
        names = [c.name for c in ch.calls]
        if tc == "none" and names:
            # the model may write a call, but under none no parser may return one
            yield hit(
                f"tool_choice is none but the response returns calls to {', '.join(names)}: the tool "
                "parser ran although none forbids it",
                f"/choices/{ch.index}/message/tool_calls",
                fault=Fault.PARSER,
            )
        elif tc == "none" and markup is not None:
            yield hit(
                "tool_choice is none but the model wrote a tool call (left in content: vLLM does not "
                "parse calls under none)",
                f"/choices/{ch.index}/message/content",
                markup[1],
            )
        elif tc == "required" and not names and not _stopped_by_length(ch, view):
            yield hit(
                "tool_choice is required but the response has no tool call",
                f"/choices/{ch.index}/message",
                ch.content,
                fault=fault,
            )
        elif (
            forced is not None
            and not _stopped_by_length(ch, view)
            and (not names or any(n != forced for n in names))
        ):
            got = ", ".join(names) or "no call"
            yield hit(
                f"tool_choice names {forced!r} but the response has {got}",
                f"/choices/{ch.index}/message",
                fault=fault,
            )


@rule(
    "parallel-tool-calls-violated", fault=Fault.ENGINE, area="tools", endpoints=ALL_ENDPOINTS, needs=(CALLS,)
)
def _parallel(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """More than one tool call although parallel_tool_calls is false.

    ``parallel_tool_calls: false`` (Messages: ``tool_choice.disable_parallel_tool_use``) allows at
    most one call per message, and vLLM enforces it itself: it keeps the first call and drops the
    rest, streamed (deltas of index 0 only) and not (``maybe_filter_parallel_tool_calls``,
    entrypoints/serve/utils/tool_calls_utils.py). So the dropped calls vanish legally, and a second
    call on the wire means the server did not filter (an older vLLM, another server) or a gateway
    merged answers."""
    if not view.ok or view.req.get("parallel_tool_calls") is not False:
        return
    for ch in view.choices:
        if len(ch.calls) > 1:
            yield hit(
                f"{len(ch.calls)} tool calls with parallel_tool_calls false",
                f"/choices/{ch.index}/message/tool_calls",
            )
