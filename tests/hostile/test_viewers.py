"""Live-view viewers are bounded, against a real ``wirecheck proxy`` and its view process: a burst of
200 admits at most the cap (the check and the count are one step, and the proxy's own process counts
against the same cap), a viewer that stops reading holds a bounded send buffer and is dropped, and an
exchange's detail asked for by many stalled readers leaves the view process's peak memory bounded."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import httpx

from tests.support.proctree import spawned
from tests.support.proxy_process import proxy_process
from tests.support.servers import raw_server, read_request
from wirecheck.contracts import Exchange, HttpRequest, HttpResponse
from wirecheck.record import Store

TOKEN = "viewer-t0ken-d0nt-show"
AUTH = {"authorization": f"Bearer {TOKEN}"}
CAP = 64  # LiveViewConfig.max_viewers


async def _ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()


def _state(admin: str) -> dict[str, object]:
    r = httpx.get(f"{admin}/wirecheck/state", headers=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return dict(r.json())


async def _burst(admin: str, n: int) -> list[bytes]:
    """``n`` event-stream requests at once, each on its own connection; the status line of each,
    read while every connection stays open (an admitted viewer keeps its slot)."""
    host, port = admin.removeprefix("http://").split(":")
    request = (
        b"GET /wirecheck/events HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer %s\r\n\r\n"
        % TOKEN.encode()
    )
    conns = await asyncio.gather(*(asyncio.open_connection(host, int(port)) for _ in range(n)))
    try:
        for _, writer in conns:
            writer.write(request)
        await asyncio.gather(*(w.drain() for _, w in conns))

        async def status(reader: asyncio.StreamReader) -> bytes:
            return await asyncio.wait_for(reader.readline(), timeout=60)

        return list(await asyncio.gather(*(status(r) for r, _ in conns)))
    finally:
        for _, writer in conns:
            writer.close()


def test_a_burst_of_200_viewers_admits_at_most_the_cap(tmp_path: Path) -> None:
    env = {"WIRECHECK_ADMIN_TOKEN": TOKEN}
    with raw_server(_ok) as up, proxy_process(up, tmp_path, "--no-live-checks", env=env) as px:
        assert _state(px.admin)["viewers"]["pid"] != px.proc.pid  # type: ignore[index]
        lines = asyncio.run(_burst(px.admin, 200))
        admitted = sum(line.startswith(b"HTTP/1.1 200") for line in lines)
        refused = sum(line.startswith(b"HTTP/1.1 503") for line in lines)
        print(f"viewers admitted of a burst of 200: {admitted} (refused {refused})")
        assert admitted + refused == 200, lines[:5]
        assert 0 < admitted <= CAP
        # the slots come back when the viewers go: a new one is admitted
        deadline = time.monotonic() + 30
        while True:
            with httpx.stream("GET", f"{px.admin}/wirecheck/events", headers=AUTH, timeout=30) as r:
                if r.status_code == 200:
                    break
            assert time.monotonic() < deadline, "the slots of the gone viewers never came back"
            time.sleep(0.2)
        # the view process got its settings through a pipe: no secret on its command line
        for pid in spawned(px.proc.pid):
            assert TOKEN not in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")


def _send_queues(port: int) -> list[int]:
    """The unsent bytes (tx_queue) of every established TCP socket whose local port is ``port``."""
    out = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state, queues = fields[1], fields[3], fields[4]
        if int(local.rsplit(":", 1)[1], 16) == port and state == "01":
            out.append(int(queues.split(":")[0], 16))
    return out


def test_a_viewer_that_stops_reading_holds_a_bounded_buffer_and_is_dropped(tmp_path: Path) -> None:
    # about 6 MB of events: more than a stalled connection may hold
    store = Store(tmp_path / "hostile.db", writer=True)
    store.write_now(
        Exchange(
            id=f"old-{i}", tap="caller", request=HttpRequest("POST", "/v1/x?pad=" + "x" * 2000, [], b"{}")
        )
        for i in range(3000)
    )
    store.close()
    stalled = 6
    with raw_server(_ok) as up, proxy_process(up, tmp_path, "--no-live-checks") as px:
        port = int(px.admin.rsplit(":", 1)[1])
        socks = []
        for _ in range(stalled):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", port))
            s.sendall(b"GET /wirecheck/events HTTP/1.1\r\nhost: localhost\r\nlast-event-id: 0-0\r\n\r\n")
            socks.append(s)  # never read
        most = 0
        try:
            deadline = time.monotonic() + 60
            while True:
                most = max([most, *_send_queues(port)])
                if int(_state(px.admin)["viewers"]["dropped"]) >= stalled:  # type: ignore[index]
                    break
                assert time.monotonic() < deadline, "the stalled viewers were never dropped"
                time.sleep(0.05)
        finally:
            for s in socks:
                s.close()
    print(f"largest send queue of a stalled viewer: {most / 1024:.0f} KiB")
    # the kernel doubles SO_SNDBUF (128 KiB): 256 KiB; autotuned, it was about 4 MB a viewer
    assert 0 < most <= 512 * 1024, most


def test_stalled_readers_of_a_large_exchange_leave_the_view_process_bounded(tmp_path: Path) -> None:
    big = b'{"pad": "' + b"y" * (16 * 1024 * 1024) + b'"}'
    store = Store(tmp_path / "hostile.db", writer=True)
    store.write_now(
        [
            Exchange(
                id="big",
                tap="caller",
                request=HttpRequest("POST", "/v1/chat/completions", [], b"{}"),
                response=HttpResponse(200, [("content-type", "application/json")], big),
            )
        ]
    )
    store.close()
    with raw_server(_ok) as up, proxy_process(up, tmp_path, "--no-live-checks") as px:
        pid = int(_state(px.admin)["viewers"]["pid"])  # type: ignore[index]
        port = int(px.admin.rsplit(":", 1)[1])
        socks = []
        try:
            for _ in range(40):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.connect(("127.0.0.1", port))
                s.sendall(b"GET /wirecheck/exchange/big HTTP/1.1\r\nhost: localhost\r\n\r\n")
                socks.append(s)  # never read
            # a reader that does read: the detail comes, cut, and says so
            deadline = time.monotonic() + 120
            while True:
                r = httpx.get(f"{px.admin}/wirecheck/exchange/big", timeout=60)
                if r.status_code == 200:
                    break
                assert r.status_code == 503 and time.monotonic() < deadline, r.text[:300]  # busy: later
                time.sleep(0.5)
            assert r.json()["view_truncated"] == {"response.body_text": len(big)}
            assert len(r.content) < 1024 * 1024
            status = Path(f"/proc/{pid}/status").read_text()
        finally:
            for s in socks:
                s.close()
    peak = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")) / 1024
    print(f"view process peak RSS with 40 stalled readers of a 16 MiB exchange: {peak:.0f} MB")
    assert peak < 250, peak  # it was 738 MB
