"""The scripted "agent model": what a well-behaved model would answer, written as raw model markup.

Deterministic: the same request (and request number, for faults) gives the same output. The model
calls a declared tool when the user turn names it (or ``tool_choice`` demands one), writes arguments
valid for the tool's JSON Schema, answers after a tool result, retries after a tool error, thinks when
thinking is on, and writes JSON valid for a requested schema. Model faults change what it writes
(``model.no_tool_retry`` makes it give up after a tool error instead of retrying);
the family's markup (Kimi K2 tokens, Kimi K3 XTML channels, Hermes <tool_call> tags) is then parsed by the
simulator's own parsers (``_parsers``), so parser faults arise where vLLM's do.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

__all__ = [
    "Plan",
    "PlannedCall",
    "plan_reply",
    "value_for_schema",
    "write_arg_pairs",
    "write_channels",
    "write_full_width",
    "write_harmony",
    "write_invokes",
    "write_k2",
    "write_tool_call_tags",
    "write_xml_functions",
]


@dataclass(slots=True)
class PlannedCall:
    name: str
    args_text: str  # JSON text as the model writes it (may be broken on purpose)
    args: dict[str, Any] | None = None
    header: str | None = None  # Kimi K2 header override (bad id fault)


@dataclass(slots=True)
class Plan:
    reasoning: str | None = None
    content: str = ""
    calls: list[PlannedCall] = field(default_factory=list)
    call_in_think: bool = False
    forced_name: str | None = None
    #: the model faults that changed this plan (a fault that fires on an answer without calls changes
    #: nothing): the ground truth records these
    applied: set[str] = field(default_factory=set)


def _h(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "big")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _words(text: str) -> list[str]:
    caps = re.findall(r"\b[A-Z][a-zA-Z]{2,}\b", text)
    return (
        [
            w
            for w in caps
            if w not in {"What", "The", "Please", "Can", "How", "Use", "Call", "And", "Then", "Is"}
        ]
        or re.findall(r"[a-zA-Z]{3,}", text)[-1:]
        or ["value"]
    )


def value_for_schema(schema: Any, hint: str, key: str = "", depth: int = 0) -> Any:
    """A value valid for ``schema`` (a practical subset of JSON Schema 2020-12), built from ``hint``."""
    if not isinstance(schema, dict) or depth > 8:
        return hint if schema is not False else None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][_h(key, hint) % len(schema["enum"])]
    for comb in ("anyOf", "oneOf"):
        if isinstance(schema.get(comb), list) and schema[comb]:
            return value_for_schema(schema[comb][0], hint, key, depth + 1)
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for sub in schema["allOf"]:
            if isinstance(sub, dict):
                for k, v in sub.items():
                    if k in ("properties",) and k in merged:
                        merged[k] = {**merged[k], **v}
                    elif k == "required" and k in merged:
                        merged[k] = list(dict.fromkeys([*merged[k], *v]))
                    else:
                        merged[k] = v
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return value_for_schema({**merged, **rest}, hint, key, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else "string")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required or _h("opt", name, hint) % 2 == 0:
                out[name] = value_for_schema(sub, hint, name, depth + 1)
        for name in required:
            if name not in out:
                out[name] = hint
        max_p = schema.get("maxProperties")
        if isinstance(max_p, int) and len(out) > max_p:
            for name in [n for n in out if n not in required][: len(out) - max_p]:
                del out[name]
        min_p = schema.get("minProperties")
        extra = schema.get("additionalProperties", True)
        i = 0
        while isinstance(min_p, int) and len(out) < min_p and i < 50:
            cand = next((n for n in props if n not in out), f"extra_{i}")
            if cand in props:
                out[cand] = value_for_schema(props[cand], hint, cand, depth + 1)
            elif extra is not False:
                out[cand] = value_for_schema(extra if isinstance(extra, dict) else {}, hint, cand, depth + 1)
            i += 1
        return out
    if kind == "array":
        items = schema.get("items", {})
        n = max(int(schema.get("minItems", 1) or 0), 1 if schema.get("maxItems", 1) != 0 else 0)
        if isinstance(schema.get("maxItems"), int):
            n = min(n, schema["maxItems"])
        values = [value_for_schema(items, f"{hint}{i}" if i else hint, key, depth + 1) for i in range(n)]
        if schema.get("uniqueItems"):
            uniq: list[Any] = []
            for v in values:
                if v not in uniq:
                    uniq.append(v)
            values = uniq
        return values
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum", None))
        hi = schema.get("maximum", schema.get("exclusiveMaximum", None))
        num: float = 3
        if lo is not None:
            num = lo + (1 if "exclusiveMinimum" in schema and "minimum" not in schema else 0)
            num = max(num, lo)
        if hi is not None and num > hi - (
            1 if "exclusiveMaximum" in schema and "maximum" not in schema else 0
        ):
            num = hi - (1 if "exclusiveMaximum" in schema and "maximum" not in schema else 0)
        mult = schema.get("multipleOf")
        if isinstance(mult, int | float) and mult > 0:
            num = (int(num // mult) + (1 if num % mult else 0)) * mult
        if kind == "integer":
            return int(num)
        return float(num)
    if kind == "boolean":
        return _h(key, hint) % 2 == 0
    if kind == "null":
        return None
    fmt = schema.get("format")
    text = {
        "date": "2026-12-02",
        "date-time": "2026-12-02T10:00:00Z",
        "time": "10:00:00Z",
        "email": "ops@example.com",
        "uri": "https://example.com/x",
        "uuid": "3f2b8a8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
        "ipv4": "192.0.2.1",
    }.get(str(fmt), hint)
    lo_len, hi_len = int(schema.get("minLength", 0) or 0), schema.get("maxLength")
    if len(text) < lo_len:
        text = text + "x" * (lo_len - len(text))
    if isinstance(hi_len, int) and len(text) > hi_len:
        text = text[:hi_len]
    return text


def _args_for(tool: dict[str, Any], hint: str) -> dict[str, Any]:
    params = tool.get("parameters") or {"type": "object", "properties": {}}
    value = value_for_schema(params, hint)
    if not isinstance(value, dict):
        value = {}
    try:
        Draft202012Validator(params).validate(value)
    except Exception:
        value = {r: hint for r in params.get("required", [])} if isinstance(params, dict) else {}
    return value


def _break_schema(tool: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """Arguments of the wrong type for the schema: a number where the first property wants text."""
    props = (tool.get("parameters") or {}).get("properties") or {}
    for name, sub in props.items():
        kind = sub.get("type") if isinstance(sub, dict) else None
        bad: Any = 12345 if kind not in {"integer", "number"} else "not-a-number"
        return {**args, name: bad}
    return {**args, "unexpected": [1, 2]} if args else {"unexpected": [1, 2]}


def _tool_defs(req: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for t in req.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn
    return out


def _mentions(tool: str, text: str) -> bool:
    low = text.lower()
    if tool.lower() in low or tool.lower().replace("_", " ") in low:
        return True
    words = [
        w for w in re.split(r"[_\W]+", tool.lower()) if len(w) >= 4 and w not in {"tool", "func", "function"}
    ]
    return any(re.search(rf"\b{re.escape(w)}", low) for w in words)


def thinking_on(req: dict[str, Any], default: bool) -> bool:
    kwargs = req.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("thinking", "enable_thinking"):
            if key in kwargs:
                return bool(kwargs[key])
    return default


def plan_reply(req: dict[str, Any], *, thinking: bool, faults: set[str], seq: int) -> Plan:
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    tools = _tool_defs(req)
    last = msgs[-1] if msgs else {"role": "user", "content": ""}
    user_text = next((_text(m.get("content")) for m in reversed(msgs) if m.get("role") == "user"), "")
    hint = _words(user_text)[-1]  # the last proper noun: "weather in Tokyo" -> Tokyo
    tc = req.get("tool_choice", "auto" if tools else "none")
    forced = tc["function"]["name"] if isinstance(tc, dict) and isinstance(tc.get("function"), dict) else None
    plan = Plan(forced_name=forced)
    prior_calls = sum(len(m.get("tool_calls") or []) for m in msgs if m.get("role") == "assistant")

    want: list[str] = []
    if tools and tc != "none":
        if last.get("role") == "tool":
            result = _text(last.get("content"))
            failed = bool(re.search(r"\berror\b|\bfailed\b|\btimeout\b|\bexception\b", result, re.I))
            call = _call_for(msgs, last.get("tool_call_id"))
            retries = _consecutive_failures(msgs)
            # model.no_tool_retry: a model that gives up at the first failed tool result, in well-formed
            # text, breaks no contract; only the acceptance's tool-retry check sees it
            would_retry = failed and call is not None and retries <= 2 and call["function"]["name"] in tools
            gives_up = "model.no_tool_retry" in faults
            if gives_up and would_retry:
                plan.applied.add("model.no_tool_retry")  # the ground truth names it
            if call is not None and would_retry and not gives_up:
                text = call["function"].get("arguments") or "{}"
                try:
                    prev = json.loads(text)
                except ValueError:
                    prev = None
                plan.calls.append(
                    PlannedCall(call["function"]["name"], text, prev if isinstance(prev, dict) else None)
                )
                plan.reasoning = f"The {call['function']['name']} call failed; I will retry it once more."
            elif tc == "required" or forced in tools:
                # constrained decoding forces a call on this turn too (vLLM's structural tag for
                # required and named): the named tool, else the next one, not the one that answered
                # (pydantic-ai answers through its output tool under tool_choice required)
                answered = call["function"]["name"] if call else None
                others = [n for n in tools if n != answered]
                want = [forced] if forced in tools else others[:1] or [next(iter(tools))]
                plan.reasoning = f"I have the tool result; I call {want[0]} next."
            else:
                name = call["function"]["name"] if call else "the tool"
                if failed:
                    plan.content = f"Sorry: {name} kept failing ({result[:60]}). Please try again later."
                elif _structured(req):
                    # response_format / structured_outputs hold on every turn (openai-agents sends its
                    # output_type's schema with each request): the answer after a tool result is JSON
                    plan.content = _answer(req, user_text, faults)
                else:
                    plan.content = f"Based on the {name} result: {result[:80]}"
                plan.reasoning = "I have the tool result and can answer now."
        else:
            want = [n for n in tools if _mentions(n, user_text)]
            if forced and forced in tools:
                want = [forced]
            elif tc == "required" and not want:
                want = [next(iter(tools))]
            if req.get("parallel_tool_calls") is False:
                want = want[:1]
            want = want[:3]
    if "model.ignore_tool_choice" in faults and (tc == "required" or forced):
        if want:
            plan.applied.add("model.ignore_tool_choice")
        want = []
    for name in want:
        args = _args_for(tools[name], hint or "value")
        if "model.schema_violation" in faults:
            args = _break_schema(tools[name], args)
            plan.applied.add("model.schema_violation")
        plan.calls.append(PlannedCall(name, json.dumps(args), args))
    if plan.calls and "model.undeclared_tool" in faults:
        plan.calls[0].name = plan.calls[0].name + "_v2"
        plan.applied.add("model.undeclared_tool")
    if plan.calls and "model.invalid_json" in faults:
        plan.applied.add("model.invalid_json")
        c = plan.calls[0]
        text = json.dumps(c.args) if c.args else '{"value": "x"}'
        # an unquoted string value: broken in the middle, not cut at the end
        c.args_text = (
            re.sub(r'": "([^"]*)"', r'": \1', text, count=1) if '": "' in text else text[:-1] + ", value}"
        )
    for i, c in enumerate(plan.calls):
        c.header = f"functions.{c.name}:{prior_calls + i}"
        if "model.bad_id" in faults:
            c.header = f"{c.name}:{prior_calls + i}"
            plan.applied.add("model.bad_id")
    if plan.calls and "model.call_in_think" in faults:
        plan.call_in_think = True
        plan.applied.add("model.call_in_think")
    if not plan.calls and not plan.content:
        plan.content = _answer(req, user_text, faults)
        if plan.content.startswith("```json"):
            plan.applied.add("model.bad_json_output")
    if thinking and plan.reasoning is None:
        what = f"call {', '.join(c.name for c in plan.calls)}" if plan.calls else "answer directly"
        plan.reasoning = f"The user asks: {user_text[:48]!r}. I should {what}."
    if not thinking:
        plan.reasoning = None
    return plan


def _structured(req: dict[str, Any]) -> bool:
    rf, so = req.get("response_format"), req.get("structured_outputs")
    return (isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object")) or bool(so)


def _answer(req: dict[str, Any], user_text: str, faults: set[str]) -> str:
    rf_raw, so_raw = req.get("response_format"), req.get("structured_outputs")
    rf: dict[str, Any] = rf_raw if isinstance(rf_raw, dict) else {}
    so: dict[str, Any] = so_raw if isinstance(so_raw, dict) else {}
    schema: Any = None
    if rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema", {})
    elif rf.get("type") == "json_object" or so.get("json_object"):
        schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    elif so.get("json") is not None:
        schema = so["json"] if not isinstance(so["json"], str) else json.loads(so["json"])
    elif isinstance(so.get("choice"), list) and so["choice"]:
        return str(so["choice"][0])
    elif isinstance(so.get("regex"), str):
        for cand in ("yes", "no", "0", "1", "A", user_text):
            if re.fullmatch(so["regex"], cand):
                return cand
        return "yes"
    if schema is not None:
        hint = _words(user_text)[-1]  # the last proper noun: "weather in Tokyo" -> Tokyo or "answer"
        text = json.dumps(value_for_schema(schema, hint))
        if "model.bad_json_output" in faults:
            return f"```json\n{text}\n```"
        return text
    return f"Here is what I found about {' '.join(_words(user_text)[:2]) or 'that'}: it looks fine."


def _call_for(msgs: list[dict[str, Any]], call_id: Any) -> dict[str, Any] | None:
    for m in reversed(msgs):
        for tc in m.get("tool_calls") or []:
            if isinstance(tc, dict) and tc.get("id") == call_id and isinstance(tc.get("function"), dict):
                return tc
    return None


def _consecutive_failures(msgs: list[dict[str, Any]]) -> int:
    n = 0
    for m in reversed(msgs):
        if m.get("role") == "tool":
            if re.search(r"\berror\b|\bfailed\b|\btimeout\b|\bexception\b", _text(m.get("content")), re.I):
                n += 1
            else:
                break
        elif m.get("role") == "user":
            break
    return n


# --- raw markup per family (which family writes which: _families) ---------------------------------


def xtml_type(value: Any) -> str:
    """K3's ``type=`` attribute for a value: its JSON type, integers as ``number`` (vLLM's K3
    structural tag, vllm/tool_parsers/structural_tag_registry.py, mirrors K3's own encoder)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def _k3_args(args_text: str, args: dict[str, Any] | None) -> str:
    if args is None:  # broken JSON: one typed argument carrying the raw text
        return f'<|open|>argument key="raw" type="object"<|sep|>{args_text}<|close|>argument<|sep|>'
    parts = []
    for k, v in args.items():
        value = v if isinstance(v, str) else json.dumps(v)
        parts.append(
            f'<|open|>argument key="{k}" type="{xtml_type(v)}"<|sep|>{value}<|close|>argument<|sep|>'
        )
    return "".join(parts)


