"""The record package's compiled twins, swapped out and back: a test module that asks for
``both_paths`` runs once with each twin in use (where it is built) and once on its Python
reference, so every test of the area holds on both."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from wirecheck.record import _rows, _window

#: each module with a twin, and the attribute that holds it
_TWINNED: list[tuple[ModuleType, str]] = [(_rows, "_native"), (_window, "_native")]


@pytest.fixture(scope="module", params=["native", "python"])
def both_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    """Module-scoped (hypothesis's tests take no function-scoped fixture): the twins stay swapped
    for the module's tests of one parameter, and are put back after them."""
    held = [(mod, attr, getattr(mod, attr)) for mod, attr in _TWINNED]
    if request.param == "python":
        for mod, attr, _ in held:
            setattr(mod, attr, None)
    try:
        yield request.param
    finally:
        for mod, attr, twin in held:
            setattr(mod, attr, twin)
