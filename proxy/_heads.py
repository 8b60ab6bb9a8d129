"""A tap's one pass over an exchange's headers: what the record keeps and what goes on.

Each request's headers serve four ends: the record (names and values as text, credentials
redacted), the hop-by-hop filter (what the upstream gets), the protocol-upgrade test (refused
with a 501) and the correlation id (``x-wirecheck-id``). Each response's serve two: the record and
the hop filter towards the caller. What a header name means for each of them does not change from
one exchange to the next, so it is decided once per name (``_Name``, kept for a bounded number of
names) and each header then costs one lookup and one decode of its value; the headers that go on
stay the bytes that came, never decoded and encoded again.
"""

from __future__ import annotations

from wirecheck.contracts import REDACTED, Redaction, native
from wirecheck.record import CORRELATION_HEADER

__all__ = ["HOP", "HeaderNames", "RequestHeads"]

#: hop-by-hop headers (RFC 9110 7.6.1 and the older proxy ones), and ``host``, which the upstream
#: client sets itself: none goes on, either way
HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
#: header names whose meaning a tap keeps (a caller's own names are not bounded: past this many,
#: a new name is worked out for each header that carries it)
_NAMES_KEPT = 1024
#: a kept name's kind, as the compiled twin reads it (proxy/_heads_c.c's K_*)
_SECRET, _HOP, _LENGTH, _CORR, _CONNECTION = 1, 2, 4, 8, 16
#: the compiled twin of the pass over the headers of names already kept (proxy/_heads_c.c; None:
#: off or not built)
_twin = native("wirecheck.proxy._heads_c")


class _Name:
    """What one header name (the bytes as they came) means to a tap."""

    __slots__ = ("corr", "hop", "length", "low", "secret", "text")

    def __init__(self, raw: bytes, redact: Redaction) -> None:
        self.text = raw.decode("latin-1")
        self.low = low = self.text.lower()
        self.secret = redact.is_secret_header(self.text)
        self.hop = low in HOP
        self.length = low == "content-length"
        self.corr = low == CORRELATION_HEADER


class RequestHeads:
    """A request's headers, read once: ``recorded`` (redacted text, every header in order),
    ``forwarded`` (the bytes to send on: no hop-by-hop header, no content-length, and no
    correlation id unless ``keep_ids``), ``ids`` (the correlation ids the caller sent, in order)
    and ``upgrade`` (a request to switch protocols: ``Connection: upgrade`` with an ``Upgrade``
    header)."""

    __slots__ = ("forwarded", "ids", "recorded", "upgrade")

    def __init__(
        self,
        recorded: list[tuple[str, str]],
        forwarded: list[tuple[bytes, bytes]],
        ids: list[str],
        upgrade: bool,
    ) -> None:
        self.recorded, self.forwarded, self.ids, self.upgrade = recorded, forwarded, ids, upgrade


_new_heads = RequestHeads.__new__


class HeaderNames:
    """The meaning of each header name a tap has seen, under its redaction policy."""

    __slots__ = ("_known", "_names", "_redact")

    def __init__(self, redact: Redaction) -> None:
        self._redact = redact
        self._names: dict[bytes, _Name] = {}
        #: each kept name's (text, kind) for the compiled twin, which takes only headers of these
        self._known: dict[bytes, tuple[str, int]] = {}

    def _name(self, raw: bytes) -> _Name:
        name = _Name(raw, self._redact)
        if len(self._names) < _NAMES_KEPT:
            self._names[raw] = name
            kind = (
                (_SECRET if name.secret else 0)
                | (_HOP if name.hop else 0)
                | (_LENGTH if name.length else 0)
                | (_CORR if name.corr else 0)
                | (_CONNECTION if name.low == "connection" else 0)
            )
            self._known[raw] = (name.text, kind)
        return name

    def request(self, headers: list[tuple[bytes, bytes]], *, keep_ids: bool) -> RequestHeads:
        heads = _new_heads(RequestHeads)
        done = _twin.request_heads(self._known, headers, keep_ids, REDACTED) if _twin is not None else None
        if done is not None:  # every name kept, and no connection header that may say upgrade
            heads.recorded, heads.forwarded, heads.ids = done
            heads.upgrade = False
            return heads
        names = self._names
        recorded: list[tuple[str, str]] = []
        forwarded: list[tuple[bytes, bytes]] = []
        ids: list[str] = []
        upgrade = connection_upgrade = False
        for k, v in headers:
            name = names.get(k) or self._name(k)
            value = v.decode("latin-1")
            recorded.append((name.text, REDACTED if name.secret else value))
            if name.hop:
                if name.low == "upgrade":
                    upgrade = True
                elif name.low == "connection" and not connection_upgrade:
                    # a token "upgrade" needs the text: the split only for a value that has it
                    # (``keep-alive`` and ``close`` do not)
                    low = value.lower()
                    connection_upgrade = "upgrade" in low and "upgrade" in [t.strip() for t in low.split(",")]
            elif name.corr:
                ids.append(value)
                if keep_ids:
                    forwarded.append((k, v))
            elif not name.length:
                forwarded.append((k, v))
        # made without its ``__init__``: a Python ``__init__`` is entered from C, about 2k
        # instructions on this interpreter, where ``__new__`` and four slot stores take a fraction
        heads.recorded, heads.forwarded, heads.ids = recorded, forwarded, ids
        heads.upgrade = upgrade and connection_upgrade
        return heads

    def response(
        self, headers: list[tuple[bytes, bytes]]
    ) -> tuple[list[tuple[str, str]], list[tuple[bytes, bytes]]]:
        """A response's headers as the record keeps them (redacted text) and as they go on to the
        caller (the bytes that came, without the hop-by-hop ones)."""
        done: tuple[list[tuple[str, str]], list[tuple[bytes, bytes]]] | None = (
            _twin.response_heads(self._known, headers, REDACTED) if _twin is not None else None
        )
        if done is not None:  # every name kept
            return done
        names = self._names
        recorded: list[tuple[str, str]] = []
        forwarded: list[tuple[bytes, bytes]] = []
        for k, v in headers:
            name = names.get(k) or self._name(k)
            recorded.append((name.text, REDACTED if name.secret else v.decode("latin-1")))
            if not name.hop:
                forwarded.append((k, v))
        return recorded, forwarded
