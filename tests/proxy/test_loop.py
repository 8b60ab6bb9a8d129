"""The forwarding processes' event loop: uvloop's where installed, asyncio's otherwise or when asked,
and a clear error for a value that is neither."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from wirecheck.proxy import EVENT_LOOP_ENV, event_loop_name
from wirecheck.proxy._loop import run_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_uvloop_runs_the_forwarding_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop", reason="uvloop is a dependency where it builds (CPython, not Windows)")
    monkeypatch.delenv(EVENT_LOOP_ENV, raising=False)
    assert event_loop_name() == "uvloop"
    assert run_loop(_loop_module()).startswith("uvloop")


def test_asyncio_runs_it_when_asked_or_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EVENT_LOOP_ENV, "asyncio")
    assert event_loop_name() == "asyncio" and run_loop(_loop_module()).startswith("asyncio")
    monkeypatch.delenv(EVENT_LOOP_ENV)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as where it is not installed: import fails
    assert event_loop_name() == "asyncio" and run_loop(_loop_module()).startswith("asyncio")
    monkeypatch.setenv(EVENT_LOOP_ENV, "uvloop")
    with pytest.raises(ValueError, match="uvloop is not installed"):
        event_loop_name()


def test_another_value_stops_the_proxy_at_its_start() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "wirecheck", "proxy", "--upstream", "http://127.0.0.1:9", "--no-store"],
        env={**os.environ, EVENT_LOOP_ENV: "tokio"},
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{EVENT_LOOP_ENV}='tokio'" in proc.stderr
