from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wirecheck.record import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "wc.db", writer=True)
    yield s
    s.close()
