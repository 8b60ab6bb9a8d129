"""Types of the compiled twin of ``_assembly.assemble_stream``'s template fold (``_assembly_c.c``)."""

from typing import Any

def fold_text(
    events: list[Any], start: int, before: str, after: str, least: int, most: int, cls: type[Any]
) -> tuple[int, str, int, list[float]] | None: ...
def assemble_plain(
    events: list[Any],
    cls: type[Any],
    stream_cls: type[Any],
    choice_cls: type[Any],
    loads: Any,
    bounded: Any,
    short: int,
    most: int,
    probe: str,
    probed: str,
) -> Any | None: ...