def write_k2(plan: Plan) -> str:
    """Kimi K2: a tool-call section of ``<|tool_call_begin|>HEADER<|tool_call_argument_begin|>`` calls."""
    calls = plan.calls
    tools = ""
    if calls:
        tools = (
            "<|tool_calls_section_begin|>"
            + "".join(
                f"<|tool_call_begin|>{c.header}<|tool_call_argument_begin|>{c.args_text}<|tool_call_end|>"
                for c in calls
            )
            + "<|tool_calls_section_end|>"
        )
    # the chat template's generation prompt already opened <think> (vllm-wire.md section 3)
    return _around_thinking(plan, tools, answer=plan.content, opening="", closing="</think>")


def write_channels(plan: Plan) -> str:
    """Kimi K3: think, response and tools channels (``<|open|>X<|sep|>...<|close|>X<|sep|>``)."""
    calls = plan.calls
    tools = ""
    if calls:
        body = ""
        for i, c in enumerate(calls, 1):
            args = c.args if c.args is not None and c.args_text == json.dumps(c.args) else None
            body += f'<|open|>call tool="{c.name}" index="{i}"<|sep|>{_k3_args(c.args_text, args)}<|close|>call<|sep|>'
        tools = f"<|open|>tools<|sep|>{body}<|close|>tools<|sep|>"
    # the response channel always comes before the tools channel, empty or not (K3's channel
    # grammar: vLLM's K3 structural tag requires it, and required/named tool_choice enforce it)
    empty_before_tools = bool(calls) and not plan.call_in_think
    response = (
        f"<|open|>response<|sep|>{plan.content}<|close|>response<|sep|>"
        if plan.content or empty_before_tools
        else ""
    )
    return _around_thinking(
        plan, tools, answer=response, opening="<|open|>think<|sep|>", closing="<|close|>think<|sep|>"
    )


