"""The compiled twin of record/_rows.py's chunk columns (record/_rows_c.c)."""

from wirecheck.contracts import Chunk

def chunk_columns(chunks: list[Chunk], /) -> tuple[list[int], list[int], bytes] | None: ...
