"""``wirecheck check`` and ``wirecheck rules`` as a user runs them (a real subprocess where it matters)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.servers import run_wirecheck
from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.cli import EXAMPLE, main
from wirecheck.contracts import write_exchanges


def capture(tmp_path: Path, *exs: object, name: str = "cap.jsonl") -> Path:
    p = tmp_path / name
    with p.open("w") as fh:
        write_exchanges(exs, fh)  # type: ignore[arg-type]
    return p


def test_clean_capture_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = capture(tmp_path, exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls")))
    assert main(["check", str(p), "--direct"]) == 0
    assert "1 exchange(s), 0 finding(s)" in capsys.readouterr().out


def test_error_finding_exits_1_and_json_has_the_documented_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = capture(
        tmp_path,
        exchange(
            tool_req(),
            completion(message(None, tool_calls=[call("rm_rf", "{}")]), "tool_calls"),
            id="x1",
            tap="caller",
        ),
    )
    assert main(["check", str(p), "--format", "json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["exchanges"] == 1
    [f] = out["findings"]
    # known_bug: the catalogue entry that explains the finding (a K2 call to an undeclared tool, on a
    # server whose system_fingerprint says 0.33.0)
    assert set(f) == {"exchange_id", "tap", "rule", "severity", "fault", "message", "evidence", "known_bug"}
    assert (f["known_bug"]["id"], f["known_bug"]["status"]) == ("k2vv-schema-accuracy", "affected")
    assert (f["exchange_id"], f["rule"], f["severity"]) == ("x1", "tool-call-undeclared", "error")
    assert out["summary"]["by_rule"] == {"tool-call-undeclared": 1}
    assert out["summary"]["by_fault"] == {"unknown": 1}  # engine tap missing for a caller tap
    assert main(["check", str(p), "--format", "json", "--direct"]) == 1
    assert json.loads(capsys.readouterr().out)["summary"]["by_fault"] == {"model": 1}


def test_junit_has_one_case_per_exchange(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls"), id="good")
    bad = exchange(
        tool_req(), completion(message(None, tool_calls=[call("rm_rf", "{}")]), "tool_calls"), id="bad"
    )
    p = capture(tmp_path, good, bad)
    assert main(["check", str(p), "--format", "junit", "--direct"]) == 1
    suite = ET.fromstring(capsys.readouterr().out.split("?>", 1)[1])
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["good"].find("failure") is None
    assert cases["bad"].find("failure").get("type") == "tool-call-undeclared"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("not json\n", "cap.jsonl:1: not JSON"),
        ('{"id": 1}\n', "cap.jsonl:1: exchange: missing key 'request'"),
    ],
)
def test_unusable_input_exits_2_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, needle: str
) -> None:
    p = tmp_path / "cap.jsonl"
    p.write_text(content)
    assert main(["check", str(p)]) == 2
    assert needle in capsys.readouterr().err


def test_missing_file_and_no_file_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(tmp_path / "none.jsonl")]) == 2
    assert "cannot open" in capsys.readouterr().err
    assert main(["check"]) == 2
    assert main(["check", "--example", "--disable", "no-such-rule"]) == 2


def test_two_taps_pair_automatically_by_correlation() -> None:
    # the shipped example is a dual-tap capture with one fault of each kind the README names
    out = run_wirecheck("check", "--example", "--format", "json")
    assert out.returncode == 1, out.stderr
    res = json.loads(out.stdout)
    got = sorted((f["rule"], f["fault"], f["tap"]) for f in res["findings"])
    assert got == [
        ("gateway-reasoning-dropped", "gateway", "caller"),
        ("gateway-stream-buffered", "gateway", "caller"),
        ("tool-call-args-invalid-json", "model", "engine"),
        ("tool-markup-in-content", "parser", "engine"),
    ]
    assert res["summary"]["pairs"] == 5
    assert EXAMPLE.exists()


def test_stdin_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "wirecheck", "check", "-", "--format", "json", "-o", str(out)],
        input=EXAMPLE.read_text(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert json.loads(out.read_text())["exchanges"] == 10


def test_rules_markdown_is_the_committed_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--markdown"]) == 0
    docs = Path(__file__).parents[2] / "docs" / "rules.md"
    assert capsys.readouterr().out == docs.read_text(), (
        "docs/rules.md is stale: run `wirecheck rules --markdown > docs/rules.md`"
    )
