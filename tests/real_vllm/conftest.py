"""The real vLLM servers (the CPU build, tiny local model) every test of the real_vllm tier shares.

scripts/realvllm/servers.py starts them in the background and writes where each is (or why it is
not) into a status folder: ``./dev test`` runs it at its beginning, so the install and the starts
(minutes on a clean 2-core machine) overlap the other tiers, and hands the folder over in
``WIRECHECK_REAL_VLLM_STATUS``. A plain ``pytest tests/real_vllm`` starts it here instead.

If the install or a start fails, the tests that need that server FAIL, they never skip: CI must not
pass without a real vLLM. Set WIRECHECK_REAL_VLLM_URL to run the tier against a server already
running (the prefix-caching-off test then needs WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL too).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the install, then every start, on a busy machine
WAIT_TIMEOUT_S = 900 + 4 * 240


@pytest.fixture(scope="session")
def real_vllm_status(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The folder scripts/realvllm/servers.py writes each server's outcome into."""
    if given := os.environ.get("WIRECHECK_REAL_VLLM_STATUS"):
        yield Path(given)
        return
    status = tmp_path_factory.mktemp("real_vllm")
    launcher = [sys.executable, str(ROOT / "scripts/realvllm/servers.py"), "--status", str(status)]
    with subprocess.Popen(launcher, stdin=subprocess.PIPE, cwd=ROOT) as proc:
        try:
            yield status
        finally:
            assert proc.stdin is not None
            proc.stdin.close()  # the lifeline: the launcher stops its servers
            proc.wait(timeout=120)


def server_url(status: Path, name: str) -> str:
    """The URL of server ``name`` once every start has ended (a vLLM starting takes both cores for a
    minute, which would turn the tier's cache checks into noise), or the test fails with why not."""
    t0 = time.monotonic()
    while not (status / "ready").exists():
        if time.monotonic() - t0 > WAIT_TIMEOUT_S:
            pytest.fail(
                f"the real vLLM servers were not ready in {WAIT_TIMEOUT_S} s ({status})", pytrace=False
            )
        time.sleep(0.5)
    outcome = json.loads((status / f"{name}.json").read_text())
    if outcome["error"]:
        pytest.fail(outcome["error"], pytrace=False)
    return str(outcome["url"])


def _url(request: pytest.FixtureRequest, name: str, env: str) -> str:
    if url := os.environ.get(env):
        return url
    if os.environ.get("WIRECHECK_REAL_VLLM_URL"):
        pytest.fail(f"WIRECHECK_REAL_VLLM_URL is set: set {env} too for this test", pytrace=False)
    return server_url(request.getfixturevalue("real_vllm_status"), name)


@pytest.fixture(scope="session")
def real_vllm(request: pytest.FixtureRequest) -> str:
    """Base URL of the shared real vLLM (kimi_k2 family, prefix caching on)."""
    return _url(request, "default", "WIRECHECK_REAL_VLLM_URL")


@pytest.fixture(scope="session")
def real_vllm_no_prefix_caching(request: pytest.FixtureRequest) -> str:
    """Base URL of a second real vLLM, started with --no-prefix-caching."""
    return _url(request, "no_prefix_caching", "WIRECHECK_REAL_VLLM_NO_PREFIX_CACHING_URL")
