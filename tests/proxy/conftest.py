from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.twins import PATHS, on_path
from wirecheck.proxy import ProxyApp, TapConfig
from wirecheck.record import Store, StreamingASGITransport


@pytest.fixture
def store(tmp_path: Path) -> Any:
    s = Store(tmp_path / "wc.db", writer=True)
    yield s
    s.close()


@pytest.fixture
async def through_proxy(store: Store) -> Any:
    """A client whose requests go through a ProxyApp (in process) to the given upstream ASGI app."""
    apps: list[ProxyApp] = []

    def make(upstream_app: Any, **cfg: Any) -> httpx.AsyncClient:
        cfg.setdefault("upstream", "http://upstream")
        app = ProxyApp(TapConfig(**cfg), store, transport=StreamingASGITransport(upstream_app))
        apps.append(app)
        c = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
        c.proxy = app  # type: ignore[attr-defined]
        return c

    yield make
    for app in apps:
        await app.aclose()


@pytest.fixture(scope="module", params=PATHS)
def twin_paths(request: pytest.FixtureRequest) -> Iterator[str]:
    """A module that asks for it runs once with the forwarding side's compiled twins in use (the
    head lines, proxy/_heads_c.c; a relayed body's reads, proxy/_relay_c.c) and once on the Python
    they stand in for."""
    from wirecheck.proxy import _app, _heads, _http, _upstream

    assert _upstream._native_relay is _app._native_relay
    swaps = [(_http, "_twin", None), (_upstream, "_twin", None), (_heads, "_twin", None)]
    swaps += [(_upstream, "_native_relay", None), (_app, "_native_relay", None)]
    with on_path(request.param, swaps, ["wirecheck.proxy._heads_c", "wirecheck.proxy._relay_c"]) as path:
        yield path
