"""Types of the compiled twin of ``_sse.decode_joined``'s plain cut (``_sse_c.c``)."""

from typing import Any

def cut_plain(
    raw: bytes, sizes: list[int], times: list[Any], cls: type[Any]
) -> tuple[list[Any], bool] | None: ...
