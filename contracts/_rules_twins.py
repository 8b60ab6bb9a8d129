"""Rules over a streamed and a non-streamed exchange of the same request at one tap (twins).

vLLM parses a whole answer and a stream with two paths of one parser; where they disagree on the
same output, the streaming parser is the usual suspect (vllm #9693, #10395, #54701). Two differences
are vLLM's own and legal (real-vllm-cpu.md, seen on vLLM 0.32): arguments coerced to the schema's
types when not streamed (``42`` becomes ``"42"`` for a string field; ``ParserEngine._fix_arg_types``)
and left as written when streamed, and a tool call cut by ``max_tokens`` that ends ``tool_calls``
when not streamed and ``length`` when streamed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ._assembly import AssembledChoice
from ._families import rows_saying
from ._pairs import TwinPair
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Hit, hit, rule
from ._translate import args_value, same_or_coerced, same_output

_STANDARD_REASONING = frozenset({"reasoning", "reasoning_content"})


def _deterministic(req: dict[str, Any]) -> bool:
    return req.get("temperature") == 0 or req.get("top_k") == 1


def _id_style(call_id: str | None) -> str:
    if not call_id:
        return "none"
    if call_id.startswith("chatcmpl-tool-"):
        return "minted"
    return "model header" if re.match(r"^.+:\d+$", call_id) else "other"


def _twin_structure(streamed: list[Any], plain: list[Any], ptr: str) -> Iterator[Hit]:
    """What must agree even when sampling makes the values differ: how each call's id is made (the
    parser or the template makes it, not the sample). Whether arguments are JSON is judged on each
    side alone (tool-call-args-invalid-json, the model's): a sampled model can break JSON in one
    sample only, and comparing the sides would put that on the parser too."""
    for i, (a, b) in enumerate(zip(streamed, plain, strict=False)):
        if _id_style(a.id) != _id_style(b.id):
            yield hit(
                f"call {i} id is {_id_style(a.id)} streamed but {_id_style(b.id)} not streamed",
                f"{ptr}/message/tool_calls/{i}/id",
                a.id,
            )


# the known streaming mis-parses are the family table's to list
_MISPARSES = rows_saying(
    lambda f: (
        f"{f.name} streaming mis-parses: vllm " + ", ".join(f"#{n}" for n in f.stream_misparse_issues)
        if f.stream_misparse_issues
        else None
    )
)


@rule(
    "stream-nonstream-mismatch",
    fault=Fault.PARSER,
    scope="twins",
    area="stream",
    endpoints=ALL_ENDPOINTS,
    summary="A streamed and a non-streamed response to the same request disagree in meaning.",
    doc=f"""The streaming parser and the whole-response parser must agree ({_MISPARSES}). Always
    compared: the reasoning field used, and per call how its id is made (structure, which sampling
    does not change; validity is judged per side). With greedy decoding (temperature 0) also: tool
    call names and arguments, content, reasoning text, finish_reason.""",
)
def _twins(pair: TwinPair, ctx: CheckConfig) -> Iterator[Hit]:
    s, p = pair.streamed, pair.plain
    pc = {ch.index: ch for ch in p.choices}
    strict = _deterministic(s.req)
    for cs in s.choices:
        cp = pc.get(cs.index)
        if cp is None:
            continue
        ptr = f"/choices/{cs.index}"
        fs, fp = cs.reasoning_fields & _STANDARD_REASONING, cp.reasoning_fields & _STANDARD_REASONING
        if cs.reasoning and cp.reasoning and fs != fp:
            yield hit(
                f"reasoning in {'/'.join(sorted(fs))} when streamed, {'/'.join(sorted(fp))} when not", ptr
            )
        if not strict or pair.model_fault:
            # sampled (temperature > 0): values may differ, structure and validity may not;
            # likewise when one side's model error explains the difference. Ids are the parser's on
            # chat only: Responses and Messages servers and bridges map them (Anthropic's pattern)
            if s.is_chat:
                yield from _twin_structure(cs.calls, cp.calls, ptr)
            if bool(cs.reasoning) != bool(cp.reasoning) and same_output(s, p, reasoning=False):
                # one output (the same answer word for word), parsed twice: reasoning is there or not
                # by the parser, not by the sample (vllm #36632: minimax_m2 dropped it when streaming)
                where = "not streamed" if cp.reasoning else "streamed"
                yield hit(f"reasoning only when {where}, for the same answer", ptr + "/message/reasoning")
            continue
        if [c.name for c in cs.calls] != [c.name for c in cp.calls]:
            yield hit(
                f"tool calls {[c.name for c in cs.calls]} streamed vs {[c.name for c in cp.calls]} not streamed",
                ptr + "/message/tool_calls",
            )
        else:
            for i, (a, b) in enumerate(zip(cs.calls, cp.calls, strict=True)):
                if not same_or_coerced(args_value(a.arguments), args_value(b.arguments)):
                    yield hit(
                        f"call {i} arguments differ between stream and non-stream",
                        f"{ptr}/message/tool_calls/{i}",
                        a.arguments,
                    )
        if (cs.content or "") != (cp.content or ""):
            yield hit("content differs between stream and non-stream", ptr + "/message/content", cs.content)
        if (cs.reasoning or "") != (cp.reasoning or ""):
            yield hit(
                "reasoning differs between stream and non-stream", ptr + "/message/reasoning", cs.reasoning
            )
        if cs.finish_reason != cp.finish_reason and not _cut_call(cs, cp, p.usage, s.req):
            yield hit(
                f"finish_reason {cs.finish_reason!r} streamed vs {cp.finish_reason!r}", ptr + "/finish_reason"
            )


def _cut_call(streamed: AssembledChoice, plain: AssembledChoice, usage: Any, req: dict[str, Any]) -> bool:
    """A tool call cut by the token limit: vLLM 0.32 ends it ``length`` streamed and ``tool_calls``
    not streamed (real-vllm-cpu.md)."""
    limit = req.get("max_completion_tokens", req.get("max_tokens"))
    used = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return (
        {streamed.finish_reason, plain.finish_reason} == {"length", "tool_calls"}
        and bool(streamed.calls)
        and bool(plain.calls)
        and (not isinstance(limit, int) or not isinstance(used, int) or used >= limit)
    )
