"""A real ``wirecheck proxy`` process in front of a small loopback upstream, for the hostile tests."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.servers import port_open, running
from tests.support.wire import call, completion, message
from wirecheck.record import free_port, read_body, serve

#: arguments nested this deep stopped the checker on main (RecursionError past ~1000 levels)
DEEP = 5000


async def upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A chat completion; a request whose last message says "deep" gets tool arguments nested
    :data:`DEEP` levels."""
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    deep = b"deep" in body
    args = '{"a": ' + "[" * DEEP + "]" * DEEP + "}" if deep else '{"city": "Tokyo"}'
    out = json.dumps(completion(message(None, tool_calls=[call(args=args)]), "tool_calls")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


@contextlib.contextmanager
def proxy_process(db: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str, str]]:
    """Yields the process, its forwarding URL and its admin listener's URL."""
    with serve(upstream) as up:
        port, admin_port = free_port(), free_port()
        base = f"http://127.0.0.1:{port}"
        admin = f"http://127.0.0.1:{admin_port}"
        with running(
            *("proxy", "--upstream", up),
            *("--listen", f"127.0.0.1:{port}", "--store", str(db), "--settle", "0.1", *extra),
            *("--admin", f"127.0.0.1:{admin_port}"),
            ready=port_open(port, admin_port),
        ) as proc:
            yield proc, base, admin


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (Linux /proc children lists)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            with contextlib.suppress(OSError):
                kids = {int(k) for k in (task / "children").read_text().split()}
                todo.extend(kids - out)
                out |= kids
    return out


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped (a container's init may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def chat(base: str, text: str) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/chat/completions",
        json={
            "model": "m",
            "messages": [{"role": "user", "content": text}],
            "tools": [
                {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
            ],
        },
        timeout=30,
    )


def spawned(pid: int) -> list[int]:
    """The proxy's helper processes below ``pid``: the live checker (``python -c '... worker_main
    ...'``, proxy/_live.py) and what multiprocessing spawned (the live view's process once a view
    was asked for, the workers of ``--workers``: ``python -c 'from multiprocessing.spawn import
    spawn_main; ...'``), not multiprocessing's resource tracker."""
    found = []
    for p in descendants(pid):
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{p}/cmdline").read_bytes()
            if b"spawn_main" in cmdline or b"import worker_main" in cmdline:
                found.append(p)
    return sorted(found)


def threads(pid: int) -> int:
    """How many threads ``pid`` runs (0 once it is gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def wait_guarded(pids: list[int], timeout: float = 60) -> None:
    """Wait until each spawned helper runs its lifeline thread (a second thread): killed before
    that, a helper still importing exits only when its imports end, which on a loaded CI machine
    took over 5 s (proxy/_lifeline.py). The bound is a process start's, not one under test."""
    deadline = time.monotonic() + timeout
    while not all(threads(p) >= 2 for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
