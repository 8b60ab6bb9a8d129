"""Hostile model output in reports: whatever the model wrote, the text report
holds no control character that drives a terminal, the JUnit XML parses with a strict XML parser, the
JSON report reads back exactly, and every report can be written as UTF-8."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import (
    CheckConfig,
    Exchange,
    check_exchanges,
    render_html,
    render_json,
    render_junit,
    render_text,
    write_exchanges,
)

#: what terminals act on: screen clear, OSC title, OSC 8 hyperlink, CR overwrite, C1 CSI, bidi override
ATTACKS = [
    "\x1b[2J\x1b[H",
    "\x1b]0;owned\x07",
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    "all good\rERROR",
    "\x9b31m",
    "\u202egnp.exe",
    "\x00\x01\x08\x0b\x0c\x7f",
    "\ud800",
    "\udfff\ufffe\uffff",
]
# every control, DEL, C1 and lone surrogate, the bidi marks and XML's two non-characters
UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)

hostile_text = st.one_of(
    st.text(st.characters(exclude_categories=()), min_size=1, max_size=40),
    st.lists(st.sampled_from(ATTACKS), min_size=1, max_size=4).map("".join),
)


def _hostile_exchange(text: str, ex_id: str) -> Exchange:
    # the model calls an undeclared tool named with the hostile text, and says it as content too:
    # tool-call-undeclared quotes the name in its message and excerpt
    msg = message(text, tool_calls=[call(name=text, args=json.dumps({"q": text}))])
    return exchange(tool_req(), completion(msg, "tool_calls"), id=ex_id, tap="caller")


def _joined(s: str) -> str:
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _assert_safe_reports(exchanges: list[Exchange]) -> None:
    result = check_exchanges(exchanges, CheckConfig(direct=True))
    assert result.findings, "the hostile exchange must produce findings to render"
    text = render_text(result)
    text.encode("utf-8")  # no lone surrogate left
    assert not UNSAFE.findall(text.replace("\n", "")), "a control character reached the text report"
    xml = render_junit(result, exchange_ids=[e.id for e in exchanges])
    suite = ET.fromstring(xml.encode("utf-8"))  # expat: strict XML 1.0
    assert int(suite.get("failures", "0")) >= 1
    assert not UNSAFE.findall("".join(suite.itertext()).replace("\n", ""))
    back = json.loads(render_json(result).encode("utf-8"))
    # exact, up to JSON's own reading of an escaped surrogate pair as the one character it spells
    assert [f["exchange_id"] for f in back["findings"]] == [_joined(f.exchange_id) for f in result.findings]
    assert [f["message"] for f in back["findings"]] == [_joined(f.message) for f in result.findings]
    html = render_html(result, exchanges)
    html.encode("utf-8")
    assert "\x1b" not in html and "\r" not in html


@settings(max_examples=150, deadline=None)
@given(text=hostile_text, ex_id=hostile_text)
def test_reports_stay_inert_whatever_the_model_wrote(text: str, ex_id: str) -> None:
    _assert_safe_reports([_hostile_exchange(text, ex_id)])


def test_check_cli_escapes_terminal_sequences_and_writes_strict_junit(tmp_path: Path) -> None:
    capture = tmp_path / "hostile.jsonl"
    exchanges = [_hostile_exchange(a, f"ex-{i}-{a}") for i, a in enumerate(ATTACKS)]
    with capture.open("w", encoding="utf-8") as fh:
        write_exchanges(exchanges, fh)
    run = [sys.executable, "-m", "wirecheck", "check", str(capture)]
    out = subprocess.run(run, capture_output=True, timeout=120, check=False)
    assert out.returncode == 1, out.stderr.decode("utf-8", "replace")  # error findings, not a crash
    text = out.stdout.decode("utf-8")
    assert "\x1b" not in text and "\r" not in text and "\x9b" not in text and "\u202e" not in text
    assert "\\x1b]8;;https://evil.example/" in text  # shown, escaped, not acted on
    junit = tmp_path / "report.xml"
    out = subprocess.run(
        [*run, "--format", "junit", "-o", str(junit)], capture_output=True, timeout=120, check=False
    )
    assert out.returncode == 1, out.stderr.decode("utf-8", "replace")
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(len(ATTACKS))
    assert int(suite.get("failures", "0")) == len(ATTACKS)
