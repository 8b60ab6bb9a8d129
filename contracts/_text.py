"""Wire text made safe to show.

Findings quote what the model and the caller wrote. Printed raw, that text drives the terminal that
shows a report (``ESC [2J`` clears the screen, ``OSC 0`` sets the title, ``OSC 8`` plants a hyperlink,
a bare CR overwrites the line with something else, bidi overrides reorder it) and breaks XML (1.0
forbids most C0 controls, even as character references, and lone surrogates cannot be encoded at
all). Every text writer passes wire text through :func:`printable`, which writes such characters as
visible escapes (``\\x1b``, ``\\u202e``, ``\\ud800``) and leaves everything else, other scripts
included, as it is.
"""

from __future__ import annotations

import re

__all__ = ["escape_surrogates", "printable"]

# C0 and C1 controls, DEL, lone surrogates, the bidi embedding/override/isolate marks, the Unicode
# line and paragraph separators, and the two non-characters XML 1.0 excludes (U+FFFE, U+FFFF)
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, keep: str = "") -> str:
    """``text`` (any object: its ``str``) with control characters and the like written as escapes;
    the characters in ``keep`` (only ``"\\n"`` and ``"\\t"`` make sense) stay as they are."""
    s = text if isinstance(text, str) else str(text)
    if not keep:
        return _UNSAFE.sub(_escape, s)
    return _UNSAFE.sub(lambda m: m.group() if m.group() in keep else _escape(m), s)


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(json_text: str) -> str:
    """JSON text (from ``json.dumps(..., ensure_ascii=False)``) made UTF-8-encodable: a lone surrogate
    (wire JSON's ``"\\ud800"`` parses to one) can only sit inside a string literal, where its
    ``\\uXXXX`` escape reads back the same; left raw, writing the file fails."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)
