"""The compiled twin of record/_rows.py's chunk columns (record/_rows_c.c)."""

from collections.abc import Callable, Mapping
from typing import Any

from wirecheck.contracts import Chunk, Exchange

def chunk_columns(chunks: list[Chunk], /) -> tuple[list[int], list[int], bytes] | None: ...
def joined(times: object, sizes: object, data: bytes, /) -> tuple[bytes, list[int], list[float]] | None: ...
def row_text(
    ex: Exchange, verdicts: Mapping[str, bool], target: Callable[[str], str], dumps: Callable[[Any], bytes], /
) -> tuple[str, bytes | None, str] | None: ...
