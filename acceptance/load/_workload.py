"""The capacity phase's requests, from small specs: every load driver (in process, or each Locust
worker) builds the very same bodies from the same spec, so the sample set reaches every worker the
same way and only a few numbers travel. A ``sample`` spec (``accept --samples``) carries the
team's own request body itself: the workers have no copy of the team's file."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from wirecheck.generators import CITIES, agent_sample_set

__all__ = ["capacity_body", "spec"]


def spec(
    kind: str,
    seq: int,
    *,
    turns: int = 2,
    salt: str = "",
    model: str | None = None,
    max_tokens: int = 256,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``kind``: ``fixed`` (the same agent sample every time, cacheable), ``varied`` (a new prefix from
    the first token on and a new question), ``long`` (the agent sample at ``turns`` turns) or
    ``sample`` (the team's request ``body``, sent as it is but for what the phase must set)."""
    sp = {"kind": kind, "seq": seq, "turns": turns, "salt": salt, "model": model, "max_tokens": max_tokens}
    if body is not None:
        sp["body"] = body
    return sp


def _team_body(sp: dict[str, Any]) -> dict[str, Any]:
    """The team's request with its messages, tools and lengths kept; the phase sets streaming with
    usage (TTFT and the engine's prompt tokens come from it), the output budget (the plan's, so the
    steps compare) and the model the target serves (a capture may name it otherwise)."""
    drop = ("stream", "stream_options", "max_tokens", "max_completion_tokens")
    body = {k: v for k, v in sp["body"].items() if k not in drop}
    body.update(
        stream=True, stream_options={"include_usage": True}, max_tokens=int(sp.get("max_tokens", 256))
    )
    if sp.get("model"):
        body["model"] = sp["model"]
    return body


@lru_cache(maxsize=64)
def _sample(turns: int, tools: int) -> dict[str, Any]:
    return agent_sample_set(turns=turns, tools=tools)


def capacity_body(sp: dict[str, Any]) -> dict[str, Any]:
    kind, seq, salt = sp["kind"], int(sp["seq"]), str(sp.get("salt") or "")
    if kind == "sample":
        return _team_body(sp)
    s = _sample(int(sp.get("turns", 2)), 8 if kind != "long" else 24)
    msgs = [dict(m) for m in s["messages"]]
    tools = s["tools"]
    if kind == "varied":
        # a new prefix from the first token on (tools come first in the chat template): the ramp
        # measures the KV cache without help from the prefix cache
        first = tools[0]
        tools = [
            {
                **first,
                "function": {
                    **first["function"],
                    "description": f"[{salt}req {seq}] " + first["function"]["description"],
                },
            },
            *tools[1:],
        ]
        city = CITIES[seq % len(CITIES)]
        msgs[-1] = {
            "role": "user",
            "content": f"{salt}Use op_03 for order {3000 + seq} in {city} with priority 2.",
        }
    body: dict[str, Any] = {
        "messages": msgs,
        "tools": tools,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": int(sp.get("max_tokens", 256)),
    }
    if sp.get("model"):
        body["model"] = sp["model"]
    return body
