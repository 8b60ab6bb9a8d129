"""The tests' one way to run a server in another process; in process, an app runs
on loopback with ``wirecheck.record.serve``. A process is started, waited on until it answers, and
stopped with SIGTERM (what an operator sends: the proxy flushes its store on it), killed only when it
does not stop in time."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx

from wirecheck.record import free_port

#: mitmproxy's dump tool, installed beside this Python by the ``mitm`` extra
MITMDUMP = Path(sys.executable).with_name("mitmdump")
ADDON = Path(__file__).parents[2] / "proxy" / "mitm_addon.py"
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def port_open(*ports: int) -> Callable[[], bool]:
    """A readiness check: something accepts connections on each of ``127.0.0.1:ports``. A tap is
    transparent (an HTTP probe of it would be forwarded and recorded), so a connection is all that
    is asked of it. A proxy starts its listeners side by side, so its admin listener answering says
    nothing about its taps: a loaded CI machine showed it (a caller got 502 from a gateway whose
    engine tap was not listening yet)."""

    def check() -> bool:
        for port in ports:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) != 0:
                    return False
        return True

    check.__qualname__ = f"a listener on each of 127.0.0.1:{','.join(map(str, ports))}"
    return check


def wait_up(
    ready: str | Callable[[], bool],
    # mitmdump took over 20 s to start with the load at 10 on 2 cores (measured): a start, not a bound
    timeout: float = 60.0,
    proc: subprocess.Popen[str] | None = None,
    logs: Path | None = None,
) -> None:
    """Return once ``ready`` holds: a URL that answers at all (any status), or a check that returns
    True. Fail the test after ``timeout`` seconds, or as soon as ``proc``, the process that should
    answer, has exited; the failure quotes the end of its ``logs``."""
    deadline = time.monotonic() + timeout
    what = ready if isinstance(ready, str) else getattr(ready, "__qualname__", "the readiness check")
    while True:
        try:
            if isinstance(ready, str):
                httpx.get(ready, timeout=0.5)
                return
            if ready():
                return
        except httpx.HTTPError:
            pass
        exited = proc is not None and proc.poll() is not None
        if exited or time.monotonic() > deadline:
            said = piped_tail(proc) if exited and logs is None and proc is not None else tail(logs)
            state = f"the process exited ({proc.returncode if proc else None})" if exited else "timed out"
            raise AssertionError(f"{what} did not come up: {state}. {said}")
        time.sleep(0.05)


#: the processes started with ``group=True`` (see :func:`process`), by pid: each leads a group
_GROUP_LEADERS: set[int] = set()


def tail(logs: Path | None, chars: int = 2000) -> str:
    """The end of what a process started with ``logs`` wrote, stdout then stderr (nothing for a
    process started without them)."""
    if logs is None:
        return ""
    return "".join(
        f.read_text(errors="replace")[-chars:]
        for f in (logs.with_suffix(".stdout"), logs.with_suffix(".stderr"))
        if f.exists()
    )


def piped_tail(proc: subprocess.Popen[str], chars: int = 2000) -> str:
    """The end of what an exited process wrote to its pipes, stdout then stderr: why a server
    started without ``logs`` never came up (a port taken, a refused argument). Empty where it wrote
    to no pipe, or where a child it left holds the pipes open past a few seconds."""
    if proc.stdout is None and proc.stderr is None:
        return ""
    try:
        out, err = proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return ""
    return (out or "")[-chars:] + (err or "")[-chars:]


def stop(proc: subprocess.Popen[str], timeout: float = 30.0) -> tuple[str, str]:
    """SIGTERM, then wait (``timeout`` seconds) and collect what the process wrote; killed when it
    hangs. A process started with ``group=True`` is signalled with its whole group: the shell and
    what it started, or a vLLM and its engine. Stopping a stopped process again gives empty output
    (and kills what its group left behind)."""
    group = proc.pid in _GROUP_LEADERS

    def signal_it(sig: int) -> None:
        with suppress(ProcessLookupError):  # (a group outlives its leader while a member is left)
            if group:
                os.killpg(proc.pid, sig)
            elif proc.poll() is None:
                proc.send_signal(sig)

    if proc.returncode is not None and (proc.stderr is None or proc.stderr.closed):
        if group:
            signal_it(signal.SIGKILL)
        return "", ""
    signal_it(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        signal_it(signal.SIGKILL)
        out, err = proc.communicate()
    return out or "", err or ""


@contextmanager
def process(
    argv: list[str],
    *,
    ready: str | Callable[[], bool] | None = None,
    ready_s: float = 60.0,
    logs: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    quiet: bool = False,
    group: bool = False,
    pass_fds: tuple[int, ...] = (),
) -> Iterator[subprocess.Popen[str]]:
    """Run ``argv``; with ``ready`` (see :func:`wait_up`), wait up to ``ready_s`` until it holds.
    Output is piped, written to ``logs``.stdout / .stderr (long-running servers, and tests that
    search everything a run wrote), or with ``quiet`` discarded (a browser, a load worker). ``env``
    is added to this process's environment. ``group``: the process leads a process group of its own,
    which is stopped with it. ``pass_fds`` stay open in it. Stopped on leaving."""
    with ExitStack() as files:
        outs: tuple[Any, Any]
        if quiet:
            outs = (subprocess.DEVNULL, subprocess.DEVNULL)
        elif logs is None:
            outs = (subprocess.PIPE, subprocess.PIPE)
        else:
            outs = (
                files.enter_context(logs.with_suffix(".stdout").open("w")),
                files.enter_context(logs.with_suffix(".stderr").open("w")),
            )
        proc = subprocess.Popen(
            argv,
            stdout=outs[0],
            stderr=outs[1],
            text=True,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=group,
            pass_fds=pass_fds,
        )
        if group:
            _GROUP_LEADERS.add(proc.pid)
        try:
            if ready is not None:
                wait_up(ready, ready_s, proc=proc, logs=logs)
            yield proc
        finally:
            stop(proc)
            _GROUP_LEADERS.discard(proc.pid)


@contextmanager
def running(
    *args: str,
    ready: str | Callable[[], bool] | None = None,
    ready_s: float = 60.0,
    logs: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[str]]:
    """``wirecheck ARGS`` as a process, yielded (see :func:`process`)."""
    argv = [sys.executable, "-m", "wirecheck", *args]
    with process(argv, ready=ready, ready_s=ready_s, logs=logs, env=env) as proc:
        yield proc


@contextmanager
def mitmdump(upstream: str, port: int, *options: str) -> Iterator[subprocess.Popen[str]]:
    """A real mitmdump in reverse mode in front of ``upstream`` on ``127.0.0.1:port``, with wirecheck's
    addon loaded (``options``: its ``--set`` lines and any other flags), once it answers."""
    argv = [str(MITMDUMP), "-q", "--mode", f"reverse:{upstream}", "--listen-host", "127.0.0.1"]
    with process(
        [*argv, "-p", str(port), "-s", str(ADDON), *options], ready=f"http://127.0.0.1:{port}/health"
    ) as proc:
        yield proc


def dual_tap(
    gateway: int, caller: int, *, engine_upstream: str, engine: int, store: str, admin: int
) -> list[str]:
    """``wirecheck proxy``'s arguments for both taps around a gateway: callers on ``caller``, the
    gateway at ``gateway``, the engine tap on ``engine`` in front of ``engine_upstream``."""
    return [
        "proxy",
        "--upstream",
        f"http://127.0.0.1:{gateway}",
        "--listen",
        f"127.0.0.1:{caller}",
        "--engine-upstream",
        engine_upstream,
        "--engine-listen",
        f"127.0.0.1:{engine}",
        "--store",
        store,
        "--settle",
        "0.2",
        "--admin",
        f"127.0.0.1:{admin}",
    ]


@contextmanager
def sim_behind_gateway(
    sim: int, gateway: int, engine: int, gateway_faults: str = "reasoning_dropped"
) -> Iterator[None]:
    """``wirecheck sim`` on ``sim`` (it calls a tool the caller did not declare) and ``wirecheck
    sim-gateway`` on ``gateway`` with ``gateway_faults`` (it drops reasoning), forwarding to port
    ``engine``: the sim's own port, or the port where the test puts the engine tap. Both answer
    when this yields."""
    with (
        running(
            "sim",
            "--port",
            str(sim),
            "--time-scale",
            "0.001",
            "--faults",
            "model.undeclared_tool",
            ready=f"http://127.0.0.1:{sim}/health",
        ),
        running(
            "sim-gateway",
            "--upstream",
            f"http://127.0.0.1:{engine}",
            "--port",
            str(gateway),
            "--faults",
            gateway_faults,
            ready=f"http://127.0.0.1:{gateway}/health",
        ),
    ):
        yield


@contextmanager
def gateway_process(upstream: str, faults: str = "") -> Iterator[str]:
    """``wirecheck sim-gateway`` in front of ``upstream``, with ``faults``, in a process of its own
    (as gateways run): yields its URL once it answers. Served from a thread of a test's process, it
    shares the GIL with the taps in that process and, on a loaded machine, passes a stream on in
    bursts, which the contracts rightly read as a buffering gateway."""
    port = free_port()
    with running(
        "sim-gateway",
        *("--upstream", upstream, "--port", str(port)),
        *(("--faults", faults) if faults else ()),
        ready=f"http://127.0.0.1:{port}/health",
    ):
        yield f"http://127.0.0.1:{port}"


def run_to_end(
    cmd: list[str], *, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``cmd`` run once to the end: its exit code, stdout and stderr (a non-zero exit is the
    caller's to judge; only ``timeout`` raises)."""
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def run_wirecheck(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """``wirecheck ARGS`` run once to the end, as a user runs it: its exit code, stdout and stderr."""
    return run_to_end([sys.executable, "-m", "wirecheck", *args], timeout=timeout)


def run_dev(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``./dev ARGS`` in the repository root, run once to the end: how a tier installs what it needs
    (LiteLLM, the CPU build of vLLM) the way a fresh machine does."""
    root = Path(__file__).resolve().parents[2]
    return run_to_end([str(root / "dev"), *args], timeout=timeout, cwd=root)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One request (head, body) off a raw connection; the body is Content-Length framed (the proxy
    always sends one)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head, await reader.readexactly(length)


def until_closed(handle: Handler) -> Handler:
    """A raw connection's handler that ends quietly when the peer goes away (the proxy closing a
    connection is normal), and always closes its side."""

    async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handle(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return run


@contextmanager
def raw_server(handle: Handler) -> Iterator[str]:
    """An asyncio TCP server on loopback in its own thread and loop, for upstreams that misbehave on
    the wire in ways a well-behaved ASGI app cannot; ``handle`` owns each connection (see
    :func:`until_closed`)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        server = await asyncio.start_server(until_closed(handle), "127.0.0.1", 0)
        box["port"] = server.sockets[0].getsockname()[1]
        box["server"] = server
        started.set()
        async with server:
            await server.serve_forever()

    def run() -> None:
        try:
            with suppress(asyncio.CancelledError):
                loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10), "raw server did not start"
    try:
        yield f"http://127.0.0.1:{box['port']}"
    finally:

        def stop() -> None:
            for task in asyncio.all_tasks(loop):
                task.cancel()

        loop.call_soon_threadsafe(stop)
        thread.join(timeout=10)
