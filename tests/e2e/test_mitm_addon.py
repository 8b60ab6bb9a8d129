"""The mitmproxy addon with a real mitmdump in reverse mode in front of the simulator."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.support import wire
from tests.support.servers import mitmdump, stop
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.record import free_port, open_store, serve
from wirecheck.sim import SimConfig, create_app


def test_mitmdump_records_streams_with_chunk_timing_into_the_store(tmp_path: Path) -> None:
    db = tmp_path / "mitm.db"
    port = free_port()
    sim = create_app(SimConfig(decode_tokens_per_s=200.0))  # 5 ms a token
    with (
        serve(sim) as sim_url,
        mitmdump(sim_url, port, "--set", f"wirecheck_store={db}", "--set", "wirecheck_tap=engine") as proc,
    ):
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        t0 = time.monotonic()
        first = None
        with httpx.stream(
            "POST", url, json=wire.tool_req(stream=True), headers={"authorization": "Bearer sk-x"}
        ) as r:
            for _ in r.iter_raw():
                first = first or time.monotonic() - t0
        total = time.monotonic() - t0
        assert first is not None and first < total * 0.8  # streamed through, not buffered
        assert httpx.post(url, json=wire.tool_req(), timeout=10).status_code == 200
        _, err = stop(proc)
    store = open_store(db)
    exs = [e for e in store.exchanges() if e.request.path.endswith("/chat/completions")]
    store.close()
    assert len(exs) == 2, err
    streamed = exs[0]
    assert streamed.tap == "engine" and streamed.request.header("authorization") == "[redacted]"
    assert streamed.response is not None and len(streamed.response.chunks or []) > 5
    times = [c.t_ms for c in streamed.response.chunks or []]
    assert times == sorted(times) and times[-1] - times[0] > 20
    assert check_exchanges(exs, CheckConfig(direct=True)).findings == []
