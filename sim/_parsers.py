"""The simulator's own tool and reasoning parsers: raw model markup to wire fields, as vLLM's do.

Written apart from the checker on purpose (DESIGN.md): a simulator that used the checker's markup
patterns could not catch the checker's bugs. Behaviour follows vllm-wire.md section 3:

- Kimi K2 (engine parser, 0.33): a call whose header does not match ``.+:\\d+`` is dropped; argument
  JSON is passed through unchanged; a call cut by max_tokens is closed with partial arguments.
- Kimi K3: channels ``<|open|>X<|sep|>...<|close|>X<|sep|>``; string arguments are raw text, others
  JSON; ids are minted (``chatcmpl-tool-<16 hex>``); on an exception content = the whole output.
- Hermes (legacy): ``<tool_call>{...}</tool_call>``; arguments are taken as written.

Streaming works like vLLM's parsers: parse the text so far, send what is new. How the new part is cut
into deltas is the family's (and the dialect's) streaming style; see ``StreamEmitter``. Which parser
serves which family is ``_families``' table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "OutputParser",
    "Parsed",
    "ParsedCall",
    "StreamEmitter",
    "parse_arg_pairs",
    "parse_channels",
    "parse_full_width",
    "parse_harmony",
    "parse_invokes",
    "parse_k2_calls",
    "parse_tool_call_tags",
    "parse_xml_functions",
    "think_tag_parser",
]

_K2_SECTION = re.compile(r"<\|tool_calls?_section_begin\|>")
_K2_SECTION_END = "<|tool_calls_section_end|>"
_K2_CALL = "<|tool_call_begin|>"
_K2_ARG = "<|tool_call_argument_begin|>"
_K2_CALL_END = "<|tool_call_end|>"
_K2_HEADER = re.compile(r"^(?:functions\.)?(?P<name>.+):(?P<idx>\d+)$")
_K3_CHANNEL = re.compile(r"<\|open\|>(think|response|tools)<\|sep\|>(.*?)(?:<\|close\|>\1<\|sep\|>|$)", re.S)
_K3_CALL = re.compile(
    r'<\|open\|>call tool="([^"]*)" index="(\d+)"<\|sep\|>(.*?)(<\|close\|>call<\|sep\|>|$)', re.S
)
_K3_ARG = re.compile(
    r'<\|open\|>argument key="([^"]*)" type="([^"]*)"<\|sep\|>(.*?)(<\|close\|>argument<\|sep\|>|$)', re.S
)
_HERMES_CALL = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
_XML_CALL = re.compile(r"<tool_call>\s*<function=([^>\n]*)>(.*?)(</function>\s*</tool_call>|$)", re.S)
_XML_PARAM = re.compile(r"<parameter=([^>\n]*)>\n?(.*?)\n?</parameter>", re.S)
# the name ends at a newline (GLM-4.5) or at the first tag (GLM-4.7's compact form): a name still
# being written is not a call yet
_PAIR_CALL = re.compile(r"<tool_call>([^\n<]*)(?:\n|(?=<))(.*?)(</tool_call>|$)", re.S)
_DS_CALLS = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
_DS_CALL = re.compile(
    "<\uff5ctool\u2581call\u2581begin\uff5c>(.*?)<\uff5ctool\u2581sep\uff5c>(.*?)(<\uff5ctool\u2581call\u2581end\uff5c>|$)",
    re.S,
)
_MM_START = "<minimax:tool_call>"
_MM_INVOKE = re.compile(r'<invoke name="([^"]*)">(.*?)(</invoke>|$)', re.S)
_MM_PARAM = re.compile(r'<parameter name="([^"]*)">\n?(.*?)\n?</parameter>', re.S)
_HARMONY = re.compile(
    r"(?:<\|start\|>assistant)?<\|channel\|>(\w+)(?: to=([^\s<]+))?\s*(?:<\|constrain\|>(\w+))?<\|message\|>"
    r"(.*?)(<\|end\|>|<\|call\|>|<\|return\|>|$)",
    re.S,
)
_PAIR_ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)


@dataclass(slots=True)
class ParsedCall:
    id: str
    name: str
    arguments: str
    closed: bool


@dataclass(slots=True)
class Parsed:
    reasoning: str | None = None
    content: str = ""
    calls: list[ParsedCall] = field(default_factory=list)


def mint_id(seed: str, i: int) -> str:
    return "chatcmpl-tool-" + hashlib.sha256(f"{seed}:{i}".encode()).hexdigest()[:16]


def _typed(value: str) -> str:
    # vLLM converts each value by the tool's schema; without it, a value that is JSON of another
    # type than string (a number, a list) is taken as that, anything else as a string
    try:
        parsed = json.loads(value)
    except ValueError:
        return json.dumps(value)
    return json.dumps(parsed)


def _call_section(rest: str, out: Parsed, start: str) -> str:
    """Set the content to the text before the first ``start`` and return the call section from it
    on; without ``start`` all of ``rest`` is content and the section is empty."""
    first = rest.find(start)
    if first < 0:
        out.content = rest
        return ""
    out.content = rest[:first]
    return rest[first:]


def _kv_calls(
    rest: str,
    out: Parsed,
    id_seed: str,
    *,
    call: re.Pattern[str],
    arg: re.Pattern[str],
    mint: Callable[[str, int], str],
    start: str = "<tool_call>",
) -> Parsed:
    for i, m in enumerate(call.finditer(_call_section(rest, out, start))):
        name, body, closed = m.group(1).strip(), m.group(2), bool(m.group(3))
        # only whole parameters, so that the arguments string only grows while it streams
        parts = [f"{json.dumps(k.strip())}: {_typed(v)}" for k, v in arg.findall(body)]
        out.calls.append(
            ParsedCall(mint(id_seed, i), name, "{" + ", ".join(parts) + ("}" if closed else ""), closed)
        )
    return out


def parse_xml_functions(rest: str, out: Parsed, id_seed: str) -> Parsed:
    """Qwen3-Coder's ``<function=NAME><parameter=K>V</parameter></function>`` calls."""
    return _kv_calls(rest, out, id_seed, call=_XML_CALL, arg=_XML_PARAM, mint=mint_id)


