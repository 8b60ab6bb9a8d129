from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.clocks import EngineChunkClock
from wirecheck.contracts import Exchange
from wirecheck.record import RecordingTransport, StreamingASGITransport
from wirecheck.sim import (
    GatewayConfig,
    GroundTruth,
    SimConfig,
    create_app,
    create_gateway,
    parse_faults,
    parse_gateway_faults,
)

FAST = 0.0005  # time scale for tests: a simulated second is half a millisecond


def sim_config(**kw: Any) -> SimConfig:
    if isinstance(kw.get("faults"), str):
        kw["faults"] = parse_faults(kw["faults"], seed=kw.get("seed", 0))
    kw.setdefault("time_scale", FAST)
    return SimConfig(**kw)


@pytest.fixture
def sim_client() -> Callable[..., Any]:
    """A client straight to a simulator, recording at the engine tap into ``client.exchanges``."""
    clients: list[httpx.AsyncClient] = []

    def make(**kw: Any) -> httpx.AsyncClient:
        app = create_app(sim_config(**kw))
        sink: list[Exchange] = []
        c = httpx.AsyncClient(
            transport=RecordingTransport(StreamingASGITransport(app), "engine", sink), base_url="http://sim"
        )
        c.exchanges = sink  # type: ignore[attr-defined]
        c.app = app  # type: ignore[attr-defined]
        clients.append(c)
        return c

    return make


@pytest.fixture
def dual_tap() -> Callable[..., Any]:
    """caller -> [caller tap] -> gateway -> [engine tap] -> simulator, all in process. ``clock``: an
    ``EngineChunkClock`` both taps record with (the wall clock when None)."""

    def make(
        gateway_faults: str = "",
        truth: GroundTruth | None = None,
        clock: EngineChunkClock | None = None,
        **sim_kw: Any,
    ) -> httpx.AsyncClient:
        app = create_app(sim_config(**sim_kw), truth=truth)
        sink: list[Exchange] = []
        engine: httpx.AsyncBaseTransport = StreamingASGITransport(app)
        kw: dict[str, Any] = {}
        if clock is not None:
            engine, kw = clock.ticking(engine), {"clock": clock}
        engine_side = RecordingTransport(engine, "engine", sink, **kw)
        gw = create_gateway(
            GatewayConfig(
                upstream="http://sim",
                faults=parse_gateway_faults(gateway_faults),
                transport=engine_side,
                truth=truth,
            )
        )
        c = httpx.AsyncClient(
            transport=RecordingTransport(StreamingASGITransport(gw), "caller", sink, **kw),
            base_url="http://gateway",
        )
        c.exchanges = sink  # type: ignore[attr-defined]
        return c

    return make
