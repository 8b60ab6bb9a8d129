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


@pytest.fixture(params=["compiled", "python"])
def relay_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs a test on both paths of a relayed body's reads: the compiled twin (proxy/_relay_c.c)
    and the pure-Python reference it stands in for. Where a C compiler was present at install the
    twin must be built: a silent fallback would leave the compiled path untested."""
    from wirecheck.contracts._native import PURE_PYTHON, native
    from wirecheck.proxy import _app, _upstream

    if request.param == "compiled":
        if not PURE_PYTHON:
            assert native("wirecheck.proxy._relay_c") is not None, "proxy/_relay_c.c is not built"
        assert _upstream._native_relay is _app._native_relay
    else:
        monkeypatch.setattr(_upstream, "_native_relay", None)
        monkeypatch.setattr(_app, "_native_relay", None)
    return str(request.param)
