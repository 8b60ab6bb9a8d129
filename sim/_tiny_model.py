"""The tiny model the real tier serves with a real vLLM: each family's tokenizer and template facts.

The real tier (tests/real_vllm, ``./dev vllm``) runs vLLM's CPU build in its own Python 3.11 venv
without wirecheck installed (shared reference real-vllm-cpu.md), so its scripts in scripts/realvllm
cannot import this table. They read it as data instead: ``scripts/realvllm/families.json``, written
from :func:`wirecheck.sim._families.tiny_model_facts` by ``scripts/realvllm/write_families.py`` and
kept equal to it by tests/sim/test_tiny_model.py. A family has a tiny model when its row in
``SIM_FAMILIES`` names one here; adding one is a new :class:`TinyModel` and nothing in the scripts.

What must be real is what vLLM's parsers and template code look at (real-vllm-cpu.md): the exact
special tokens that the family's tool and reasoning parsers look up by string, and a chat template
of the real one's shape whose generation prompt opens the thinking (without that prefill the real
streaming reasoning parser files reasoning under content on turns after a tool call). The chat
template's frame (tools in a ``tool_declare`` system block, tool results as ``## Return of ID``) is
the Kimi one that build_model.py writes; a family gives the assistant turn and the generation prompt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["TINY_K2", "TINY_K3", "TinyModel"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TinyModel:
    #: the tokenizer's special tokens, EOS first: the strings vLLM 0.32's parsers look up
    special: tuple[str, ...]
    #: added but not special: the reasoning parser finds them as text and decoding keeps them
    added: tuple[str, ...] = ()
    #: Jinja: an assistant turn of the history, between the turn's header and ``<|im_end|>``
    assistant_turn: str
    #: Jinja: what the generation prompt writes after the assistant header (``thinking`` is the
    #: request's chat_template_kwargs switch)
    generation_prompt: str
    # What the scripted-output logits processor writes for its default agent (script_lp.py); each
    # is a str.format pattern. ``think_open``: how a prompt that opened the thinking ends.
    think_open: str
    think_close: str
    answer: str
    tools: str
    #: ``{index}``: the call's number over the whole conversation from 0 (the calls in the history
    #: come first), as a model that writes its own ids numbers them; ``{number}``: its place in
    #: this answer from 1
    call: str
    #: per-argument patterns by kind (``string`` for text values, ``json`` for the rest); None: the
    #: arguments are one JSON object in ``call``'s ``{arguments}``
    argument: Mapping[str, str] | None = None
    #: markers after which the output may be JSON (where steering tracks open strings)
    json_after: tuple[str, ...]

    def facts(self) -> dict[str, Any]:
        """As JSON for the 3.11 scripts."""
        return {
            "special_tokens": list(self.special),
            "added_tokens": list(self.added),
            "template": {"assistant_turn": self.assistant_turn, "generation_prompt": self.generation_prompt},
            "script": {
                "think_open": self.think_open,
                "think_close": self.think_close,
                "answer": self.answer,
                "tools": self.tools,
                "call": self.call,
                "argument": dict(self.argument) if self.argument is not None else None,
                "json_after": list(self.json_after),
            },
        }


# Kimi's chat-template tokens, in the order the tokenizer numbers them (EOS first).
_KIMI_CHAT = ("<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>")
_ARGS = "{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}"
_REASONING = "{{ m.reasoning or m.reasoning_content or '' }}"
_THINKING_OFF = "{%- if thinking is defined and not thinking -%}"

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
    added=("<think>", "</think>"),
    assistant_turn=(
        f"<think>{_REASONING}</think>{{{{ text(m.content) }}}}\n"
        "{%- if m.tool_calls -%}<|tool_calls_section_begin|>{%- for tc in m.tool_calls -%}"
        f"<|tool_call_begin|>{{{{ tc.id }}}}<|tool_call_argument_begin|>{_ARGS}<|tool_call_end|>"
        "{%- endfor -%}<|tool_calls_section_end|>{%- endif -%}"
    ),
    generation_prompt=f"<think>{_THINKING_OFF}</think>{{%- endif -%}}",
    think_open="<think>",
    think_close="{reason}</think>",
    answer="{text}",
    tools="<|tool_calls_section_begin|>{calls}<|tool_calls_section_end|>",
    call="<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>{arguments}<|tool_call_end|>",
    json_after=("</think>", "<|tool_call_argument_begin|>"),
)

#: Kimi K3's "XTML" channels (vLLM's K3 tool and reasoning parsers); the generation prompt opens the think
#: channel as K3's template does when thinking is on
TINY_K3 = TinyModel(
    special=(*_KIMI_CHAT, "<|open|>", "<|close|>", "<|sep|>"),
    assistant_turn=(
        f"<|open|>think<|sep|>{_REASONING}<|close|>think<|sep|>\n"
        "{%- if m.content -%}<|open|>response<|sep|>{{ text(m.content) }}<|close|>response<|sep|>{%- endif -%}\n"
        "{%- if m.tool_calls -%}<|open|>tools<|sep|>{%- for tc in m.tool_calls -%}"
        '<|open|>call tool="{{ tc.function.name }}" index="{{ loop.index }}"<|sep|>'
        f'<|open|>argument key="raw" type="object"<|sep|>{_ARGS}<|close|>argument<|sep|><|close|>call<|sep|>'
        "{%- endfor -%}<|close|>tools<|sep|>{%- endif -%}"
    ),
    generation_prompt=(
        f"{_THINKING_OFF}<|open|>think<|sep|><|close|>think<|sep|>{{%- else -%}}<|open|>think<|sep|>{{%- endif -%}}"
    ),
    think_open="<|open|>think<|sep|>",
    think_close="{reason}<|close|>think<|sep|>",
    answer="<|open|>response<|sep|>{text}<|close|>response<|sep|>",
    tools="<|open|>tools<|sep|>{calls}<|close|>tools<|sep|>",
    # the index attribute counts the answer's calls from 1 (vllm/tool_parsers/kimi_k3_tool_parser.py's
    # example); vLLM mints the ids
    call='<|open|>call tool="{name}" index="{number}"<|sep|>{arguments}<|close|>call<|sep|>',
    argument={
        "string": '<|open|>argument key="{key}" type="string"<|sep|>{value}<|close|>argument<|sep|>',
        "json": '<|open|>argument key="{key}" type="json"<|sep|>{value}<|close|>argument<|sep|>',
    },
    json_after=("<|sep|>",),
)
