"""One way to run an area's tests on both paths of its compiled twins (setup.py, contracts/_native.py):
with each twin in use, and with the Python it stands in for in its place."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from wirecheck.contracts._native import PURE_PYTHON, native

#: the two paths, as the module-scoped fixtures' params (hypothesis's tests take no function-scoped
#: fixture: a module runs whole on one path, then whole on the other)
PATHS = ["compiled", "python"]


@contextmanager
def on_path(path: str, swaps: Iterable[tuple[Any, str, Any]], built: Iterable[str]) -> Iterator[str]:
    """``path`` "python": each ``(module, attribute, python)`` set to ``python`` (None where the
    module falls back by itself), put back after. "compiled": each module named in ``built`` must
    be built, unless ``WIRECHECK_PURE_PYTHON`` asks for the Python: a silent fallback would leave
    the compiled path untested."""
    with pytest.MonkeyPatch.context() as mp:
        if path == "compiled":
            if not PURE_PYTHON:
                for name in built:
                    assert native(name) is not None, f"{name} is not built"
        else:
            for module, attribute, python in swaps:
                mp.setattr(module, attribute, python)
        yield path
