"""Incremental Server-Sent Events decoder (WHATWG HTML, "Parsing an event stream").

It gives the same events for any split of the input bytes, which is what a checker behind a proxy
needs: TCP and gateways cut streams anywhere, mid-line, mid-CRLF and mid-UTF-8 sequence.

Followed to the letter: LF, CRLF and CR all end a line; one leading BOM is dropped; a line starting
with ``:`` is a comment; ``field:value`` drops one space after the colon; a line with no colon is a
field with an empty value; several ``data:`` lines join with LF; an event is dispatched on an empty
line and only when its data buffer is not empty; an ``id`` holding NUL is ignored.

Deliberately not like a browser: nothing is hidden. Comments, unknown fields (the "missing ``data:``
prefix" gateway fault shows up as one), invalid UTF-8 and a last event with no closing blank line are
all reported as :class:`SSEAnomaly` so that rules can judge the framing.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import add as _add
from typing import Any

from ._json import PLAIN_MAX, plain_number_bytes, plain_numbers
from ._native import native

__all__ = [
    "SSEAnomaly",
    "SSEDecoder",
    "SSEEvent",
    "decode_joined",
    "decode_parts",
    "decode_sse",
]


@dataclass(slots=True)
class SSEEvent:
    """One dispatched event. ``t_ms`` is the arrival offset of the chunk that completed it."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    index: int = 0
    t_ms: float | None = None
    lines: int = 1


@dataclass(slots=True)
class SSEAnomaly:
    """Something legal-but-notable or broken in the framing, with where it was seen."""

    kind: str  # "comment" | "unknown-field" | "invalid-utf8" | "unterminated-event" | "bom"
    detail: str = ""
    event_index: int = 0
    t_ms: float | None = None


_UTF8 = codecs.getincrementaldecoder("utf-8")

#: the compiled twin of :func:`decode_joined`'s cut of the plain framing (``_sse_c.c``), or None
_C = native("wirecheck.contracts._sse_c")


@dataclass(slots=True)
class SSEDecoder:
    """Feed bytes as they arrive; each call returns the events completed by those bytes."""

    events_seen: int = 0
    anomalies: list[SSEAnomaly] = field(default_factory=list)
    comments: int = 0
    #: made when first fed: a stream cut at once (``decode_joined``) never feeds its decoder, and
    #: making one cost as much as cutting five of its events
    _utf8: codecs.IncrementalDecoder | None = None
    _buf: str = ""
    _skip_lf: bool = False
    _started: bool = False
    _data: list[str] = field(default_factory=list)
    _event: str | None = None
    _id: str | None = None
    _last_id: str | None = None
    _retry: int | None = None
    _lines: int = 0
    _t: float | None = None
    #: set by :func:`decode_joined` when it cut the stream at once: whether no event's data holds
    #: a run of 19 digits (``_json.plain_numbers``), asked of the stream's bytes
    plain_numbers: bool | None = None

    def feed(self, data: bytes, t_ms: float | None = None) -> list[SSEEvent]:
        self._t = t_ms
        return self._feed_text(self._decode(data, final=False))

    def close(self) -> list[SSEEvent]:
        """End of stream: flush the decoder; an event with no closing blank line is not dispatched."""
        out = self._feed_text(self._decode(b"", final=True))
        if self._buf:
            # A last line without any line end: WHATWG drops it, we report it.
            self._lines += 1
            self._process_line(self._buf, out)
            self._buf = ""
        if self._data or self._lines:
            self.anomalies.append(
                SSEAnomaly(
                    "unterminated-event",
                    "".join(self._data)[:200],
                    self.events_seen,
                    self._t,
                )
            )
            self._data = []
            self._lines = 0
        return out

    def _decode(self, data: bytes, *, final: bool) -> str:
        utf8 = self._utf8
        if utf8 is None:
            utf8 = self._utf8 = _UTF8("strict")
        try:
            return utf8.decode(data, final)
        except UnicodeDecodeError as exc:
            self.anomalies.append(SSEAnomaly("invalid-utf8", str(exc), self.events_seen, self._t))
            # Keep going like a browser would (U+FFFD), but start a fresh decoder state.
            pending, _ = utf8.getstate()
            self._utf8 = _UTF8("strict")
            return (pending + data).decode("utf-8", "replace")

    def _feed_text(self, text: str) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        if not text:
            return out
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        if "\r" in text:
            # A CR at the very end may be the first half of a CRLF cut by the transport.
            self._skip_lf = text.endswith("\r")
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._buf += text
            return out
        lines = (self._buf + text).split("\n")
        self._buf = lines.pop()
        data = self._data
        for line in lines:
            if not line:
                self._dispatch(out)
                data = self._data
            elif line.startswith("data: "):
                # nearly every line of a model's stream: what _process_line does with it, in line
                self._lines += 1
                data.append(line[6:])
            else:
                self._lines += 1
                self._process_line(line, out)
        return out

    def _process_line(self, line: str, out: list[SSEEvent]) -> None:
        if line.startswith("data:"):
            value = line[5:]
            self._data.append(value[1:] if value.startswith(" ") else value)
            return
        if line[0] == ":":
            self.comments += 1
            self.anomalies.append(SSEAnomaly("comment", line[1:].strip()[:80], self.events_seen, self._t))
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":  # "data" with no colon: an empty data line
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\x00" not in value:
                self._id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():  # ASCII digits only (WHATWG); "²" is a digit to Python
                self._retry = int(value)
        else:
            self.anomalies.append(SSEAnomaly("unknown-field", line[:200], self.events_seen, self._t))

    def _dispatch(self, out: list[SSEEvent]) -> None:
        if self._id is not None:
            self._last_id = self._id
        if self._data:
            out.append(
                SSEEvent(
                    data="\n".join(self._data),
                    event=self._event,
                    id=self._last_id,
                    retry=self._retry,
                    index=self.events_seen,
                    t_ms=self._t,
                    lines=self._lines,
                )
            )
            self.events_seen += 1
        self._data = []
        self._event = None
        self._id = None
        self._retry = None
        self._lines = 0


