"""Loaders (HAR, mitmproxy flows) give the same findings as the store they came from; replay re-sends
captured requests to one target or two and blames differences on the side that breaks the contract."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import wire
from tests.support.servers import mitmdump, run_wirecheck
from wirecheck.acceptance import run_demo
from wirecheck.contracts import CheckConfig, InputError, check_exchanges, read_exchanges
from wirecheck.proxy import to_har
from wirecheck.record import free_port, open_store, serve
from wirecheck.replay import detect_format, load_capture, load_har, load_mitm, replay
from wirecheck.sim import SimConfig, create_app, parse_faults


def verdicts(exs: list[Any], **cfg: Any) -> Counter[tuple[str, str, str]]:
    res = check_exchanges(exs, CheckConfig(pair_by_fingerprint=True, **cfg))
    return Counter((f.exchange_id, f.rule, str(f.fault)) for f in res.findings)


@pytest.fixture(scope="module")
def demo_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    run_demo(out, requests=16, phases=("interface",), scenario_examples=0, quiet=True)
    return out


def callers(capture: Path) -> int:
    """What a replay sends: one request per caller-tap chat completion (retries and probes included)."""
    return sum(
        1
        for e in read_exchanges(capture / "capture.jsonl")
        if e.tap == "caller" and e.request.method == "POST" and e.request.path.endswith("/chat/completions")
    )


def test_har_written_by_export_gives_the_stores_findings(demo_capture: Path, tmp_path: Path) -> None:
    store = open_store(demo_capture / "wirecheck.db")
    from_store = list(store.exchanges())
    store.close()
    har = tmp_path / "cap.har"
    har.write_text(json.dumps(to_har(from_store)))
    assert detect_format(har) == "har"
    from_har = list(load_har(har))
    assert [e.id for e in from_har] == [e.id for e in from_store]
    assert verdicts(from_har) == verdicts(from_store) and sum(verdicts(from_store).values()) > 0


def test_a_foreign_har_without_wirecheck_fields_loads_as_plain_bodies(tmp_path: Path) -> None:
    body = wire.completion(wire.message(None, tool_calls=[wire.call("rm_rf", "{}")]), "tool_calls")
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2026-12-02T10:00:00Z",
                    "request": {
                        "method": "POST",
                        "url": "https://api.example/v1/chat/completions",
                        "headers": [],
                        "postData": {"mimeType": "application/json", "text": json.dumps(wire.tool_req())},
                    },
                    "response": {
                        "status": 200,
                        "headers": [{"name": "content-type", "value": "application/json"}],
                        "content": {"mimeType": "application/json", "text": json.dumps(body)},
                    },
                }
            ],
        }
    }
    p = tmp_path / "browser.har"
    p.write_text(json.dumps(har))
    [ex] = list(load_capture(p))
    assert ex.request.path == "/v1/chat/completions" and ex.tap == "caller"
    assert {f.rule for f in check_exchanges([ex], CheckConfig(direct=True)).findings} == {
        "tool-call-undeclared"
    }


def test_bad_capture_files_are_clear_errors(tmp_path: Path) -> None:
    p = tmp_path / "x.har"
    p.write_text('{"log": {"version": "1.2"}}')
    with pytest.raises(InputError, match=r"no log\.entries"):
        list(load_har(p))
    flow = tmp_path / "x.mitm"
    flow.write_bytes(b"12:not a flow")
    with pytest.raises(InputError, match="mitmproxy flow"):
        list(load_mitm(flow))


def test_mitmproxy_flow_file_gives_the_same_findings_as_the_addons_store(tmp_path: Path) -> None:
    flows, db = tmp_path / "cap.mitm", tmp_path / "addon.db"
    port = free_port()
    sim = create_app(
        SimConfig(
            time_scale=0.001,
            faults=parse_faults("model.undeclared_tool=0.5,parser.markup_in_content=0.3", seed=3),
        )
    )
    with (
        serve(sim) as sim_url,
        mitmdump(
            sim_url,
            port,
            "-w",
            str(flows),
            "--set",
            f"wirecheck_store={db}",
            "--set",
            "wirecheck_tap=engine",
            "--set",
            "wirecheck_stream_all=false",
        ),
    ):
        for i in range(8):
            httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json=wire.tool_req(
                    stream=i % 2 == 0, messages=[{"role": "user", "content": f"Weather in Kobe {i}?"}]
                ),
                timeout=10,
            )
    chat = lambda exs: [e for e in exs if e.request.path.endswith("/chat/completions")]  # noqa: E731
    from_flows = chat(list(load_mitm(flows, tap="engine")))
    store = open_store(db)
    from_store = chat(list(store.exchanges()))
    store.close()
    assert len(from_flows) == len(from_store) == 8
    key = lambda c: Counter((r, f) for _, r, f in c.elements())  # noqa: E731 - ids differ by loader
    assert key(verdicts(from_flows, direct=True)) == key(verdicts(from_store, direct=True))
    assert sum(verdicts(from_flows, direct=True).values()) > 0


def test_replay_to_a_clean_target_and_side_by_side_with_a_faulty_one(demo_capture: Path) -> None:
    captured = list(read_exchanges(demo_capture / "capture.jsonl"))
    n = callers(demo_capture)
    assert n >= 17  # the discovery probe and 16 agent requests, and any retries
    clean = create_app(SimConfig(family="kimi_k3", time_scale=0.001))
    faulty = create_app(
        SimConfig(family="kimi_k3", time_scale=0.001, faults=parse_faults("model.undeclared_tool"))
    )
    with serve(clean) as a, serve(faulty) as b:
        dry = replay(captured, a, dry_run=True)
        assert len(dry.planned) == n and dry.sent == 0 and clean.state.sim.engine.steps == 0
        res = replay(captured, a, headers={"authorization": "Bearer sk-new"})
        assert res.sent == n and [f for f in res.findings if f.severity == "error"] == []
        side = replay(captured, a, compare=b, concurrency=2)
    assert side.sent == n and len(side.answers) == 2 * n
    diffs = [d for d in side.diffs if d.what == "tool_calls"]
    assert diffs and {d.blamed for d in diffs} == {"b"}
    assert {f.rule for f in side.findings if f.tap == "compare"} >= {"tool-call-undeclared"}
    assert not [f for f in side.findings if f.tap == "target" and f.severity == "error"]


def test_replay_cli_dry_run_and_header(demo_capture: Path) -> None:
    sim = create_app(SimConfig(family="kimi_k3", time_scale=0.001, api_key="sk-new"))
    with serve(sim) as url:
        dry = run_wirecheck(
            "replay", str(demo_capture / "wirecheck.db"), "--target", url, "--dry-run", timeout=60
        )
        assert (
            dry.returncode == 0
            and dry.stdout.count("POST ") == callers(demo_capture)
            and sim.state.sim.engine.steps == 0
        )
        out = run_wirecheck(
            "replay",
            str(demo_capture / "capture.jsonl"),
            "--target",
            url,
            "--header",
            "Authorization: Bearer sk-new",
            "--format",
            "json",
            "--progress-every",
            "0",
            timeout=120,
        )
    res = json.loads(out.stdout)
    # progress lines on stderr in a CI log (no terminal): sent of N, failures so far, ETA
    ticks = [line for line in out.stderr.splitlines() if line.startswith("replay: ")]
    n = callers(demo_capture)
    assert ticks and all(f"/{n} requests sent, 0 failed so far, ETA " in t for t in ticks), out.stderr
    assert "requests sent" not in dry.stderr  # a dry run sends nothing and counts nothing
    assert res["sent"] == callers(demo_capture) and not [
        f for f in res["findings"] if f["rule"] == "http-client-error"
    ]
    assert out.returncode == 0
