"""The test harness's readiness wait: a process that never comes up fails the test with what it
knows (how the process ended, and the end of what it wrote), whether its output was kept in log
files or piped."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from tests.support.servers import process


@pytest.mark.parametrize("kept", [False, True])
def test_a_process_that_exits_before_it_is_up_fails_with_its_exit_code(tmp_path: Path, kept: bool) -> None:
    argv = [sys.executable, "-c", "import sys; print('going'); sys.exit(3)"]
    logs = tmp_path / "p" if kept else None
    failed = pytest.raises(AssertionError, match=r"did not come up: the process exited \(3\)")
    with failed as err, process(argv, ready=lambda: False, ready_s=30, logs=logs):
        pass
    assert "going" in str(err.value)  # the end of what it wrote: its log, or its pipes


def test_a_server_that_cannot_take_its_port_says_so() -> None:
    """The proxy refuses a port that is taken with a clear error on stderr: the failure quotes it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        argv = [sys.executable, "-m", "wirecheck", "proxy", "--upstream", "http://127.0.0.1:1"]
        argv += ["--listen", f"127.0.0.1:{port}", "--admin", "off", "--no-store"]
        failed = pytest.raises(AssertionError, match=r"did not come up: the process exited \(2\)")
        with failed as err, process(argv, ready=lambda: False, ready_s=60):
            pass
    assert f"cannot listen on 127.0.0.1:{port}" in str(err.value), err.value
