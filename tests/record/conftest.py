"""The record package's compiled twins, swapped out and back: a test module that asks for
``both_paths`` runs once with each twin in use (where it is built) and once on its Python
reference, so every test of the area holds on both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.twins import PATHS, on_path
from wirecheck.record import _rows, _window


@pytest.fixture(scope="module", params=PATHS)
def both_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    with on_path(
        request.param,
        [(_rows, "_native", None), (_window, "_native", None)],
        ["wirecheck.record._rows_c", "wirecheck.record._window_c"],
    ) as path:
        yield path
