"""Reading a large JSON document one value at a time: the entries of a HAR file.

``json.loads`` of a whole HAR holds the text and every entry's objects at once: 200 000 entries took
1.7 GB and a million 4.6 GB. Here the file is read in blocks and decoded as it goes; each value that
the caller wants (an entry) is parsed on its own with the C decoder (``raw_decode``) and handed on,
and every value it skips (``pages``, ``creator``) is parsed and dropped the same way. Memory is one
block plus the largest single value, whatever the number of entries, and a value over ``limit``
characters is refused with the path of the value it was in (``log.entries[7]``).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["JsonStreamError", "object_members", "stream_array_at"]

_BLOCK = 1 << 20
_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


class JsonStreamError(ValueError):
    """The document cannot be read as asked; the message names where."""


class _Text:
    """A text window over a binary file, decoded as UTF-8 as it is read."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="strict")
        self.buf = ""
        self.pos = 0
        self.eof = False

    def more(self, at_least: int = _BLOCK) -> bool:
        """Read on (at least ``at_least`` bytes, unless the file ends); False at the end."""
        if self.eof:
            return False
        data = self.fh.read(max(at_least, _BLOCK))
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(f"not UTF-8 text ({exc.reason})") from None
        if not data:
            self.eof = True
        self.buf = self.buf[self.pos :] + text
        self.pos = 0
        return bool(data)

    def skip_ws(self) -> None:
        while True:
            n, buf = self.pos, self.buf
            while n < len(buf) and buf[n] in _WS:
                n += 1
            self.pos = n
            if n < len(buf) or not self.more():
                return

    def peek(self) -> str:
        self.skip_ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else ""

    def take(self, char: str, where: str) -> None:
        got = self.peek()
        if got != char:
            seen = repr(got) if got else "the end of the file"
            raise JsonStreamError(f"{where}: expected {char!r}, found {seen}")
        self.pos += 1

    def value(self, limit: int, where: str) -> Any:
        """The next JSON value, at most ``limit`` characters of text."""
        self.skip_ws()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # an error well inside the window is the text's own; one at its end (or a string
                # still open there) may only be the window's edge
                inside = exc.pos < len(self.buf) - 16 and not exc.msg.startswith("Unterminated")
                if self.eof or inside or len(self.buf) - self.pos > limit:
                    if not inside and len(self.buf) - self.pos > limit:
                        raise JsonStreamError(
                            f"{where}: over the limit of {limit} bytes for one entry"
                        ) from None
                    raise JsonStreamError(f"{where}: not JSON ({exc.msg})") from None
                self.more(len(self.buf) - self.pos)  # the value goes on past the window: twice as much
                continue
            except RecursionError:
                raise JsonStreamError(f"{where}: JSON nested too deep to read") from None
            if end == len(self.buf) and not self.eof:
                # a number or literal may go on past the window's end: read on and parse again
                self.more(len(self.buf) - self.pos)
                continue
            if end - self.pos > limit:
                raise JsonStreamError(f"{where}: over the limit of {limit} bytes for one entry")
            self.pos = end
            return obj

    def at_end(self) -> bool:
        return self.peek() == ""


def object_members(text: _Text, where: str, limit: int) -> Iterator[str]:
    """The keys of the object that starts here, one by one: the caller reads (or skips, with
    ``text.value``) each member's value before asking for the next key."""
    text.take("{", where)
    if text.peek() == "}":
        text.pos += 1
        return
    while True:
        key = text.value(limit, where)
        if not isinstance(key, str):
            raise JsonStreamError(f"{where}: an object key must be a string")
        text.take(":", f"{where}.{key}")
        yield key
        if text.peek() == ",":
            text.pos += 1
            continue
        text.take("}", where)
        return


def stream_array_at(
    fh: IO[bytes], path: tuple[str, ...], *, limit: int, skip_limit: int | None = None
) -> Iterator[Any]:
    """Each value of the array at ``path`` (keys of nested objects from the top, e.g. ``("log",
    "entries")``), parsed one at a time; the rest of the document is read, checked as JSON and
    dropped. ``limit``: the largest one value (an entry, or a skipped member: ``skip_limit``)."""
    text = _Text(fh)
    found: list[bool] = []

    def walk(depth: int, where: str) -> Iterator[Any]:
        for key in object_members(text, where, limit):
            here = f"{where}.{key}" if where else key
            if key != path[depth]:
                text.value(skip_limit or limit, here)
                continue
            if found and depth == len(path) - 1:
                raise JsonStreamError(f"{here}: given twice")
            if depth < len(path) - 1:
                if text.peek() != "{":
                    raise JsonStreamError(f"{here}: expected an object")
                yield from walk(depth + 1, here)
                continue
            found.append(True)
            text.take("[", here)
            if text.peek() == "]":
                text.pos += 1
                continue
            i = 0
            while True:
                yield text.value(limit, f"{here}[{i}]")
                i += 1
                if text.peek() == ",":
                    text.pos += 1
                    continue
                text.take("]", here)
                break

    if text.peek() != "{":
        raise JsonStreamError("the document is not a JSON object")
    yield from walk(0, "")
    if not text.at_end():
        raise JsonStreamError("text after the end of the document")
    if not found:
        raise JsonStreamError(f"no {'.'.join(path)}")
