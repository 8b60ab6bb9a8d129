"""The real_vllm tier's servers: install, start in the background, publish the outcome.

See tests/real_vllm/conftest.py for how the tier uses them."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.servers import process, run_dev, tail

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 240
# how long a test waits for the background chain: install, then two starts, on a busy machine
WAIT_TIMEOUT_S = INSTALL_TIMEOUT_S + 2 * START_TIMEOUT_S


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
        proc = run_dev("vllm-install", timeout=INSTALL_TIMEOUT_S)
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
    """One ``serve.py`` process, leading a process group of its own (the API server, its engine and
    workers stop together); ``wait_up`` polls /health."""

    def __init__(self, flags: tuple[str, ...], log: Path) -> None:
        self.flags, self.log = flags, log
        self.port = quiet_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [str(ROOT / ".venv-vllm/bin/python"), str(ROOT / "scripts/realvllm/serve.py")]
        self._stack = contextlib.ExitStack()
        self.proc = self._stack.enter_context(
            process([*cmd, "--port", str(self.port), *flags], cwd=ROOT, logs=log, group=True)
        )

    def wait_up(self) -> str | None:
        """None once /health answers 200, else why it never will."""
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                return f"vLLM exited with {self.proc.returncode} while starting:\n{tail(self.log, 4000)}"
            if time.monotonic() - t0 > START_TIMEOUT_S:
                return f"vLLM did not answer /health in {START_TIMEOUT_S} s:\n{tail(self.log, 4000)}"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    print(
                        f"real_vllm: server {' '.join(self.flags) or '(defaults)'} up in {time.monotonic() - t0:.1f} s"
                    )
                    return None
            time.sleep(0.5)

    def stop(self) -> None:
        # SIGTERM to the group, SIGKILL after 30 s (tests/support/servers.py's stop)
        self._stack.close()


@dataclass
class Slot:
    """A server the background chain promises; when its start ends, ``STATUS_DIR/NAME.json`` says
    its URL or why there is none (a file, so that pytest-xdist's workers can read what the
    controller's chain did)."""

    name: str
    flags: tuple[str, ...]

    def publish(self, status: Path, url: str | None, error: str | None) -> None:
        tmp = status / f".{self.name}.json"
        tmp.write_text(json.dumps({"url": url, "error": error}))
        os.replace(tmp, status / f"{self.name}.json")


SLOTS = (Slot("default", ()), Slot("no_prefix_caching", ("--no-prefix-caching",)))


class Chain:
    """Install once, then start the tier's servers one after the other, in a daemon thread; each
    start's outcome goes to ``status`` (``Slot.publish``)."""

    def __init__(self, status: Path) -> None:
        self.status = status
        self.servers: list[Server] = []
        self.lock = threading.Lock()
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="real-vllm-start", daemon=True)

    def start(self) -> None:
        (self.status / "started").touch()
        self.thread.start()

    def _run(self) -> None:
        error = install()
        for slot in SLOTS:
            server = None
            if error is None:
                with self.lock:  # never start a server after stop() has looked
                    if not self.stopping:
                        server = Server(slot.flags, self.status / f"{slot.name}.log")
                        self.servers.append(server)
            if server is None:
                slot.publish(self.status, None, error or "the test session ended before this server started")
            else:
                why = server.wait_up()
                slot.publish(self.status, server.url if why is None else None, why)

    def stop(self) -> None:
        """Stop every server started; an install still under way is left to finish on its own."""
        with self.lock:
            self.stopping = True
            servers = list(self.servers)
        for server in servers:
            server.stop()


CHAIN = pytest.StashKey[Chain]()
STATUS = pytest.StashKey[Path]()


def status_dir(config: pytest.Config) -> Path:
    """Where the chain's outcome is written: made by this process, or (an xdist worker) the
    controller's, handed over in ``workerinput``."""
    if STATUS not in config.stash:
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            config.stash[STATUS] = Path(workerinput["real_vllm_status"])
        else:
            config.stash[STATUS] = Path(tempfile.mkdtemp(prefix="wirecheck-real-vllm-"))
    return config.stash[STATUS]


def start_chain(config: pytest.Config) -> None:
    """Called from tests/conftest.py once the tier is known to be selected: by this process when it
    runs the tests, or by pytest-xdist's controller (which collects nothing and outlives the workers)."""
    if CHAIN in config.stash or config.option.collectonly or os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        return
    chain = config.stash[CHAIN] = Chain(status_dir(config))
    chain.start()


def stop_chain(config: pytest.Config) -> None:
    if chain := config.stash.get(CHAIN, None):
        chain.stop()


def published(config: pytest.Config) -> bool:
    """Every server's start has ended (up or failed), or the tier uses servers already running."""
    if os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        return True
    status = status_dir(config)
    return all((status / f"{s.name}.json").exists() for s in SLOTS)


def wait_for(config: pytest.Config, slot: str, env: str) -> str:
    if url := os.environ.get(env):
        return url
    if os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        pytest.fail(f"WIRECHECK_REAL_VLLM_URL is set: set {env} too for this test", pytrace=False)
    status = status_dir(config)
    # wait for every start, not only this one: a vLLM starting takes both cores for a minute, which
    # turns the tier's timing checks (prefill time falls with cached tokens) into noise
    t0 = time.monotonic()
    while not all((status / f"{s.name}.json").exists() for s in SLOTS):
        waited = time.monotonic() - t0
        if waited > 60 and not (status / "started").exists():
            pytest.fail(f"the real vLLM chain never started (nothing in {status})", pytrace=False)
        if waited > WAIT_TIMEOUT_S:
            pytest.fail(
                f"the real vLLM servers were not ready in {WAIT_TIMEOUT_S} s ({status})", pytrace=False
            )
        time.sleep(0.5)
    outcome = json.loads((status / f"{slot}.json").read_text())
    if outcome["error"]:
        pytest.fail(outcome["error"], pytrace=False)
    return str(outcome["url"])
