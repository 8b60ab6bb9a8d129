"""Whether a compiled twin holds memory across calls: a refcount left behind on any path (a result,
an error) grows the traced memory with every call."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable


def grown_by(run: Callable[[], None]) -> int:
    """The traced memory ``run`` leaves behind in bytes, measured over its second run (the first
    fills whatever caches it fills)."""
    run()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        run()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename"))