def _xml_params(c: PlannedCall) -> dict[str, str]:
    if c.args is None or c.args_text != json.dumps(c.args):  # broken JSON: one raw parameter
        return {"arguments": c.args_text}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in c.args.items()}


def _around_thinking(plan: Plan, tools: str, *, answer: str, opening: str, closing: str) -> str:
    """The thinking block (``opening`` reasoning ``closing``), then the answer, then the calls; under
    model.call_in_think the calls are written before the thinking closes. No reasoning: no block."""
    if plan.reasoning is None:
        return answer + tools
    if plan.call_in_think:
        return f"{opening}{plan.reasoning}{tools}{closing}{answer}"
    return f"{opening}{plan.reasoning}{closing}{answer}{tools}"


def _think_tags(plan: Plan, tools: str) -> str:
    return _around_thinking(plan, tools, answer=plan.content, opening="<think>", closing="</think>")


def write_xml_functions(plan: Plan) -> str:
    """Qwen3-Coder: ``<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>...`` (strings raw,
    other values JSON); the model does not think."""
    tools = "".join(
        "<tool_call>\n<function="
        + c.name
        + ">\n"
        + "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in _xml_params(c).items())
        + "</function>\n</tool_call>"
        for c in plan.calls
    )
    return plan.content + tools


def write_arg_pairs(plan: Plan) -> str:
    """GLM: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``, GLM-4.7's
    compact form, which vLLM 0.32 serves under the glm45 name (its parser and the structural tag
    that constrains even auto calls, vllm/tool_parsers/structural_tag_registry.py)."""
    tools = "".join(
        f"<tool_call>{c.name}"
        + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in _xml_params(c).items())
        + "</tool_call>"
        for c in plan.calls
    )
    return _think_tags(plan, tools)


