"""Hostile captures are read as streams with limits: every malformed file ends with exit 2 and a
message that names the entry (never a traceback, never exit 0 or 1), a line or an entry over the limit
is refused without being held, and reading a HAR costs the same memory for 2 000 entries as for
20 000 (it is parsed entry by entry)."""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.servers import run_wirecheck
from tests.support.wire import completion, exchange, tool_req
from wirecheck.record import Store
from wirecheck.replay import CaptureLimits, read_capture

URL = "http://127.0.0.1:8000/v1/chat/completions"


def _har(entries: list[object]) -> str:
    return json.dumps({"log": {"version": "1.2", "entries": entries}})


def _deep_flow(path: Path, depth: int = 50_000) -> None:
    """A tnetstring list nested ``depth`` levels (mitmproxy's flow format), written outside in."""
    totals = [3]  # b"0:]", the innermost empty list
    for _ in range(depth):
        totals.append(len(str(totals[-1])) + 1 + totals[-1] + 1)
    with path.open("wb") as fh:
        for k in range(depth, 0, -1):
            fh.write(b"%d:" % totals[k - 1])
        fh.write(b"0:]" + b"]" * depth)


def _store(path: Path, doc: str) -> None:
    store = Store(path, writer=True)
    store.write_now(
        [exchange(tool_req(), completion(), id="fine"), exchange(tool_req(), completion(), id="bad")]
    )
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE exchanges SET doc = ? WHERE id = 'bad'", (doc,))


