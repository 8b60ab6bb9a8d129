from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

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


@pytest.fixture(scope="module", params=["native", "python"])
def both_head_paths(request: pytest.FixtureRequest) -> Any:
    """A module that asks for it runs once with the compiled twin of the head lines in use (where it
    is built: proxy/_heads_c.c) and once on the Python path; module-scoped, as hypothesis's tests
    take no function-scoped fixture."""
    from wirecheck.proxy import _http, _upstream

    held = [(mod, mod._twin) for mod in (_http, _upstream)]
    if request.param == "python":
        for mod, _ in held:
            mod._twin = None
    try:
        yield request.param
    finally:
        for mod, twin in held:
            mod._twin = twin
