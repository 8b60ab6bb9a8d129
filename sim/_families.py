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
from dataclasses import dataclass
from types import MappingProxyType

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

__all__ = ["DEFAULT_FAMILY", "SIM_FAMILIES", "SimFamily"]

#: what ``wirecheck sim`` serves when no --family is given
DEFAULT_FAMILY = "kimi_k2"


@dataclass(frozen=True, slots=True, kw_only=True)
class SimFamily:
    #: the raw text the model writes for a plan
    write: Callable[[Plan], str]
    #: vLLM's tool and reasoning parsers for it, as the simulator reimplements them
    parse: OutputParser
    #: how vLLM's streaming parser cuts calls into deltas (``StreamEmitter`` style), per vLLM dialect
    stream_styles: Mapping[str, str]
    #: a failing tool parser returns the whole raw output as content (K3's exception path) instead
    #: of just leaving the call's markup in content
    fails_to_raw_output: bool = False


SIM_FAMILIES: Mapping[str, SimFamily] = MappingProxyType(
    {
        "kimi_k2": SimFamily(
            write=write_k2,
            parse=think_tag_parser(parse_k2_calls),
            stream_styles={"vllm-0.33": "fragments", "vllm-0.15": "name_first"},
        ),
        "kimi_k3": SimFamily(
            write=write_channels,
            parse=parse_channels,
            stream_styles={"vllm-0.33": "whole", "vllm-0.15": "whole"},
            fails_to_raw_output=True,
        ),
        "hermes": SimFamily(
            write=write_tool_call_tags,
            parse=think_tag_parser(parse_tool_call_tags),
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
        # vLLM's qwen3_coder and glm45 parsers re-parse the text and send the name, then argument
        # pieces (issue 16); the simulator's "name_first" style is that shape
        "qwen3_coder": SimFamily(
            write=write_xml_functions,
            parse=think_tag_parser(parse_xml_functions),
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
        # vLLM's deepseek_v31 parser sends id, type and name first, then argument pieces; MiniMax M2's
        # re-parses like qwen3_coder's
        "deepseek_v31": SimFamily(
            write=write_full_width,
            parse=think_tag_parser(parse_full_width),
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
        "minimax_m2": SimFamily(
            write=write_invokes,
            parse=think_tag_parser(parse_invokes),
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
        # gpt-oss: vLLM parses harmony messages from token ids and streams in serving_chat
        "openai": SimFamily(
            write=write_harmony,
            parse=parse_harmony,
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
        "glm45": SimFamily(
            write=write_arg_pairs,
            parse=think_tag_parser(parse_arg_pairs),
            stream_styles={"vllm-0.33": "name_first", "vllm-0.15": "name_first"},
        ),
    }
)