def parse_full_width(rest: str, out: Parsed, id_seed: str) -> Parsed:
    """DeepSeek V3.1's calls: name, the sep token, and the argument JSON passed through as written."""
    for i, m in enumerate(_DS_CALL.finditer(_call_section(rest, out, _DS_CALLS))):
        out.calls.append(ParsedCall(mint_id(id_seed, i), m.group(1), m.group(2), bool(m.group(3))))
    return out


def parse_invokes(rest: str, out: Parsed, id_seed: str) -> Parsed:
    """MiniMax M2's ``<invoke name=...>`` calls inside ``<minimax:tool_call>``."""
    section = _call_section(rest, out, _MM_START)
    if section:
        content = out.content
        _kv_calls(section, out, id_seed, call=_MM_INVOKE, arg=_MM_PARAM, mint=mint_id, start="<invoke")
        out.content = content  # the wrapper and what is inside it are the call section's
    return out


def parse_harmony(
    text: str, *, thinking: bool, tool_parser: bool, reasoning_parser: bool, id_seed: str
) -> Parsed:
    """gpt-oss's harmony messages: analysis is reasoning, final (else the commentary preamble) is
    content, a commentary message to ``functions.NAME`` is a call whose JSON is re-dumped once it
    closes; without the parser that reads it, a message stays in content as written."""
    out = Parsed()
    final: list[str] = []
    preamble: list[str] = []
    raw: list[str] = []
    for m in _HARMONY.finditer(text):
        channel, to, body, end = m.group(1), m.group(2), m.group(4), m.group(5)
        if channel == "analysis":
            if reasoning_parser and thinking:
                out.reasoning = (out.reasoning or "") + body
            else:
                raw.append(m.group(0))
        elif to and to.startswith("functions."):
            if not tool_parser:
                raw.append(m.group(0))
                continue
            closed = end == "<|call|>"
            args = body
            if closed:
                with contextlib.suppress(ValueError):  # vLLM passes invalid JSON through as written
                    args = json.dumps(json.loads(body))
            out.calls.append(ParsedCall(mint_id(id_seed, len(out.calls)), to.split(".", 1)[1], args, closed))
        elif channel == "final":
            final.append(body)
        else:
            preamble.append(body)
    out.content = "".join(final or preamble) + "".join(raw)
    return out


