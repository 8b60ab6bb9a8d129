"""Types of the compiled twin of ``_markup.find_markup`` (``_markup_c.c``)."""

import re
from collections.abc import Callable

def find_markup(
    needles_by_id: dict[int, tuple[str, ...] | None],
    fallback: Callable[[re.Pattern[str], str | None], tuple[int, str] | None],
    pattern: re.Pattern[str],
    text: str | None,
) -> tuple[int, str] | None: ...
