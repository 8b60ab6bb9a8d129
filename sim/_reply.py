"""One chat completion in progress: what the model writes, how vLLM's parsers read it, and which
injected faults reached the wire (the ground truth).

Every endpoint answers through a ``_Reply``: /v1/chat/completions shows it as chat (``_chat``),
/v1/responses and /v1/messages rebuild their own shapes from that chat answer, as vLLM does.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request

from ._agent import Plan, plan_reply, thinking_on
from ._config import SimConfig
from ._families import SIM_FAMILIES
from ._metrics import SimMetrics
from ._parsers import Parsed
from ._tokens import tokenize
from ._truth import CORRELATION_HEADER, GroundTruth, Injected

__all__ = ["record_truth"]


class _Reply:
    """One chat completion in progress: the plan, the parse, and how it is shown on the wire."""

    def __init__(
        self, cfg: SimConfig, req: dict[str, Any], faults: set[str], seq: int, request_id: str
    ) -> None:
        self.cfg, self.req, self.faults, self.seq = cfg, req, faults, seq
        self.family = SIM_FAMILIES[cfg.family]
        self.id = request_id
        self.created = int(time.time())
        self.thinking = thinking_on(req, cfg.thinking_default)
        self.plan: Plan = plan_reply(req, thinking=self.thinking, faults=faults, seq=seq)
        self.raw = self.family.write(self.plan)
        self.out_tokens = tokenize(self.raw) or [""]
        tc = req.get("tool_choice")
        self.mode = "named" if isinstance(tc, dict) else str(tc or ("auto" if req.get("tools") else "none"))
        self.trunc = None
        if "parser.truncated_args" in faults and self.plan.calls:
            self.trunc = max(1, len(self.plan.calls[-1].args_text) // 2)

    def parse(self, text: str) -> Parsed:
        cfg, f = self.cfg, self.faults
        tool_parser = cfg.tool_parser and bool(self.req.get("tools"))
        if "parser.markup_in_content" in f and self.plan.calls:
            if self.family.fails_to_raw_output:
                return Parsed(None, text, [])  # the K3 parser's exception path: content = model output
            tool_parser = False
        reasoning_parser = cfg.reasoning_parser_on and "parser.reasoning_in_content" not in f
        p = self.family.parse(
            text,
            thinking=self.thinking,
            tool_parser=tool_parser,
            reasoning_parser=reasoning_parser,
            id_seed=self.id,
        )
        if "parser.call_dropped" in f:
            p.calls = []
        if self.trunc is not None and p.calls:
            p.calls[-1].arguments = p.calls[-1].arguments[: self.trunc]
        return p

    def finish_reason(self, engine_reason: str, p: Parsed) -> str:
        if engine_reason == "length":
            return "length"
        had_calls = bool(p.calls) or ("parser.call_dropped" in self.faults and bool(self.plan.calls))
        if had_calls and self.mode != "named":
            return "tool_calls"
        return "stop"

    def count_parse(self, metrics: SimMetrics, p: Parsed, streaming: bool) -> None:
        """vllm:tool_call_parser_invocations_total for the final parse of this reply. vLLM 0.32's
        labels: mode streaming or non_streaming, request_type chat_completions, responses or
        other; the simulator's Responses and Messages answers come from its chat machinery and
        count as chat_completions, and a stream counts once (vLLM: once per delta)."""
        metrics.parser.labels(
            mode="streaming" if streaming else "non_streaming",
            outcome="tool_call" if p.calls else "no_tool_call",
            request_type="chat_completions",
            model_name=metrics.labels["model_name"],
        ).inc()

    def usage(self, prompt: int, completion: int, cached: int, p: Parsed | None) -> dict[str, Any]:
        u: dict[str, Any] = {
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "completion_tokens": completion,
        }
        u["prompt_tokens_details"] = {
            "cached_tokens": cached,
            "created_cache_tokens": None,
            "multimodal_tokens": None,
        }
        if self.cfg.reasoning_parser_on:
            u["completion_tokens_details"] = {
                "reasoning_tokens": len(tokenize(p.reasoning)) if p and p.reasoning else 0
            }
        return u

    def stream_style(self) -> str:
        return self.family.stream_styles[self.cfg.dialect]

    def injected(self, cut: str | None = None) -> list[Injected]:
        """The faults this reply really put on the wire (the ground truth); ``cut`` names the
        engine fault that ended a stream half way."""
        f, calls = self.faults, bool(self.plan.calls)
        applied = set(self.plan.applied)
        if not self.family.writes_call_ids:
            applied.discard("model.bad_id")  # vLLM mints the ids: the model's bad header never shows
        if calls:
            applied |= {"parser.markup_in_content", "parser.call_dropped"} & f
        if self.trunc is not None:
            applied.add("parser.truncated_args")
        if "parser.reasoning_in_content" in f and self.cfg.reasoning_parser_on and self.plan.reasoning:
            applied.add("parser.reasoning_in_content")
        if "engine.slow_first_token" in f:
            applied.add("engine.slow_first_token")
        if cut:
            applied.add(cut)
        out: list[Injected] = []
        for name in sorted(applied):
            why = ""
            if name == "engine.slow_first_token":
                why = (
                    "a late first token is latency, not a contract break: no rule judges one exchange's TTFT"
                )
            elif name == "model.no_tool_retry":
                why = (
                    "giving up after a failed tool result is well-formed text: no wire contract breaks; "
                    "accept's interface.tool-retry check judges it over the conversation"
                )
            elif cut and name != cut and name.split(".")[0] in ("model", "parser"):
                why = f"{cut} ended the stream half way, before the answer was complete"
            elif (
                name.startswith("model.")
                and name != "model.call_in_think"
                and applied & {"parser.markup_in_content", "parser.call_dropped"}
            ):
                why = "the parser lost the call (left in content or dropped): no tool call carries it"
            out.append(Injected(name, name.split(".")[0], observable=not why, why=why))
        return out


def record_truth(request: Request, faults: list[Injected], *, seq: int, completion_id: str | None) -> None:
    truth: GroundTruth | None = request.app.state.truth
    if truth is not None:
        truth.record(
            "engine",
            seq=seq,
            correlation=request.headers.get(CORRELATION_HEADER),
            completion_id=completion_id,
            faults=faults,
        )
