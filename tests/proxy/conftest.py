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


@pytest.fixture(scope="module", params=["compiled", "python"])
def twin_paths(request: pytest.FixtureRequest) -> Any:
    """A module that asks for it runs once with the forwarding side's compiled twins in use (the
    head lines, proxy/_heads_c.c; a relayed body's reads, proxy/_relay_c.c) and once on the Python
    they stand in for; module-scoped, as hypothesis's tests take no function-scoped fixture. Where a
    C compiler was present at install the twins must be built: a silent fallback would leave the
    compiled path untested."""
    from wirecheck.contracts._native import PURE_PYTHON, native
    from wirecheck.proxy import _app, _upstream

    held = [(mod, name, getattr(mod, name)) for mod, name in _TWINS]
    if request.param == "compiled":
        if not PURE_PYTHON:
            for built in ("wirecheck.proxy._heads_c", "wirecheck.proxy._relay_c"):
                assert native(built) is not None, f"{built} is not built"
        assert _upstream._native_relay is _app._native_relay
    else:
        for mod, name, _ in held:
            setattr(mod, name, None)
    try:
        yield request.param
    finally:
        for mod, name, twin in held:
            setattr(mod, name, twin)


def _twins() -> list[tuple[Any, str]]:
    from wirecheck.proxy import _app, _http, _upstream

    return [(_http, "_twin"), (_upstream, "_twin"), (_upstream, "_native_relay"), (_app, "_native_relay")]


_TWINS = _twins()
