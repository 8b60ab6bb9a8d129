"""Model markup that must never reach a client's ``content`` (vllm-wire.md section 3).

Kimi K2 special tokens, Kimi K3 "XTML" channels, hermes tags, and think tags. A parser that works turns
all of these into wire fields; what is left in text is the parser's fault (or, inside reasoning, the
model's: it wrote a call before its thinking closed).
"""

from __future__ import annotations

import re

__all__ = ["REASONING_MARKUP", "SPECIAL_TOKENS", "TOOL_MARKUP", "find_markup"]

TOOL_MARKUP = re.compile(
    r"<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<\|tool_call_argument_begin\|>"
    r"|<\|tool_call_end\|>|<\|tool_calls?_section_end\|>"
    r"|<\|open\|>tools|<\|open\|>call\b|<\|close\|>call|<\|open\|>argument\b|<\|close\|>tools"
    r"|<tool_call>|</tool_call>"
)
REASONING_MARKUP = re.compile(r"</?think>|<\|open\|>think|<\|close\|>think")
# Other special tokens of the Kimi families (chat-template and channel tokens), e.g. the K3 leak
# "<|close|>message<|sep|>" (vllm #51399). Checked after the two above so each leak is named once.
SPECIAL_TOKENS = re.compile(
    r"<\|(?:open|close|sep|im_end|im_start|im_middle|im_user|im_assistant|im_system|end_of_text)\|>"
)


def find_markup(pattern: re.Pattern[str], text: str | None) -> tuple[int, str] | None:
    """First match of ``pattern`` in ``text``: its offset and a short excerpt around it."""
    if not text:
        return None
    m = pattern.search(text)
    if m is None:
        return None
    start = max(0, m.start() - 20)
    return m.start(), text[start : m.end() + 40]
