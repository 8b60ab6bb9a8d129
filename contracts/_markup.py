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


#: a pattern's first character when it is one literal character (or an escaped punctuation mark)
_FIRST = re.compile(r"\\[^0-9A-Za-z]|[^\\.^$*+?{}\[\]|()]")


def _union(parts: list[str]) -> str:
    """One pattern matching what any of ``parts`` matches, as their alternation in table order
    (each pattern once) finds it, the patterns that begin with the same literal character under
    it: re tries every branch at every position, and with thirty-odd branches, one of them
    starting with a letter (``to=functions``), a search took 3 us where it takes 0.1 this way.
    Branches that begin with different characters never both match at one position, so the
    first match found, and its branch, are those of the plain alternation."""
    groups: dict[str, list[str]] = {}
    for part in dict.fromkeys(parts):
        first = _FIRST.match(part)
        if first is None:  # a class, a group, an anchor: a branch of its own
            groups.setdefault(part, []).append("")
        else:
            groups.setdefault(first.group(), []).append(part[first.end() :])
    return "|".join(
        head + (tails[0] if len(tails) == 1 else "(?:" + "|".join(tails) + ")")
        for head, tails in groups.items()
    )


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
