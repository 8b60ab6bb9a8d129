"""The known-bug catalogue: its entries hold together, the version on the wire is read, and a finding
that an entry explains names it in every report format."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from tests.support import wire
from tests.support.wire import call, completion, exchange, message, req, tool_req
from wirecheck.cli import main
from wirecheck.contracts import (
    KNOWN_BUGS,
    CheckConfig,
    Exchange,
    Fault,
    build_view,
    check_exchanges,
    render_html,
    render_json,
    render_junit,
    render_text,
    rules,
    server_version,
    write_exchanges,
)
from wirecheck.contracts._bugs import parse_version, version_in_range

#: rule ids the catalogue names before the rule exists: the conversation rule that judges the answer's
#: tool-call ids against the history (the Responses / Messages and conversation work adds it)
_PLANNED = {"tool-call-id-reused"}


def test_catalogue_entries_hold_together() -> None:
    assert len(KNOWN_BUGS) >= 30
    ids = [b.id for b in KNOWN_BUGS]
    assert len(ids) == len(set(ids))
    registered = [r.id for r in rules()]
    for b in KNOWN_BUGS:
        assert re.match(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|blob)/", b.url), b.id
        assert b.party != Fault.UNKNOWN and b.rules and b.title and b.shape, b.id
        for pattern in b.rules:
            assert pattern in _PLANNED or any(fnmatchcase(r, pattern) for r in registered), (b.id, pattern)
        if b.since and b.fixed_in:
            assert parse_version(b.since) < parse_version(b.fixed_in), b.id  # type: ignore[operator]


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("0.26.1rc1.dev1177+ga9a17e709", "0.26.1rc1"),
        ("0.26.1.dev3", "0.26.1rc1"),
        ("0.11.1rc6", "0.11.1"),
        ("0.11.1", "0.11.1.post1"),
        ("0.9.2", "0.11.0"),
        ("1.81.12", "1.82.3"),
    ],
)
def test_versions_order_as_releases_do(low: str, high: str) -> None:
    assert parse_version(low) < parse_version(high)  # type: ignore[operator]


def test_version_range_is_since_up_to_not_including_the_fix() -> None:
    assert version_in_range("0.18.0", None, "0.19.0") is True
    assert version_in_range("0.19.0", None, "0.19.0") is False
    assert version_in_range("0.12.0", "0.13.0", None) is False
    assert version_in_range("nightly", None, "0.19.0") is None


def _sse(request: dict[str, Any], objs: list[Any], **kw: Any) -> Exchange:
    return exchange({**request, "stream": True}, wire.frames(*objs), stream=True, **kw)


def test_server_version_is_read_off_the_wire_or_given() -> None:
    plain = build_view(exchange(req(), completion()))
    assert server_version(plain) == "0.33.0"  # system_fingerprint vllm-0.33.0-tp8-...
    streamed = build_view(_sse(req(), wire.text_stream("hi", usage=True)))
    assert server_version(streamed) == "0.33.0"
    body = completion()
    body["system_fingerprint"] = None  # before 0.20 vLLM wrote none
    old = build_view(exchange(req(), body))
    assert server_version(old) is None
    assert server_version(old, configured="0.18.0") == "0.18.0"
    old.ex.extra["server_version"] = "0.17.1"
    assert server_version(old) == "0.17.1"
    ex = exchange(req(), completion())
    assert ex.response is not None
    ex.response.headers.append(("x-litellm-version", "1.81.12"))
    assert server_version(build_view(ex), "litellm") == "1.81.12"


GEMMA = "google/gemma-4-31b-it"


def _tool_choice_none(version: str | None) -> Exchange:
    """Parsed calls returned although tool_choice is none (vLLM PR #46875, fixed in 0.25.0)."""
    body = completion(
        message(
            None, tool_calls=[call("get_weather", '{"city": "Oslo"}', id="chatcmpl-tool-0123456789abcdef")]
        ),
        "tool_calls",
        model=GEMMA,
    )
    body["system_fingerprint"] = f"vllm-{version}-1a2b3c4d" if version else None
    return exchange(tool_req(model=GEMMA, tool_choice="none"), body)


def _finding(exs: list[Exchange], rule: str, **cfg: Any) -> Any:
    res = check_exchanges(exs, CheckConfig(**cfg))
    [f] = [f for f in res.findings if f.rule == rule]
    return f


def test_an_affected_version_names_the_bug_and_takes_its_party() -> None:
    f = _finding([_tool_choice_none("0.24.0")], "tool-choice-violated", direct=True)
    assert f.fault == "parser"
    assert f.known_bug["id"] == "vllm-46875" and f.known_bug["status"] == "affected"
    assert f.known_bug["fixed_in"] == "0.25.0" and "0.24.0" in f.message


def test_a_fixed_version_is_not_explained_by_the_bug() -> None:
    # the fault is the parser's all the same: only a parser fills tool_calls, and vLLM strips them
    # under tool_choice none (parser/abstract_parser.py), whatever its version (_evidence.py)
    f = _finding([_tool_choice_none("0.32.0")], "tool-choice-violated", direct=True)
    assert f.known_bug is None and f.fault == "parser"


def test_an_unknown_version_names_the_bug_conditionally_and_keeps_the_fault() -> None:
    f = _finding([_tool_choice_none(None)], "tool-choice-violated", direct=True)
    assert f.fault == "parser"
    assert f.known_bug["status"] == "version-unknown"
    assert "if this server is older than 0.25.0" in f.message
    given = _finding([_tool_choice_none(None)], "tool-choice-violated", direct=True, server_version="0.23.0")
    assert given.known_bug["status"] == "affected" and given.fault == "parser"


def test_a_single_caller_tap_keeps_its_honest_unknown() -> None:
    f = _finding([_tool_choice_none("0.24.0")], "tool-choice-violated")  # engine tap
    assert f.fault == "parser"
    caller = _tool_choice_none("0.24.0")
    caller.tap = "caller"
    f = _finding([caller], "tool-choice-violated")
    assert f.fault == "unknown" and f.known_bug["id"] == "vllm-46875"


def test_a_bug_without_its_signature_on_the_wire_names_itself_but_moves_no_fault() -> None:
    # K2 Vendor Verifier: calls to undeclared tools are the model's; the entry names no bytes or
    # request of its own, so it annotates and leaves the rule's party
    body = completion(message(None, tool_calls=[call("rm_rf", "{}")]), "tool_calls")
    f = _finding([exchange(tool_req(), body)], "tool-call-undeclared", direct=True)
    assert f.fault == "model" and f.known_bug["id"] == "k2vv-schema-accuracy"


def test_every_report_format_names_the_bug(tmp_path: Path) -> None:
    exs = [_tool_choice_none("0.24.0")]
    res = check_exchanges(exs, CheckConfig(direct=True))
    url = "https://github.com/vllm-project/vllm/pull/46875"
    text = render_text(res)
    assert "known bug: vllm-46875 (parser, fixed in 0.25.0; this server (0.24.0) is affected)" in text
    [f] = [f for f in json.loads(render_json(res))["findings"] if f["rule"] == "tool-choice-violated"]
    assert f["known_bug"] == {
        "id": "vllm-46875",
        "url": url,
        "party": "parser",
        "fixed_in": "0.25.0",
        "status": "affected",
        "version": "0.24.0",
    }
    junit = ET.fromstring(render_junit(res))
    assert url in "".join(junit.itertext())
    html = render_html(res, exs)
    assert f'href="{url}"' in html
    p = tmp_path / "cap.jsonl"
    with p.open("w", encoding="utf-8") as fh:
        write_exchanges([_tool_choice_none(None)], fh)
    assert main(["check", str(p), "--direct", "--server-version", "0.24.0"]) == 1


def test_rules_known_bugs_lists_the_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "--known-bugs"]) == 0
    out = capsys.readouterr().out
    for b in KNOWN_BUGS:
        assert b.id in out and b.url in out