# DeepSeek V3.1's special tokens (full-width bars, U+2581 for spaces), as vLLM's deepseek_v31 parser
# names them (vllm/tool_parsers/deepseekv31_tool_parser.py)
_DS_CALLS, _DS_CALLS_END = (
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
)
_DS_CALL, _DS_CALL_END = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>"
_DS_SEP = "<\uff5ctool\u2581sep\uff5c>"


def write_full_width(plan: Plan) -> str:
    """DeepSeek V3.1: a calls section of ``call_begin NAME sep {json} call_end`` (full-width tokens)."""
    tools = ""
    if plan.calls:
        calls = "".join(f"{_DS_CALL}{c.name}{_DS_SEP}{c.args_text}{_DS_CALL_END}" for c in plan.calls)
        tools = f"{_DS_CALLS}{calls}{_DS_CALLS_END}"
    return _think_tags(plan, tools)


def write_invokes(plan: Plan) -> str:
    """MiniMax M2: ``<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke>``."""
    tools = ""
    if plan.calls:
        invokes = "".join(
            f'<invoke name="{c.name}">\n'
            + "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in _xml_params(c).items())
            + "</invoke>\n"
            for c in plan.calls
        )
        tools = f"<minimax:tool_call>\n{invokes}</minimax:tool_call>"
    return _think_tags(plan, tools)


