"""Types of the compiled twin of a relayed body's per-read path (proxy/_relay_c.c)."""

import asyncio
from collections.abc import Callable
from typing import Any

class Sink:
    """``_DirectSink.forward`` and ``DirectBody.send`` in one: called with a batch. It keeps the
    record itself, joined as a store row holds it (``joined``)."""

    @property
    def size(self) -> int: ...
    @property
    def calls(self) -> int: ...
    @property
    def ended(self) -> bool: ...
    @property
    def direct(self) -> int:
        """Writes the caller's socket (``fd``) took whole from the sink itself."""
    def __init__(
        self,
        t0: float,
        limit: int,
        added: Any,
        conn: Any,
        transport: asyncio.Transport,
        on_end: Callable[[], object] | None = None,
        fd: int = -1,
    ) -> None: ...
    def __call__(self, batch: list[tuple[float, bytes]], /) -> bool: ...
    def end(self, batch: list[tuple[float, bytes]], /) -> bool:
        """The last read of a complete body: written with the body's end (then ``on_end()``)."""
    def joined(self) -> tuple[bytes, list[int], list[float]]:
        """The record so far: the kept bytes joined, each piece's size and its ``t_ms``."""

class Dechunker:
    """A chunked body's reads that lie inside it, taken over from llhttp at a chunk boundary."""

    def __init__(self) -> None: ...
    def feed(
        self, data: bytes, stamp: float, sink: object, pieces: list[tuple[float, bytes]], /
    ) -> bool | int | tuple[bytes, int, bool, int]: ...

class Reader:
    """An upstream connection's read callback, for a class that derives from it (``_ConnReader``)."""

    dechunk: Dechunker | None
    sink: Callable[[list[tuple[float, bytes]]], bool] | None
    pieces: list[tuple[float, bytes]]
    stamp: float
    halted: bool
    def data_received(self, data: bytes, /) -> None: ...

def use_clock(clock: Callable[[], float] | None, /) -> None:
    """A test's clock for the Readers' stamps; None: the real one."""
