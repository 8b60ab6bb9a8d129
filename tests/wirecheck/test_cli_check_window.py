"""``wirecheck check`` reads a capture once and holds a window of it: the findings are the whole
capture's whatever the file's order and format, and what the window did is said."""

from __future__ import annotations

import dataclasses
import json
import random
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.contracts.rule_cases import SINGLE
from tests.contracts.rule_cases_pairs import PAIRS
from tests.support.wire import completion, exchange, req
from wirecheck.cli import main
from wirecheck.contracts import CheckConfig, Exchange, check_exchanges, write_exchanges
from wirecheck.replay import _sort

BASE = datetime(2026, 3, 1, tzinfo=UTC).timestamp()


def _capture() -> list[Exchange]:
    """Every rule case, failing and passing, ten seconds apart (their own spacing kept), in a
    shuffled order."""
    out: list[Exchange] = []
    for k, (bad, good, _) in enumerate({**SINGLE, **PAIRS}.values()):
        for side, make in enumerate((bad, good)):
            exs = make()
            first = min((e.started_epoch for e in exs if e.started_epoch is not None), default=0.0)
            for j, ex in enumerate(exs):
                t = ex.started_epoch
                at = BASE + (2 * k + side) * 10 + (t - first if t is not None else j / 1000)
                out.append(
                    dataclasses.replace(
                        ex, id=f"c{k}-{side}-{ex.id}", started_at=datetime.fromtimestamp(at, UTC).isoformat()
                    )
                )
    random.Random(11).shuffle(out)
    return out


def _write(path: Path, exs: list[Exchange]) -> Path:
    with path.open("w") as fh:
        write_exchanges(exs, fh)
    return path


@pytest.mark.parametrize("run_bytes", [None, 20_000], ids=["in-memory", "runs-on-disk"])
def test_a_shuffled_capture_gets_the_whole_captures_findings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, run_bytes: int | None
) -> None:
    if run_bytes is not None:
        monkeypatch.setattr(_sort, "RUN_BYTES", run_bytes)
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    exs = _capture()
    path = _write(tmp_path / "cap.jsonl", exs)
    whole = check_exchanges(exs, CheckConfig(direct=True))
    assert main(["check", str(path), "--direct", "--format", "json", "--window", "64"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["findings"] == [f.to_dict() for f in whole.findings]
    assert out["exchanges"] == whole.exchanges
    assert "window" not in out["summary"]  # nothing cut, nothing late
    assert [p.name for p in tmp_path.iterdir()] == ["cap.jsonl"]  # no sorted run left behind


def test_a_dense_capture_says_what_the_window_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    at = datetime.fromtimestamp(BASE, UTC).isoformat()
    exs = [
        dataclasses.replace(exchange(req(), completion()), id=f"x{i}", tap="caller", started_at=at)
        for i in range(30)
    ]
    path = _write(tmp_path / "dense.jsonl", exs)
    assert main(["check", str(path), "--window", "5", "--format", "json"]) == 0
    got = capsys.readouterr()
    assert json.loads(got.out)["summary"]["window"]["cut"] > 0
    assert "--window raises the limit" in got.err
    assert main(["check", str(path), "--window", "5"]) == 0
    assert "judged before every exchange that might pair" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_window_below_one_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path = _write(tmp_path / "one.jsonl", [exchange(req(), completion())])
    assert main(["check", str(path), "--window", value]) == 2
    assert "--window must be positive" in capsys.readouterr().err


def test_an_unwritable_temporary_folder_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sort, "RUN_BYTES", 10_000)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    path = _write(tmp_path / "cap.jsonl", _capture())
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cannot write to the temporary folder" in err and "TMPDIR" in err
    assert "Traceback" not in err


def test_html_and_junit_still_see_every_exchange(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    exs = _capture()
    path = _write(tmp_path / "cap.jsonl", exs)
    main(["check", str(path), "--direct", "--format", "junit", "--window", "4"])
    assert capsys.readouterr().out.count("<testcase ") == len(exs)
    main(
        ["check", str(path), "--direct", "--format", "html", "--window", "4", "-o", str(tmp_path / "r.html")]
    )
    html = (tmp_path / "r.html").read_text()
    assert all(ex.id in html for ex in exs[:20])
