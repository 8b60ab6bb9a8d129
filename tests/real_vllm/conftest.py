"""One real vLLM (the CPU build, tiny local model) for the whole real_vllm tier (issue 13).

The tier's servers start in the background as soon as collection ends, so their install and start
(minutes on a clean 2-core machine) overlap the rest of the suite instead of adding to it (the
12-minute budget of ``./dev test``); the tier's tests run last (tests/conftest.py orders them). The
background chain: install the pinned CPU build into .venv-vllm (``./dev vllm-install``: a no-op when its
stamp is current, and it waits on the install ``./dev test`` may already have begun), then start
``scripts/realvllm/serve.py`` with prefix caching on, then a second one with it off. Every test shares
those servers.

If the install or a start fails, the tier FAILS, it never skips: CI must not pass without a real
vLLM (issue 13). Set WIRECHECK_REAL_VLLM_URL to run the tier against a server already running (the
prefix-caching-off test then needs WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL too).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 240
# how long a test waits for the background chain: install, then two starts, on a busy machine
WAIT_TIMEOUT_S = INSTALL_TIMEOUT_S + 2 * START_TIMEOUT_S


def in_tier(item: pytest.Item) -> bool:
    return HERE in Path(str(item.fspath)).parents


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_tier(item):
            item.add_marker(pytest.mark.real_vllm)
            item.add_marker(pytest.mark.slow)


def quiet_port() -> int:
    """A free loopback port below the kernel's ephemeral range.

    A vLLM binds its port ~40 s after the port is chosen; a ``bind(0)`` elsewhere in the suite in
    that window may be handed the same ephemeral port. Ports under 32768 are never handed out that
    way (Linux's ip_local_port_range starts there)."""
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port in 20000-32000")


def install() -> str | None:
    """Run ``./dev vllm-install``; None when it worked, else what went wrong."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [str(ROOT / "dev"), "vllm-install"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"installing the CPU build of vLLM took over {INSTALL_TIMEOUT_S} s"
    if proc.returncode != 0:
        return (
            f"installing the CPU build of vLLM failed (rc {proc.returncode}); the real_vllm tier cannot run "
            f"without it:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    print(f"real_vllm: install step {time.monotonic() - t0:.1f} s")
    return None


class Server:
    """One ``serve.py`` process in its own process group; ``wait_up`` polls /health."""

    def __init__(self, flags: tuple[str, ...], log: Path) -> None:
        self.flags, self.log = flags, log
        self.port = quiet_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(ROOT / ".venv-vllm/bin/python"), str(ROOT / "scripts/realvllm/serve.py")]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*cmd, "--port", str(self.port), *flags],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_up(self) -> str | None:
        """None once /health answers 200, else why it never will."""
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                return (
                    f"vLLM exited with {self.proc.returncode} while starting:\n{self.log.read_text()[-4000:]}"
                )
            if time.monotonic() - t0 > START_TIMEOUT_S:
                return f"vLLM did not answer /health in {START_TIMEOUT_S} s:\n{self.log.read_text()[-4000:]}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    print(
                        f"real_vllm: server {' '.join(self.flags) or '(defaults)'} up in {time.monotonic() - t0:.1f} s"
                    )
                    return None
            time.sleep(0.5)

    def stop(self) -> None:
        # SIGTERM to the API server stops its engine and worker processes too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@dataclass
class Slot:
    """A server the background chain promises: its URL or the reason there is none."""

    flags: tuple[str, ...]
    done: threading.Event = field(default_factory=threading.Event)
    url: str | None = None
    error: str | None = None

    def get(self) -> str:
        if not self.done.wait(WAIT_TIMEOUT_S):
            pytest.fail(
                f"the real vLLM {' '.join(self.flags)} was not ready in {WAIT_TIMEOUT_S} s", pytrace=False
            )
        if self.error:
            pytest.fail(self.error, pytrace=False)
        assert self.url
        return self.url


class Chain:
    """Install once, then start the tier's servers one after the other, in a daemon thread."""

    def __init__(self) -> None:
        self.slots = {"default": Slot(()), "no_prefix_caching": Slot(("--no-prefix-caching",))}
        self.servers: list[Server] = []
        self.logs = Path(tempfile.mkdtemp(prefix="wirecheck-real-vllm-"))
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="real-vllm-start", daemon=True)

    def _run(self) -> None:
        error = install()
        for name, slot in self.slots.items():
            server = None
            if error is None:
                with self.lock:  # never start a server after stop() has looked
                    if not self.stopping:
                        server = Server(slot.flags, self.logs / f"{name}.log")
                        self.servers.append(server)
            if server is None:
                slot.error = error or "the test session ended before this server started"
            else:
                slot.error = server.wait_up()
                slot.url = server.url if slot.error is None else None
            slot.done.set()

    def stop(self) -> None:
        """Stop every server started; an install still under way is left to finish on its own."""
        with self.lock:
            self.stopping = True
            servers = list(self.servers)
        for server in servers:
            server.stop()


CHAIN = pytest.StashKey[Chain]()


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly or os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        return
    if any(in_tier(i) for i in session.items):
        chain = session.config.stash[CHAIN] = Chain()
        chain.thread.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if chain := session.config.stash.get(CHAIN, None):
        chain.stop()


def _url(config: pytest.Config, slot: str, env: str) -> str:
    if url := os.environ.get(env):
        return url
    if os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        pytest.fail(f"WIRECHECK_REAL_VLLM_URL is set: set {env} too for this test", pytrace=False)
    slots = config.stash[CHAIN].slots
    # wait for every start, not only this one: a vLLM starting takes both cores for a minute, which
    # turns the tier's timing checks (prefill time falls with cached tokens) into noise
    for other in slots.values():
        other.done.wait(WAIT_TIMEOUT_S)
    return slots[slot].get()


@pytest.fixture(scope="session")
def real_vllm(pytestconfig: pytest.Config) -> str:
    """Base URL of the shared real vLLM (kimi_k2 family, prefix caching on)."""
    return _url(pytestconfig, "default", "WIRECHECK_REAL_VLLM_URL")


@pytest.fixture(scope="session")
def real_vllm_no_prefix_caching(pytestconfig: pytest.Config) -> str:
    """Base URL of a second real vLLM, started with --no-prefix-caching."""
    return _url(pytestconfig, "no_prefix_caching", "WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL")
