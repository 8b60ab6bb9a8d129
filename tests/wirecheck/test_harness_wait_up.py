"""The test harness's readiness wait: a process that never comes up fails the test with what it
knows (how the process ended), whether or not its output was kept in log files."""

from __future__ import annotations

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
    assert ("going" in str(err.value)) is kept  # the end of its log, where it wrote one
