"""Model markup that must never reach a client's ``content`` (vllm-wire.md section 3).

Every family's tool-call markup, think markup and special tokens, read off the family table
(``_families``). A parser that works turns all of these into wire fields; what is left in text is the
parser's fault, in reasoning too (vLLM's parsers end the reasoning where a call opens). The
patterns are the union over all families on purpose: markup of *any* family in content is a defect,
whatever the model claims to be, so an unknown model is still checked for all of it.
"""

from __future__ import annotations

import re

from ._families import FAMILIES

__all__ = ["REASONING_MARKUP", "SPECIAL_TOKENS", "TOOL_MARKUP", "find_markup"]


def _union(parts: list[str]) -> str:
    return "|".join(dict.fromkeys(parts))  # table order, each pattern once


TOOL_MARKUP = re.compile(_union([p for f in FAMILIES.values() for p in f.tool_markup]))
REASONING_MARKUP = re.compile(_union([p for f in FAMILIES.values() for p in f.reasoning_markup]))
# Other special tokens (chat-template and channel tokens), e.g. the K3 leak "<|close|>message<|sep|>"
# (vllm #51399). Checked after the two above so each leak is named once.
SPECIAL_TOKENS = re.compile(_union([re.escape(t) for f in FAMILIES.values() for t in f.special_tokens]))


def find_markup(pattern: re.Pattern[str], text: str | None) -> tuple[int, str] | None:
    """First match of ``pattern`` in ``text``: its offset and a short excerpt around it."""
    if not text:
        return None
    m = pattern.search(text)
    if m is None:
        return None
    start = max(0, m.start() - 20)
    return m.start(), text[start : m.end() + 40]
