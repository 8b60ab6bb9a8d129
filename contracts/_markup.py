"""Model markup that must never reach a client's ``content`` (vllm-wire.md section 3).

Every family's tool-call markup, think markup and special tokens, read off the family table
(``_families``). A parser that works turns all of these into wire fields; what is left in text is the
parser's fault, in reasoning too (vLLM's parsers end the reasoning where a call opens). The
patterns are the union over all families on purpose: markup of *any* family in content is a defect,
whatever the model claims to be, so an unknown model is still checked for all of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial

from ._families import FAMILIES
from ._native import native

__all__ = ["REASONING_MARKUP", "SPECIAL_TOKENS", "TOOL_MARKUP", "find_markup"]


#: one literal character of a pattern: an escaped punctuation mark, or a character that is no
#: metacharacter
_LITERAL = re.compile(r"\\([^0-9A-Za-z])|([^\\.^$*+?{}\[\]|()])")


def _literal_prefix(part: str) -> str:
    """What every match of ``part`` starts with: its literal characters up to the first that is
    not one, or is optional or repeated, or up to the end; "" for a pattern with an alternation
    of its own."""
    if "|" in re.sub(r"\\.", "", part):
        return ""
    out: list[str] = []
    pos = 0
    while (m := _LITERAL.match(part, pos)) is not None and part[m.end() : m.end() + 1] not in (
        "?",
        "*",
        "+",
        "{",
    ):
        out.append(m.group(1) or m.group(2))
        pos = m.end()
    return "".join(out)


def _common(texts: list[str]) -> str:
    return texts[0][
        : next(
            (i for i, cs in enumerate(zip(*texts, strict=False)) if len(set(cs)) > 1), min(map(len, texts))
        )
    ]


def _union(parts: list[str]) -> tuple[str, tuple[str, ...] | None]:
    """One pattern matching what any of ``parts`` matches, as their alternation in table order
    (each pattern once) finds it, the patterns that begin with the same literal character under
    it: re tries every branch at every position, and with thirty-odd branches, one of them
    starting with a letter (``to=functions``), a search took 3.5 us where it takes 0.95 this way.
    Branches that begin with different characters never both match at one position, so the
    first match found, and its branch, are those of the plain alternation. With it, what each
    match starts with, one text per group (None when a branch may start with anything): a text
    that holds none of them is not searched (the rest of the 0.95 us, a search trying the letter's
    branch at each of that letter)."""
    groups: dict[str, list[str]] = {}
    starts: dict[str, list[str]] = {}
    for part in dict.fromkeys(parts):
        prefix = _literal_prefix(part)
        first = _LITERAL.match(part) if prefix else None
        if first is None:  # a class, a group, an anchor, an alternation: a branch of its own
            groups.setdefault(f"(?:{part})", []).append("")
            starts.setdefault(f"(?:{part})", []).append("")
        else:
            groups.setdefault(first.group(), []).append(part[first.end() :])
            starts.setdefault(first.group(), []).append(prefix)
    pattern = "|".join(
        head + (tails[0] if len(tails) == 1 else "(?:" + "|".join(tails) + ")")
        for head, tails in groups.items()
    )
    needles = tuple(_common(prefixes) for prefixes in starts.values())
    return pattern, (None if "" in needles else needles)


def _compiled(parts: list[str]) -> re.Pattern[str]:
    pattern, needles = _union(parts)
    compiled = re.compile(pattern)
    _NEEDLES[id(compiled)] = needles
    return compiled


#: by the id of each markup pattern (alive as long as the process: no other object has it), what
#: each of its matches starts with (see ``_union``); by id, as a pattern hashes its whole program
_NEEDLES: dict[int, tuple[str, ...] | None] = {}

TOOL_MARKUP = _compiled([p for f in FAMILIES.values() for p in f.tool_markup])
REASONING_MARKUP = _compiled([p for f in FAMILIES.values() for p in f.reasoning_markup])
# Other special tokens (chat-template and channel tokens), e.g. the K3 leak "<|close|>message<|sep|>"
# (vllm #51399). Checked after the two above so each leak is named once.
SPECIAL_TOKENS = _compiled([re.escape(t) for f in FAMILIES.values() for t in f.special_tokens])


def _find_markup(pattern: re.Pattern[str], text: str | None) -> tuple[int, str] | None:
    """First match of ``pattern`` in ``text``: its offset and a short excerpt around it."""
    if not text:
        return None
    needles = _NEEDLES.get(id(pattern))
    if needles is not None:
        for needle in needles:
            if needle in text:
                break
        else:
            return None
    m = pattern.search(text)
    if m is None:
        return None
    start = max(0, m.start() - 20)
    return m.start(), text[start : m.end() + 40]


#: the compiled twin of :func:`_find_markup` (``_markup_c.c``), or None
_C = native("wirecheck.contracts._markup_c")

#: First match of ``pattern`` in ``text``: its offset and a short excerpt around it. The markup
#: rules ask it five to seven times a view, nearly always of a text with none of the pattern's
#: needles: the compiled twin answers those without a Python frame (a third of the markup rules'
#: time), and hands anything but a str or None to :func:`_find_markup`.
find_markup: Callable[[re.Pattern[str], str | None], tuple[int, str] | None] = (
    _find_markup if _C is None else partial(_C.find_markup, _NEEDLES, _find_markup)
)
