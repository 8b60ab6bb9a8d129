"""The store's reading runs with its compiled twins (record/_rows_c.c, record/_window_c.c) and
without them: every test here runs both ways."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from wirecheck.record import _rows, _window


@pytest.fixture(autouse=True, params=["native", "python"])
def rows_twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``native``: as installed (skipped where the twins are not built); ``python``: the reference."""
    if request.param == "python":
        monkeypatch.setattr(_rows, "_native", None)
        monkeypatch.setattr(_window, "_keep", _window._keep_py)
    elif _rows._native is None or _window._native is None:
        pytest.skip("the compiled twin is not built here (or WIRECHECK_PURE_PYTHON is set)")
    yield str(request.param)
