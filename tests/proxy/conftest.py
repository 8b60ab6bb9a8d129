from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from wirecheck.proxy import ProxyApp, Store, TapConfig

from tests.recording import StreamingASGITransport


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(tmp_path / "wc.db", writer=True)
    yield s
    s.close()


@pytest.fixture
def through_proxy(store: Store) -> Callable[..., httpx.AsyncClient]:
    """A client whose requests go through a ProxyApp (in process) to the given upstream ASGI app."""

    def make(upstream_app: Any, **cfg: Any) -> httpx.AsyncClient:
        cfg.setdefault("upstream", "http://upstream")
        app = ProxyApp(TapConfig(**cfg), store, transport=StreamingASGITransport(upstream_app))
        c = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
        c.proxy = app  # type: ignore[attr-defined]
        return c

    return make
