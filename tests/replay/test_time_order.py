"""``in_time_order``: any capture by start time, in one run's memory (sorted runs written out and
merged), byte for byte what was read, and a clear error where the runs cannot be written."""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.wire import chunk, completion, exchange, req, role_chunk, streamed
from wirecheck.contracts import ConfigError, Exchange, exchange_bytes
from wirecheck.replay import in_time_order


def _capture(n: int) -> list[Exchange]:
    """``n`` exchanges, plain and streamed (chunk times to the microsecond), a few sharing a start
    and a few without one, in a shuffled order."""
    rng = random.Random(3)
    out = []
    for i in range(n):
        if i % 3:
            ex = exchange(req(), completion(), id=f"x{i}")
        else:
            ex = streamed(req(stream=True), [role_chunk(), chunk({"content": f"part {i}"})], id=f"x{i}")
            assert ex.response is not None and ex.response.chunks
            ex.response.chunks[0].t_ms = 1.234567
        start = None if i % 17 == 0 else datetime.fromtimestamp(1.7e9 + rng.randrange(50), UTC).isoformat()
        out.append(dataclasses.replace(ex, started_at=start))
    rng.shuffle(out)
    return out


def _expected(exs: list[Exchange]) -> list[tuple[int, Exchange]]:
    def key(item: tuple[int, Exchange]) -> tuple[bool, float, int]:
        t = item[1].started_epoch
        return (t is not None, t or 0.0, item[0])

    return sorted(enumerate(exs), key=key)


def test_a_capture_in_memory_comes_sorted_with_its_positions() -> None:
    exs = _capture(200)
    got = list(in_time_order(exs))
    assert got == _expected(exs)
    # those without a time come first; ties keep the capture's order
    assert all(ex.started_at is None for _, ex in got[: sum(e.started_at is None for e in exs)])


def test_a_capture_larger_than_a_run_is_merged_from_runs_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exs = _capture(500)
    run = 10 * exchange_bytes(exs[0])  # about fifty runs
    seen_folders: list[list[str]] = []
    got = []
    for item in in_time_order(exs, run_bytes=run):
        if not seen_folders:
            seen_folders.append(os.listdir(tmp_path))
        got.append(item)
    # what comes back from disk is what was read, chunk times and bytes alike
    assert got == _expected(exs)
    [[folder]] = seen_folders
    assert folder.startswith("wirecheck-sort-")
    assert not os.listdir(tmp_path), "the runs are removed once the last exchange is read"


def test_runs_are_removed_when_the_reader_stops_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exs = _capture(100)
    it = in_time_order(exs, run_bytes=exchange_bytes(exs[0]))
    next(it)
    assert os.listdir(tmp_path)
    it.close()
    assert not os.listdir(tmp_path)


def test_a_small_capture_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no temporary folder at all unless a run is written: a check of a small capture works with none
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    exs = _capture(50)
    assert list(in_time_order(exs)) == _expected(exs)


def test_a_temporary_folder_that_cannot_be_written_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    exs = _capture(50)
    with pytest.raises(ConfigError, match=r"temporary folder .*missing.*TMPDIR"):
        list(in_time_order(exs, run_bytes=exchange_bytes(exs[0])))
    with pytest.raises(ConfigError, match="run_bytes must be positive"):
        list(in_time_order(exs, run_bytes=0))