def write_harmony(plan: Plan) -> str:
    """gpt-oss (harmony): analysis, then a commentary preamble or the final answer, then each call as
    a commentary message to ``functions.NAME`` ending in ``<|call|>``. The prompt ends with
    ``<|start|>assistant``, so the first message starts at its channel."""
    messages = []
    calls = "".join(
        f"<|channel|>commentary to=functions.{c.name} <|constrain|>json<|message|>{c.args_text}<|call|>"
        for c in plan.calls
    )
    if plan.reasoning is not None:
        think = plan.reasoning + (calls if plan.call_in_think else "")
        messages.append(f"<|channel|>analysis<|message|>{think}<|end|>")
    if plan.content:
        channel = "commentary" if plan.calls else "final"
        messages.append(
            f"<|channel|>{channel}<|message|>{plan.content}" + ("<|end|>" if plan.calls else "<|return|>")
        )
    if plan.calls and not plan.call_in_think:
        messages += [f"<|channel|>{m}" for m in calls.split("<|channel|>")[1:]]
    return "<|start|>assistant".join(messages)


def write_tool_call_tags(plan: Plan) -> str:
    """Hermes-style: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` after ``<think>``."""
    tools = "".join(
        f'<tool_call>{{"name": "{c.name}", "arguments": {c.args_text}}}</tool_call>' for c in plan.calls
    )
    return _think_tags(plan, tools)
