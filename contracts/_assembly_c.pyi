"""Types of the compiled twin of ``_assembly.assemble_stream``'s template fold (``_assembly_c.c``)."""

from typing import Any

def fold_text(
    events: list[Any], start: int, before: str, after: str, least: int, most: int, cls: type[Any]
) -> tuple[int, str, int, list[float]] | None: ...