def decode_sse(
    pieces: list[bytes] | bytes, times: list[float | None] | None = None
) -> tuple[list[SSEEvent], SSEDecoder]:
    """Decode a whole recorded stream; returns the events and the decoder (for its anomalies)."""
    decoder = SSEDecoder()
    if isinstance(pieces, bytes):
        pieces = [pieces]
    events: list[SSEEvent] = []
    for i, piece in enumerate(pieces):
        events.extend(decoder.feed(piece, times[i] if times else None))
    events.extend(decoder.close())
    return events, decoder


def decode_parts(datas: list[bytes], times: list[float | None]) -> tuple[list[SSEEvent], SSEDecoder]:
    """Decode a whole recorded stream given as its pieces' bytes and their arrival offsets:
    :func:`decode_joined` of them joined."""
    return decode_joined(b"".join(datas), list(map(len, datas)), times)


def decode_joined(
    raw: bytes, sizes: list[int], times: list[float | None]
) -> tuple[list[SSEEvent], SSEDecoder]:
    """Decode a whole recorded stream given as its bytes, the sizes of the pieces it arrived in and
    their arrival offsets: the same events and anomalies as feeding :class:`SSEDecoder` piece by
    piece, which it falls back to for anything but the plain framing nearly every server writes
    (``data: X`` lines, each followed by a blank line, LF only, UTF-8). That framing is recognised
    by counting and cut at once: the stream starts with ``data: `` and ends with a blank line, and
    its only line ends are those of the n - 1 blank lines followed by ``data: `` and of the last
    one (2n in all; such blank lines cannot touch, so they are the stream's n; so none of the n
    texts between them holds one). Each event gets the offset of the piece holding its blank
    line's end, where the decoder would have dispatched it.

    Every step over the pieces or events is a ``map`` of a function in C, not a loop in Python: with
    20 frames a stream, the Python steps per frame cost the live checker more than the cut.
    Where the compiled twin is built it cuts the plain framing in one pass over the bytes and
    makes the events in place; anything else it hands back, and the steps below decide it."""
    if _C is not None:
        cut = _C.cut_plain(raw, sizes, times, SSEEvent)
        if cut is not None:
            events, digits = cut
            return events, _cut_decoder(len(events), len(raw) <= PLAIN_MAX and not digits)
    if raw.startswith(b"event: "):
        if _C is not None:
            cut_named = _C.cut_named(raw, sizes, times, SSEEvent)
            if cut_named is not None:
                named_events, long_run, chars = cut_named
                return named_events, _cut_decoder(len(named_events), chars <= PLAIN_MAX and not long_run)
        named = _cut_named(raw, sizes, times)
        if named is not None:
            return named
    # counted by the longer mark: b"\n\n" took 5 us to count in a stream of 4 KB, b"\n\ndata: " 1.5
    n = raw.count(b"\n\ndata: ") + 1
    if not raw.startswith(b"data: ") or not raw.endswith(b"\n\n") or b"\r" in raw:
        return _fed(raw, sizes, times)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _fed(raw, sizes, times)
    texts = text[6:-2].split("\n\ndata: ")
    # a line end of its own in a text (found in them joined: counting them in the stream took 5x)
    if "\n" in "".join(texts):
        return _fed(raw, sizes, times)
    # each event's bytes with its "data: " and blank line: where it ends in the stream
    framed = list(
        map(_add, map(len, texts) if len(text) == len(raw) else map(len, map(str.encode, texts)), repeat(8))
    )
    events = list(map(_event, texts, range(n), _arrivals(framed, sizes, times)))
    return events, _cut_decoder(n, plain_number_bytes(raw))


