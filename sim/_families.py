"""The simulator's side of the family table: how each family's model writes, and how vLLM parses it.

contracts' family table says which families exist and what they are called (models, parser names,
flags). This module gives each one the simulator's *own* markup writer and parser (``_agent``,
``_parsers``), written apart from the checker's patterns on purpose (DESIGN.md: a simulator that used
the checker's parser could not catch its bugs), plus the streaming style and failure mode of vLLM's
parser for it (vllm-wire.md sections 2 and 3). tests/sim/test_families.py checks that every row of the
table is served here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from wirecheck.contracts import FAMILIES

from ._agent import (
    Plan,
    write_arg_pairs,
    write_channels,
    write_full_width,
    write_harmony,
    write_invokes,
    write_k2,
    write_tool_call_tags,
    write_xml_functions,
)
from ._parsers import (
    OutputParser,
    ToolCallParser,
    parse_arg_pairs,
    parse_channels,
    parse_full_width,
    parse_harmony,
    parse_invokes,
    parse_k2_calls,
    parse_tool_call_tags,
    parse_xml_functions,
    think_tag_parser,
)
from ._tiny_model import (
    TINY_DEEPSEEK_V31,
    TINY_GLM45,
    TINY_HERMES,
    TINY_K2,
    TINY_K3,
    TINY_MINIMAX_M2,
    TINY_QWEN3_CODER,
    TinyModel,
)

__all__ = ["DEFAULT_FAMILY", "SIM_FAMILIES", "SimFamily", "tiny_model_facts"]

#: what ``wirecheck sim`` serves when no --family is given
DEFAULT_FAMILY = "kimi_k2"


#: vLLM's streaming tool parsers that send the call's name (and id), then argument pieces; the
#: same in both dialects (vllm-wire.md section 3)
_NAME_FIRST: Mapping[str, str] = MappingProxyType({"vllm-0.33": "name_first", "vllm-0.15": "name_first"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SimFamily:
    #: the raw text the model writes for a plan
    write: Callable[[Plan], str]
    #: vLLM's tool and reasoning parsers for it, as the simulator reimplements them
    parse: OutputParser
    #: how vLLM's streaming parser cuts calls into deltas (``StreamEmitter`` style), per vLLM dialect
    stream_styles: Mapping[str, str] = field(default_factory=lambda: _NAME_FIRST)
    #: a failing tool parser returns the whole raw output as content (K3's exception path) instead
    #: of just leaving the call's markup in content
    fails_to_raw_output: bool = False
    #: the model writes each call's id in its markup (K2's call header), so a malformed id it writes
    #: reaches the wire; elsewhere vLLM mints the ids (vllm-wire.md section 3)
    writes_call_ids: bool = False
    #: the tiny model a real vLLM serves for this family in the real tier (``_tiny_model``); None:
    #: the real tier has none for it
    tiny_model: TinyModel | None = None


def _think_tags(
    write: Callable[[Plan], str], parse_calls: ToolCallParser, tiny_model: TinyModel
) -> SimFamily:
    """A family whose model thinks in ``<think>`` tags, split by one of vLLM's think-tag reasoning
    parsers, and whose calls stream name first."""
    return SimFamily(write=write, parse=think_tag_parser(parse_calls), tiny_model=tiny_model)


SIM_FAMILIES: Mapping[str, SimFamily] = MappingProxyType(
    {
        "kimi_k2": SimFamily(
            write=write_k2,
            parse=think_tag_parser(parse_k2_calls),
            stream_styles={"vllm-0.33": "fragments", "vllm-0.15": "name_first"},
            writes_call_ids=True,
            tiny_model=TINY_K2,
        ),
        "kimi_k3": SimFamily(
            write=write_channels,
            parse=parse_channels,
            stream_styles={"vllm-0.33": "whole", "vllm-0.15": "whole"},
            fails_to_raw_output=True,
            tiny_model=TINY_K3,
        ),
        "hermes": _think_tags(write_tool_call_tags, parse_tool_call_tags, TINY_HERMES),
        # vLLM's qwen3_coder and glm45 parsers re-parse the text and send the name, then argument
        # pieces; the simulator's "name_first" style is that shape
        "qwen3_coder": _think_tags(write_xml_functions, parse_xml_functions, TINY_QWEN3_CODER),
        # vLLM's deepseek_v31 parser sends id, type and name first, then argument pieces; MiniMax M2's
        # re-parses like qwen3_coder's
        "deepseek_v31": _think_tags(write_full_width, parse_full_width, TINY_DEEPSEEK_V31),
        "minimax_m2": _think_tags(write_invokes, parse_invokes, TINY_MINIMAX_M2),
        # gpt-oss: vLLM parses harmony messages from token ids and streams in serving_chat
        "openai": SimFamily(write=write_harmony, parse=parse_harmony),
        "glm45": _think_tags(write_arg_pairs, parse_arg_pairs, TINY_GLM45),
    }
)


def tiny_model_facts() -> dict[str, Any]:
    """scripts/realvllm/families.json: for each family with a tiny model, what the real tier's 3.11
    scripts need to build it, serve it and script its output (``_tiny_model``), with the family
    table's served model name and parser names; ``default`` is what they serve when not told."""
    families = {
        name: {
            "served_model": FAMILIES[name].example_model,
            "tool_call_parser": FAMILIES[name].tool_parser,
            "reasoning_parser": FAMILIES[name].reasoning_parser,
            **row.tiny_model.facts(),
        }
        for name, row in SIM_FAMILIES.items()
        if row.tiny_model is not None
    }
    return {"default": DEFAULT_FAMILY, "families": families}