#: file name -> (how it is made, what the message must say)
MALFORMED: dict[str, tuple[Callable[[Path], object], str]] = {
    "deep.mitm": (_deep_flow, "flow 0: "),
    "response-a-string.har": (
        lambda p: p.write_text(_har([{"request": {"method": "GET", "url": URL}, "response": "x"}])),
        "log.entries[0]: response: expected an object, got str",
    ),
    "headers-not-a-list.har": (
        lambda p: p.write_text(_har([{"request": {"method": "GET", "url": URL, "headers": 5}}])),
        "log.entries[0]: request.headers: expected a list",
    ),
    "base64-text-a-number.har": (
        lambda p: p.write_text(
            _har([{"request": {"url": URL, "postData": {"text": 5, "encoding": "base64"}}}])
        ),
        "log.entries[0]: request.postData.text: expected a string, got int",
    ),
    "chunk-not-an-object.har": (
        lambda p: p.write_text(_har([{"request": {"url": URL}, "_wirecheck": {"chunks": [1]}}])),
        "log.entries[0]: _wirecheck.chunks[0]: expected an object",
    ),
    "second-entry-without-url.har": (
        lambda p: p.write_text(_har([{"request": {"url": URL}}, {"request": {"method": "GET"}}])),
        "log.entries[1]: request.url: missing",
    ),
    "entry-nested-deep.har": (
        lambda p: p.write_text('{"log": {"entries": [' + "[" * 100_000 + "]" * 100_000 + "]}}"),
        "log.entries[0]",
    ),
    "status-true.har": (
        lambda p: p.write_text(_har([{"request": {"url": URL}, "response": {"status": True}}])),
        "log.entries[0]: response.status: expected a whole number, got bool",
    ),
    "path-123.jsonl": (
        lambda p: p.write_text(json.dumps({"id": "x", "request": {"method": "POST", "path": 123}}) + "\n"),
        ":1: request.path: expected a non-empty string",
    ),
    "t-ms-a-word.jsonl": (
        lambda p: p.write_text(
            json.dumps(
                {"id": "x", "request": {"path": "/v1/x"}, "error": {"kind": "timeout", "t_ms": "soon"}}
            )
            + "\n"
        ),
        ":1: error.t_ms: expected a number",
    ),
    "store-doc-not-json.db": (
        lambda p: _store(p, "{not json"),
        "row 2 (exchange 'bad'): its document is not JSON",
    ),
    "store-doc-deep.db": (lambda p: _store(p, "[" * 100_000 + "]" * 100_000), "row 2 (exchange 'bad')"),
    "store-doc-request-a-number.db": (
        lambda p: _store(p, '{"id": "bad", "request": 7}'),
        "row 2 (exchange 'bad')",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_capture_is_exit_2_naming_the_entry(tmp_path: Path, name: str) -> None:
    make, says = MALFORMED[name]
    path = tmp_path / name
    make(path)
    for command in (["check"], ["export"], ["replay", "--target", "http://127.0.0.1:9", "--dry-run"]):
        run = run_wirecheck(command[0], str(path), *command[1:], timeout=120)
        assert run.returncode == 2, (command, run.returncode, run.stdout[-500:], run.stderr[-2000:])
        assert "Traceback" not in run.stderr, run.stderr[-3000:]
        assert says in run.stderr, (command, run.stderr[-1000:])


def test_an_entry_or_a_file_over_its_limit_is_refused_and_the_limits_can_be_raised(tmp_path: Path) -> None:
    line = tmp_path / "big-line.jsonl"
    ex = {"id": "big", "request": {"method": "POST", "path": "/v1/x", "body_text": "x" * (3 * 1024 * 1024)}}
    line.write_text(json.dumps(ex) + "\n")
    run = run_wirecheck("check", str(line), "--max-entry-size", "1MiB", timeout=120)
    assert run.returncode == 2 and ":1: a line over the limit of 1048576 bytes" in run.stderr, run.stderr
    assert run_wirecheck("check", str(line), "--max-entry-size", "8MiB", timeout=120).returncode in (0, 1)

    har = tmp_path / "big-entry.har"
    har.write_text(_har([{"request": {"url": URL, "postData": {"text": "y" * (3 * 1024 * 1024)}}}]))
    run = run_wirecheck("check", str(har), "--max-entry-size", "1MiB", timeout=120)
    assert run.returncode == 2 and "log.entries[0]: over the limit of 1048576 bytes" in run.stderr, run.stderr

    many = tmp_path / "many.har"
    many.write_text(_har([{"request": {"url": URL}} for _ in range(10)]))
    run = run_wirecheck("check", str(many), "--max-exchanges", "5", timeout=120)
    assert run.returncode == 2 and "more than 5 exchanges" in run.stderr and "--max-exchanges" in run.stderr
    assert run_wirecheck("check", str(many), "--max-exchanges", "10", timeout=120).returncode in (0, 1)


def _big_har(path: Path, n: int) -> None:
    entry = {
        "request": {
            "method": "POST",
            "url": URL,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "postData": {"mimeType": "application/json", "text": json.dumps(tool_req())},
        },
        "response": {"status": 200, "content": {"text": json.dumps(completion())}},
    }
    with path.open("w") as fh:
        fh.write('{"log": {"version": "1.2", "pages": [], "entries": [')
        fh.write(",".join(json.dumps({**entry, "_wirecheck": {"id": f"e{i}"}}) for i in range(n)))
        fh.write("]}}")


def _peak_reading(path: Path) -> tuple[int, int]:
    """Exchanges read and the peak of Python's allocations while reading them (none kept)."""
    tracemalloc.start()
    try:
        n = sum(1 for _ in read_capture(path, limits=CaptureLimits()))
        return n, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_a_har_takes_the_same_memory_whatever_the_number_of_entries(tmp_path: Path) -> None:
    small, large = tmp_path / "2k.har", tmp_path / "20k.har"
    _big_har(small, 2_000)
    _big_har(large, 20_000)
    n_small, peak_small = _peak_reading(small)
    n_large, peak_large = _peak_reading(large)
    assert (n_small, n_large) == (2_000, 20_000)
    print(
        f"peak while reading: {peak_small / 1e6:.1f} MB for 2 000 entries, {peak_large / 1e6:.1f} MB for 20 000"
    )
    # ten times the entries (and the file): the same peak, within a block's worth of text
    assert peak_large < peak_small + 4_000_000, (peak_small, peak_large)