def _arrivals(framed: list[int], sizes: list[int], times: list[float | None]) -> list[float | None]:
    """Each event's arrival: that of the piece holding the end of its blank line (``framed``: each
    event's bytes, its lines and blank line with them), where the decoder would dispatch it."""
    if sizes == framed:
        return times  # an event a piece, as a server writes them and a tap reads them
    at: list[float | None] = []
    piece, end, pos = 0, sizes[0], 0
    for size in framed:
        pos += size  # the byte that dispatches the event
        while pos > end:
            piece += 1
            end += sizes[piece]
        at.append(times[piece])
    return at


def _cut_named(
    raw: bytes, sizes: list[int], times: list[float | None]
) -> tuple[list[SSEEvent], SSEDecoder] | None:
    """:func:`decode_joined`'s cut of the named framing that /v1/responses and /v1/messages streams
    are written in: every event an ``event: NAME`` line, a ``data: X`` line and a blank line, LF
    only, UTF-8. The fed decoder's events (each with its name, and its two lines); None for
    anything else, which the decoder reads. Fed, such a stream took the decoder 2.4 us an event,
    the plain framing's cut 0.1: a Responses or Messages stream cost its checker as much again as
    a chat stream's rules and assembly. The compiled twin (``_sse_c.cut_named``) cuts it first."""
    if not raw.endswith(b"\n\n") or b"\r" in raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    blocks = text[:-2].split("\n\n")
    # one line end inside each block and two after it, and no other: no block holds a third line,
    # a blank line or a line end of its own in a name or a text
    if text.count("\n") != 3 * len(blocks):
        return None
    names: list[str] = []
    texts: list[str] = []
    for block in blocks:
        name, sep, data = block.partition("\ndata: ")
        if not sep or not name.startswith("event: "):
            return None
        names.append(name[7:])
        texts.append(data)
    framed = [len(b) + 2 for b in blocks] if len(text) == len(raw) else [len(b.encode()) + 2 for b in blocks]
    events = list(map(_event, texts, range(len(blocks)), _arrivals(framed, sizes, times), names, repeat(2)))
    return events, _cut_decoder(len(blocks), plain_numbers(texts))


def _cut_decoder(events: int, plain_numbers: bool) -> SSEDecoder:
    """The decoder as it stands after a stream cut at once (by the twin or by the steps above):
    every event dispatched, nothing pending."""
    decoder = SSEDecoder()
    decoder.events_seen = events
    decoder._started = True
    decoder.plain_numbers = plain_numbers
    return decoder


def _event(
    data: str,
    index: int,
    t_ms: float | None,
    name: str | None = None,
    lines: int = 1,
    _new: Any = object.__new__,
) -> SSEEvent:
    """``SSEEvent(data, event=name, index=index, t_ms=t_ms, lines=lines)``, its fields set here: the
    class's own ``__init__``, entered from C for each event, cost a fifth more
    (``tests/contracts/test_sse.py`` holds the two equal)."""
    ev: SSEEvent = _new(SSEEvent)
    ev.data = data
    ev.event = name
    ev.id = None
    ev.retry = None
    ev.index = index
    ev.t_ms = t_ms
    ev.lines = lines
    return ev


def _fed(raw: bytes, sizes: list[int], times: list[float | None]) -> tuple[list[SSEEvent], SSEDecoder]:
    """:func:`decode_sse` of the pieces, cut again."""
    ends = list(accumulate(sizes))
    return decode_sse(list(map(raw.__getitem__, map(slice, [0, *ends[:-1]], ends))), times)
