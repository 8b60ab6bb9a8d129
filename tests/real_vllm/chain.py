"""The real_vllm tier's servers: install vLLM's CPU build, run the fleet in the background, read what
it publishes.

The fleet (scripts/realvllm/fleet.py) starts one real vLLM per family a few at a time and writes
each one's URL (or why there is none) to ``STATE/SLOT.json``; when the tier is done with a family
it touches ``STATE/SLOT.done`` and the fleet starts the next one. ``./dev test`` may start the fleet
itself, first thing, and hand its folder over in WIRECHECK_REAL_VLLM_STATUS; otherwise the chain
here does it as soon as collection ends (install, then the fleet), so the install and the first
starts overlap the rest of the suite either way.

If the install or a start fails, the tier FAILS, it never skips: CI must not pass without a real
vLLM. WIRECHECK_REAL_VLLM_URL runs the default family's tests against a server already running.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import run_dev

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900
# how long a test waits for its family's server: the install, then the starts ahead of it on a
# busy machine
WAIT_TIMEOUT_S = INSTALL_TIMEOUT_S + 600
DEFAULT_SLOT = "kimi_k2"
#: the environment variable naming the state folder of a fleet that ./dev test started
STATE_ENV = "WIRECHECK_REAL_VLLM_STATUS"


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


def fleet_command(state: Path, *, ahead: int = 3) -> list[str]:
    """The fleet over every slot; ./dev test runs the same command."""
    script = ROOT / "scripts" / "realvllm" / "fleet.py"
    return [
        str(ROOT / ".venv-vllm" / "bin" / "python"),
        str(script),
        "--state",
        str(state),
        "--ahead",
        str(ahead),
    ]


class Chain:
    """Install once, then run the fleet, in a daemon thread; an install failure is published as
    every slot's outcome (``failed.json``) so that no test waits for nothing."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.lock = threading.Lock()
        self.stopping = False
        self.fleet: subprocess.Popen[bytes] | None = None
        self.thread = threading.Thread(target=self._run, name="real-vllm-start", daemon=True)

    def start(self) -> None:
        (self.state / "started").touch()
        self.thread.start()

    def _run(self) -> None:
        error = install()
        with self.lock:  # never start the fleet after stop() has looked
            if self.stopping:
                error = error or "the test session ended before the fleet started"
            elif error is None:
                with (self.state / "fleet.log").open("wb") as log:
                    self.fleet = subprocess.Popen(
                        fleet_command(self.state), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT
                    )
        if error is not None:
            (self.state / "failed.json").write_text(json.dumps({"error": error}))

    def stop(self) -> None:
        """Stop the fleet (it stops its servers); an install still under way finishes on its own."""
        with self.lock:
            self.stopping = True
            fleet = self.fleet
        (self.state / "stop").touch()
        if fleet is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                fleet.wait(60)
            if fleet.poll() is None:
                fleet.terminate()
                fleet.wait(30)


CHAIN = pytest.StashKey[Chain]()
STATUS = pytest.StashKey[Path]()


def status_dir(config: pytest.Config) -> Path:
    """The fleet's state folder: ./dev test's, or one made by this process."""
    if STATUS not in config.stash:
        given = os.environ.get(STATE_ENV)
        config.stash[STATUS] = Path(given) if given else Path(tempfile.mkdtemp(prefix="wirecheck-real-vllm-"))
    return config.stash[STATUS]


def start_chain(config: pytest.Config) -> None:
    """Called from tests/real_vllm/conftest.py once the tier is collected. Nothing to start when
    ./dev test runs the fleet or a server is given."""
    if (
        CHAIN in config.stash
        or config.option.collectonly
        or os.environ.get(STATE_ENV)
        or os.environ.get("WIRECHECK_REAL_VLLM_URL")
    ):
        return
    chain = config.stash[CHAIN] = Chain(status_dir(config))
    chain.start()


def stop_chain(config: pytest.Config) -> None:
    if chain := config.stash.get(CHAIN, None):
        chain.stop()


def slot(config: pytest.Config, name: str) -> dict[str, Any]:
    """The published outcome of a slot, waited for; fails the test when there is no server."""
    status = status_dir(config)
    (status / f"{name}.wanted").touch()
    t0 = time.monotonic()
    while not (status / f"{name}.json").exists():
        if (status / "failed.json").exists():
            pytest.fail(json.loads((status / "failed.json").read_text())["error"], pytrace=False)
        waited = time.monotonic() - t0
        if waited > 60 and not (status / "started").exists() and not os.environ.get(STATE_ENV):
            pytest.fail(f"the real vLLM chain never started (nothing in {status})", pytrace=False)
        if waited > WAIT_TIMEOUT_S:
            pytest.fail(
                f"the real vLLM {name!r} was not ready in {WAIT_TIMEOUT_S} s ({status})", pytrace=False
            )
        time.sleep(0.5)
    outcome: dict[str, Any] = json.loads((status / f"{name}.json").read_text())
    if outcome["error"]:
        pytest.fail(f"real vLLM {name!r}: {outcome['error']}", pytrace=False)
    return outcome


def done(config: pytest.Config, name: str) -> None:
    """The tier is done with this slot: the fleet stops its server and starts the next one."""
    (status_dir(config) / f"{name}.done").touch()


def fleet_report(config: pytest.Config) -> dict[str, Any] | None:
    path = status_dir(config) / "fleet.json"
    return json.loads(path.read_text()) if path.exists() else None