def parse_arg_pairs(rest: str, out: Parsed, id_seed: str) -> Parsed:
    """GLM-4.5's ``<tool_call>NAME`` calls with ``<arg_key>``/``<arg_value>`` pairs."""
    return _kv_calls(rest, out, id_seed, call=_PAIR_CALL, arg=_PAIR_ARG, mint=mint_id)


class OutputParser(Protocol):
    """Parse the model's raw text so far (or whole) into reasoning, content and calls."""

    def __call__(
        self, text: str, *, thinking: bool, tool_parser: bool, reasoning_parser: bool, id_seed: str
    ) -> Parsed: ...


#: a tool parser after the reasoning split: (text after </think>, the parse so far, id seed)
ToolCallParser = Callable[[str, Parsed, str], Parsed]


def think_tag_parser(calls: ToolCallParser) -> OutputParser:
    """Reasoning before ``</think>`` (an opening ``<think>`` may be absent), then ``calls`` on the rest."""

    def parse(
        text: str, *, thinking: bool, tool_parser: bool, reasoning_parser: bool, id_seed: str
    ) -> Parsed:
        out = Parsed()
        rest = text
        end_tag = "</think>"
        if reasoning_parser and thinking:
            start = "<think>"
            if end_tag in text:
                reasoning, rest = text.split(end_tag, 1)
            else:
                reasoning, rest = text, ""
            out.reasoning = reasoning[len(start) :] if reasoning.startswith(start) else reasoning
        if not tool_parser:
            out.content = rest
            return out
        return calls(rest, out, id_seed)

    return parse


def parse_k2_calls(rest: str, out: Parsed, id_seed: str) -> Parsed:
    """Kimi K2's tool-call section; the header is the id, so ``id_seed`` is unused."""
    m = _K2_SECTION.search(rest)
    if m is None:
        out.content = rest
        return out
    out.content = rest[: m.start()]
    section = rest[m.end() :].split(_K2_SECTION_END, 1)[0]
    for piece in section.split(_K2_CALL)[1:]:
        header, sep, args = piece.partition(_K2_ARG)
        if not sep:
            continue  # the header is still being written
        hm = _K2_HEADER.match(header.strip())
        if hm is None:
            continue  # the engine parser drops a call whose header is not NAME:IDX
        closed = _K2_CALL_END in args
        args = args.split(_K2_CALL_END, 1)[0]
        out.calls.append(ParsedCall(header.strip(), hm["name"], args, closed))
    return out


def parse_tool_call_tags(rest: str, out: Parsed, id_seed: str) -> Parsed:
    for i, m in enumerate(_HERMES_CALL.finditer(_call_section(rest, out, "<tool_call>"))):
        body, closed = m.group(1), bool(m.group(2))
        nm = re.search(r'"name"\s*:\s*"([^"]*)"', body)
        if nm is None:
            continue
        am = re.search(r'"arguments"\s*:\s*', body)
        args = ""
        if am is not None:
            args = body[am.end() :].rstrip()
            if closed and args.endswith("}"):
                args = args[:-1].rstrip()  # the closing brace of the {"name", "arguments"} object
        out.calls.append(ParsedCall(mint_id(id_seed, i), nm.group(1), args, closed))
    return out


def _complete_k3(text: str) -> str:
    """Drop a trailing channel marker that is not closed by <|sep|> yet (it arrives token by token)."""
    cut = max(text.rfind("<|open|>"), text.rfind("<|close|>"))
    if cut >= 0 and "<|sep|>" not in text[cut:]:
        return text[:cut]
    return text


