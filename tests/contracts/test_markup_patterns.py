"""The markup patterns (every family's, in one search each) find what the plain alternation of the
family table's patterns finds: the same first match, from the same branch, and ``find_markup``,
which leaves a text unsearched when it holds nothing a match starts with, finds it too."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import FAMILIES
from wirecheck.contracts._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP, _union, find_markup

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

TABLES = {
    TOOL_MARKUP: [p for f in FAMILIES.values() for p in f.tool_markup],
    REASONING_MARKUP: [p for f in FAMILIES.values() for p in f.reasoning_markup],
    SPECIAL_TOKENS: [re.escape(t) for f in FAMILIES.values() for t in f.special_tokens],
}
#: the text each pattern of the table stands for (its escapes and optional letters read plainly),
#: pieces of it, and text around them
FRAGMENTS = sorted(
    {
        piece
        for parts in TABLES.values()
        for p in parts
        for text in (re.sub(r"\\(.)", r"\1", p.replace("s?", "s").replace("/?", "/").replace(r"\b", "")),)
        for piece in (text, text[:3], text[1:], text[-4:], text[:-1])
    }
    | {"to", "=", "<", "|", "tok ", "the answer", "functions.", " ", "\n", "<|", "s"}
)


def _match(pattern: re.Pattern[str], text: str) -> tuple[int, int] | None:
    m = pattern.search(text)
    return None if m is None else (m.start(), m.end())


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=6))
def test_each_pattern_finds_the_first_match_of_the_plain_alternation(pieces: list[str]) -> None:
    text = "".join(pieces)
    for pattern, parts in TABLES.items():
        plain = re.compile("|".join(dict.fromkeys(parts)))
        assert _match(pattern, text) == _match(plain, text)
        m = plain.search(text)
        expected = None if m is None else (m.start(), text[max(0, m.start() - 20) : m.end() + 40])
        assert find_markup(pattern, text) == expected


def test_branches_are_grouped_by_their_first_literal_character_only() -> None:
    parts = ["<a>", "<b>", "to=x", r"\[e", "[ab]c", "<a>", "x|y", "s?t"]
    pattern, needles = _union(parts)
    assert pattern == r"<(?:a>|b>)|to=x|\[e|(?:[ab]c)|(?:x|y)|(?:s?t)"
    assert needles is None  # a branch that may start with anything: every text is searched
    assert _union(["<a>", "<b>", "to=x", r"\[e", "ab+c"]) == (
        r"<(?:a>|b>)|to=x|\[e|ab+c",
        ("<", "to=x", "[e", "a"),
    )
    for text in ("<b>", "xto=x", "[e", "bc", "<c>", "y", "t"):
        assert _match(re.compile(pattern), text) == _match(re.compile("|".join(dict.fromkeys(parts))), text)