def parse_channels(
    text: str, *, thinking: bool, tool_parser: bool, reasoning_parser: bool, id_seed: str
) -> Parsed:
    """Kimi K3's channels: reasoning, answer and tools in one pass (no think tags)."""
    out = Parsed()
    text = _complete_k3(text)
    content = []
    pos = 0
    for m in _K3_CHANNEL.finditer(text):
        content.append(text[pos : m.start()])
        pos = m.end()
        kind, body = m.group(1), m.group(2)
        if kind == "think" and reasoning_parser:
            out.reasoning = (out.reasoning or "") + body
        elif kind == "response":
            content.append(body)
        elif kind == "tools" and tool_parser:
            for i, cm in enumerate(_K3_CALL.finditer(body)):
                name, args_raw, closed = cm.group(1), cm.group(3), bool(cm.group(4))
                parts: list[str] = []
                raw_args: str | None = None  # broken JSON written as one raw argument
                for am in _K3_ARG.finditer(args_raw):
                    key, kind_, value = am.group(1), am.group(2), am.group(3)
                    if key == "raw" and kind_ == "object":
                        raw_args = value
                        continue
                    parts.append(f"{json.dumps(key)}: {json.dumps(value) if kind_ == 'string' else value}")
                args = raw_args if raw_args is not None else "{" + ", ".join(parts) + "}"
                out.calls.append(ParsedCall(mint_id(id_seed, i), name, args, closed))
        else:
            content.append(m.group(0))
    content.append(text[pos:])
    out.content = "".join(content)
    if not thinking and out.reasoning is not None:
        out.content = out.reasoning + out.content
        out.reasoning = None
    return out


class StreamEmitter:
    """Turns successive parses of the growing text into deltas, in a family's streaming style.

    - ``fragments`` (the Kimi K2 engine parser, 0.33): the first delta of a call carries id, type, name
      and the first argument fragment; later deltas only ``index`` and fragments; the closing ``}``
      is held back until the call ends.
    - ``name_first`` (Hermes, Kimi K2 in 0.15): the name first with no ``arguments`` key and
      ``"content": null``, then fragments.
    - ``whole`` (Kimi K3): each call in one delta once it closes.
    """

    def __init__(self, style: str, *, both_reasoning_names: bool = False) -> None:
        self.style = style
        self.both = both_reasoning_names
        self.reasoning_sent = 0
        self.content_sent = 0
        self.calls_started = 0
        self.args_sent: list[int] = []

    def step(self, p: Parsed, *, final: bool) -> dict[str, Any] | None:
        delta: dict[str, Any] = {}
        r = p.reasoning or ""
        if len(r) > self.reasoning_sent:
            piece = r[self.reasoning_sent :]
            self.reasoning_sent = len(r)
            delta["reasoning"] = piece
            if self.both:
                delta["reasoning_content"] = piece
        if len(p.content) > self.content_sent:
            delta["content"] = p.content[self.content_sent :]
            self.content_sent = len(p.content)
        tcs: list[dict[str, Any]] = []
        for i, c in enumerate(p.calls):
            closed = c.closed or final
            if self.style == "whole":
                if i >= self.calls_started and closed:
                    tcs.append(
                        {
                            "id": c.id,
                            "type": "function",
                            "index": i,
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                    )
                    self.calls_started = i + 1
                    self.args_sent.append(len(c.arguments))
                continue
            avail = c.arguments
            if not closed and avail.rstrip().endswith("}"):
                # held back until the call ends (Hermes: it may be the wrapper object's brace)
                avail = avail.rstrip()[:-1] if self.style == "fragments" else avail.rstrip().rstrip("}")
            if i >= self.calls_started:
                if self.style == "fragments" and not avail:
                    continue  # K2 sends the header with the first fragment
                head: dict[str, Any] = {
                    "id": c.id,
                    "type": "function",
                    "index": i,
                    "function": {"name": c.name},
                }
                if self.style == "fragments":
                    head["function"]["arguments"] = avail
                    self.args_sent.append(len(avail))
                else:
                    self.args_sent.append(0)
                    delta.setdefault("content", None)
                tcs.append(head)
                self.calls_started = i + 1
                if self.style == "fragments":
                    continue
            sent = self.args_sent[i]
            if len(avail) > sent:
                tcs.append({"index": i, "function": {"arguments": avail[sent:]}})
                self.args_sent[i] = len(avail)
        if tcs:
            delta["tool_calls"] = tcs
        return delta or None
