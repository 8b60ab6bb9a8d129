"""The benchmark scripts run and write their JSON (a smoke run: the figures come from full runs)."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]


#: a smoke run of benchmarks/proxy_overhead.py: both targets, short streams of fast events
_OVERHEAD_SMOKE = ("--proxies", "direct,wirecheck", "--events", "3", "--interval-ms", "5")


def _benchmark(name: str) -> ModuleType:
    """One of benchmarks/'s modules, imported as its scripts import each other (their folder on the
    path while it loads)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def _python_build() -> str:
    """``bench_output.python_build()`` of this interpreter."""
    build: str = _benchmark("bench_output").python_build()
    return build


def _bench(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One benchmark script run to the end with this Python (as CI runs it)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_proxy_overhead_smoke(tmp_path: Path) -> None:
    out = tmp_path / "po.json"
    proc = _bench(
        "proxy_overhead.py",
        *("--proxies", "direct,wirecheck,wirecheck-asgi,relay", "--events", "3", "--interval-ms", "5"),
        *("--levels", "1,4", "--duration", "0.5", "--contend", "1", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    rows = res["rows"]
    assert res["contend"] == 1 and "keeping a core busy" in proc.stdout  # the run under contention
    assert res["upstream_shape"] == "vllm" and "vllm streams" in proc.stdout
    assert res["keep_alive"] is False and "a connection a stream" in proc.stdout
    # the interpreter and its build, which move the figures by a few per cent
    assert res["python_build"] == _python_build() and f"({res['python_build']})" in proc.stdout
    assert {(r["proxy"], r["streams"]) for r in rows} == {
        ("direct", 1),
        ("direct", 4),
        ("wirecheck", 1),
        ("wirecheck", 4),
        ("wirecheck-asgi", 1),  # an A/B: the same proxy with WIRECHECK_DIRECT_BODY=0
        ("wirecheck-asgi", 4),
        ("relay", 1),  # the bare Python relay: the floor of a proxy on the same loop
        ("relay", 4),
    }
    assert all(r["failed_streams"] == 0 and r["samples"] > 0 for r in rows)
    assert "+TTFT p50" in proc.stdout
    # CPU of the proxy's processes per forwarded event (none for direct), and the load
    # generator's own CPU
    by = {(r["proxy"], r["streams"]): r for r in rows}
    assert by[("direct", 4)]["cpu_us_per_event"] == 0.0
    assert by[("wirecheck", 4)]["cpu_us_per_event"] > 0 and by[("wirecheck", 4)]["events"] > 0
    assert by[("relay", 4)]["cpu_us_per_event"] > 0 and by[("relay", 4)]["events"] > 0
    assert all(0 < r["loadgen_cpu_pct"] <= 200 for r in rows)
    assert "cpu/ev" in proc.stdout and "x nginx" in proc.stdout and "sys/ev" in proc.stdout
    # the kernel's part of it (counted in 10 ms ticks: a short level may show none), never more
    # than the whole; none for direct
    assert by[("direct", 4)]["sys_us_per_event"] == 0.0
    assert all(0 <= r["sys_us_per_event"] <= r["cpu_us_per_event"] for r in rows)
    assert sum(r["sys_us_per_event"] for r in rows) > 0
    # counted until the live checker has checked the level's every exchange
    w = by[("wirecheck", 4)]
    assert w["catchup_s"] > 0 and w["cpu_us_per_event"] >= w["cpu_load_us_per_event"] > 0
    assert w["cpu_vs_nginx"] is None  # no nginx in this run
    # of it, the forwarding process alone, and of that its event loop's thread (the rest: the store
    # writer's); for a proxy whose top process is not the one that forwards, neither. The kernel
    # scales and truncates a thread's ticks and its process's each on its own: the thread's can
    # come out one clock tick above (seen: 10 ms over a level of 108 events)
    assert "main/ev" in proc.stdout and "loop/ev" in proc.stdout
    tick_s = 1 / os.sysconf("SC_CLK_TCK")
    for kind in ("wirecheck", "wirecheck-asgi"):
        for level in (1, 4):
            r = by[(kind, level)]
            one_tick = tick_s * 1e6 / r["events"]
            assert 0 <= r["loop_cpu_us_per_event"] <= r["main_cpu_us_per_event"] + one_tick
            assert r["main_cpu_us_per_event"] <= r["cpu_us_per_event"]
    # counted in 10 ms ticks, like sys/ev: over the four rows, some
    assert (
        sum(by[(k, n)]["loop_cpu_us_per_event"] for k in ("wirecheck", "wirecheck-asgi") for n in (1, 4)) > 0
    )
    assert all(by[(k, n)]["loop_cpu_us_per_event"] is None for k in ("direct", "relay") for n in (1, 4))


def test_the_benchmark_upstream_streams_as_vllm_does_or_bare_when_asked() -> None:
    # the upstream's default stream is a conforming one (role chunk, content, a last chunk with the
    # finish_reason): the live checker finds nothing in it, as in a healthy deployment's traffic;
    # ``bare`` leaves the finish_reason out, a finding on every exchange; a thinking model's answer
    # and a declared tool's call, each with the request the callers send for it, conform too
    overhead_load = _benchmark("overhead_load")
    from wirecheck.contracts import (
        CheckConfig,
        Exchange,
        HttpRequest,
        HttpResponse,
        build_view,
        check_exchanges,
    )

    def recorded(shape: str) -> Exchange:
        frames = overhead_load.stream_events(20, shape)
        assert len(frames) == 20 and all(f.startswith(b"data: {") and f.endswith(b"\n\n") for f in frames)
        return Exchange(
            id=f"x-{shape}",
            tap="caller",
            request=HttpRequest(body=overhead_load.request_body(shape)),
            response=HttpResponse(
                200, [("content-type", "text/event-stream")], b"".join(frames) + b"data: [DONE]\n\n"
            ),
        )

    def checked(shape: str) -> list[str]:
        return [f.rule for f in check_exchanges([recorded(shape)], CheckConfig()).findings]

    assert overhead_load.SHAPES == ("vllm", "bare", "thinking", "tool-call")
    assert checked("vllm") == []
    assert checked("bare") == ["finish-reason-missing"]
    assert checked("thinking") == [] and checked("tool-call") == []
    thinking = build_view(recorded("thinking")).choices[0]
    assert thinking.reasoning == "tok" * 9 and thinking.content == "tok" * 9
    (call,) = build_view(recorded("tool-call")).choices[0].calls
    assert call.name == "search" and json.loads(call.arguments) == {"q": "tok " * 16} and call.deltas == 18
    assert (
        b'"tools"' in overhead_load.request_body("tool-call")
        and b'"tools"' not in overhead_load.request_body()
    )


def test_a_keep_alive_caller_sends_its_streams_on_one_connection() -> None:
    # the benchmark's upstream answers one caller's streams one after another on its connection;
    # a caller without keep-alive opens one a stream
    overhead_load = _benchmark("overhead_load")
    Caller, upstream = overhead_load.Caller, overhead_load.upstream
    import asyncio
    import socket

    from wirecheck.record import free_port

    async def run() -> dict[bool, tuple[int, list[int]]]:
        port = free_port()
        served = asyncio.ensure_future(upstream(port, 4, 1.0))
        try:
            for _ in range(100):  # until it listens
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                await asyncio.sleep(0.05)
            out: dict[bool, tuple[int, list[int]]] = {}
            for keep in (True, False):
                caller = Caller(port, keep_alive=keep)
                writers, events = set(), []
                for _ in range(3):
                    got = await caller.stream(b'{"stream": true}')
                    assert got is not None
                    events.append(len(got[1]) + 1)
                    writers.add(id(caller.writer))
                caller.close()
                out[keep] = (len(writers - {id(None)}), events)
            return out
        finally:
            served.cancel()

    got = asyncio.run(run())
    assert got[True] == (1, [5, 5, 5])  # four events and [DONE] a stream, one connection
    assert got[False] == (0, [5, 5, 5])  # each stream's connection closed after it


def test_the_256_stream_targets_hold_for_the_deployed_rows_and_not_the_ab_baseline() -> None:
    overhead_report = _benchmark("overhead_report")
    targets, vs_nginx = overhead_report.targets, overhead_report.vs_nginx

    def row(proxy: str, p50: float, p99: float, ratio: float, cpu: float) -> dict[str, object]:
        return {
            "proxy": proxy,
            "streams": 256,
            "added_ttft_p50_ms": p50,
            "added_ttft_p99_ms": p99,
            "throughput_ratio": ratio,
            "rss_mb": 100.0,
            "cpu_us_per_event": cpu,
            "cpu_vs_nginx": None,
        }

    rows = [
        row("direct", 0.0, 0.0, 1.0, 0.0),
        row("wirecheck", 2.0, 17.0, 0.98, 28.0),
        row("wirecheck+10v", 3.0, 30.0, 0.98, 31.0),  # viewers open: p99 over 25 ms, CPU over 2x
        row("wirecheck-w2", 2.5, 13.7, 0.94, 29.0),  # two workers: under 0.95x
        row("wirecheck-asgi", 9.0, 60.0, 0.9, 40.0),  # the A/B baseline: reported, not held to them
        row("nginx", 0.1, 0.5, 1.0, 15.0),
    ]
    vs_nginx(rows)
    assert rows[0]["cpu_vs_nginx"] is None and rows[1]["cpu_vs_nginx"] == 28.0 / 15.0
    got = {t: met for t, met, _ in targets(rows, [256]) if t.startswith("at 256 streams")}
    timing = "added TTFT p50 <= 5 ms, p99 <= 25 ms, throughput >= 0.95x"
    cpu = "CPU per event <= 2x nginx's (all processes, checking included)"
    assert got == {
        f"at 256 streams (wirecheck): {timing}": True,
        f"at 256 streams (wirecheck): {cpu}": True,
        f"at 256 streams (wirecheck+10v): {timing}": False,
        f"at 256 streams (wirecheck+10v): {cpu}": False,
        f"at 256 streams (wirecheck-w2): {timing}": False,
        f"at 256 streams (wirecheck-w2): {cpu}": True,
    }


def test_a_result_names_the_interpreter_build_it_was_measured_on(monkeypatch: pytest.MonkeyPatch) -> None:
    # profile-guided and link-time optimization and a shared library, by the flags the interpreter
    # was compiled with and its sysconfig's Py_ENABLE_SHARED, not by how configure was asked
    import sysconfig

    gcc_pgo_lto = (
        "-fno-semantic-interposition -flto -fuse-linker-plugin -std=c11 -fprofile-use -fprofile-correction"
    )
    clang_pgo_thin_lto = "-flto=thin -std=c11 -fprofile-instr-use=code.profclangd"
    cases: list[tuple[dict[str, object], str]] = [
        ({"PY_CFLAGS_NODIST": gcc_pgo_lto, "Py_ENABLE_SHARED": 0}, "pgo+lto"),
        ({"PY_CFLAGS_NODIST": clang_pgo_thin_lto, "Py_ENABLE_SHARED": 1}, "pgo+lto+shared"),
        ({"PY_CFLAGS_NODIST": "-std=c11 -fvisibility=hidden", "Py_ENABLE_SHARED": 1}, "shared"),  # pyenv's
        # asked for and turned off again: the flags say what was built
        (
            {
                "PY_CFLAGS_NODIST": "-std=c11",
                "Py_ENABLE_SHARED": 0,
                "CONFIG_ARGS": "'--enable-optimizations=no' '--with-lto=no' '--enable-shared=no'",
            },
            "plain",
        ),
        ({"PY_CFLAGS_NODIST": "", "Py_ENABLE_SHARED": 0}, "plain"),
        ({}, "plain"),  # an interpreter that keeps none of them (Windows)
    ]
    for config, build in cases:
        monkeypatch.setattr(sysconfig, "get_config_var", lambda name, c=config: c.get(name))
        assert _python_build() == build, config


def test_an_interpreter_that_does_not_tell_its_build_is_said_so(tmp_path: Path) -> None:
    # asked after the runs: a failure goes into the result as words, never as an exception
    _build_of = _benchmark("proxy_overhead")._build_of
    assert _build_of(sys.executable) == _python_build()
    failing = tmp_path / "exits"
    failing.write_text("#!/bin/sh\nexit 3\n")
    failing.chmod(0o755)
    assert _build_of(str(failing)) == "not told (exit 3)"
    hanging = tmp_path / "hangs"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    assert _build_of(str(hanging), timeout=0.5) == "not told (no answer in 0.5 s)"
    assert _build_of(str(tmp_path / "absent")).startswith("not told (")


def test_proxy_overhead_measures_another_build_beside_this_one(tmp_path: Path) -> None:
    # wirecheck-base is the proxy as another build's interpreter runs it (here this one's again):
    # a row of its own in the same run, and the interpreter named in the JSON
    out = tmp_path / "po.json"
    proc = _bench(
        "proxy_overhead.py",
        *("--proxies", "direct,wirecheck-base,wirecheck", "--base", sys.executable, "--levels", "4"),
        *("--duration", "0.5", "--events", "3", "--interval-ms", "5", "--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert res["base"] == sys.executable
    assert res["base_build"] == _python_build() and f"wirecheck-base on {sys.executable} (" in proc.stdout
    by = {r["proxy"]: r for r in res["rows"]}
    assert set(by) == {"direct", "wirecheck-base", "wirecheck"}
    assert by["wirecheck-base"]["cpu_us_per_event"] > 0 and by["wirecheck-base"]["failed_streams"] == 0
    # without --base the row cannot be measured: said before anything starts
    proc = _bench("proxy_overhead.py", "--proxies", "wirecheck-base", "--levels", "4", "--out", str(out))
    assert proc.returncode == 2 and "wirecheck-base needs --base PYTHON" in proc.stderr


def test_proxy_overhead_workers_and_client_processes_smoke(tmp_path: Path) -> None:
    # wirecheck proxy --workers 2 as its own row, measured at the extra workers level too,
    # with the load split over two client processes whose results are merged, each caller keeping
    # its connection from one stream to the next
    out = tmp_path / "po.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "proxy_overhead.py"),
            *("--levels", "4", "--proxies", "direct", "--workers", "2", "--workers-levels", "8"),
            *("--clients", "2", "--duration", "0.5", "--events", "3", "--interval-ms", "5"),
            *("--keep-alive", "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    rows = {(r["proxy"], r["streams"]): r for r in res["rows"]}
    assert set(rows) == {("direct", 4), ("direct", 8), ("wirecheck-w2", 4), ("wirecheck-w2", 8)}
    assert all(r["failed_streams"] == 0 and r["samples"] > 0 for r in rows.values())
    # two workers and a checker burn CPU; the events are both clients' together
    assert rows[("wirecheck-w2", 8)]["cpu_us_per_event"] > 0
    assert rows[("wirecheck-w2", 8)]["samples"] >= 8
    assert res["workers"] == 2 and res["clients"] == 2
    assert res["keep_alive"] is True and "callers keep their connections" in proc.stdout


def test_proxy_overhead_with_live_view_viewers_smoke(tmp_path: Path) -> None:
    # wirecheck measured again with viewers on its event stream, which do receive events
    out = tmp_path / "po.json"
    proc = _bench(
        "proxy_overhead.py",
        *_OVERHEAD_SMOKE,
        "--levels",
        "4",
        "--viewers",
        "2",
        "--duration",
        "1",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    res = json.loads(out.read_text())
    assert [r["proxy"] for r in res["rows"]] == ["direct", "wirecheck", "wirecheck+2v"]
    assert all(r["failed_streams"] == 0 and r["samples"] > 0 for r in res["rows"])
    assert res["viewers"]["viewers"] == 2 and min(res["viewers"]["per_viewer"]) > 0
    assert any("(wirecheck+2v)" in t["target"] for t in res["targets"])


def test_check_throughput_smoke(tmp_path: Path) -> None:
    out = tmp_path / "ct.json"
    proc = _bench(
        "check_throughput.py", "--exchanges", "20", "--repeat", "1", "--out", str(out), "--target", "100"
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["streams"] == 20 and data["ratio"] > 0


def test_live_checker_smoke(tmp_path: Path) -> None:
    out = tmp_path / "lc.json"
    proc = _bench(
        "live_checker.py", "--exchanges", "60", "--rate", "20", "--batches", "7,60", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [r["batch"] for r in data["rows"]] == [7, 60]
    assert all(r["us_per_exchange"] > 0 and r["x_frames"] > 0 for r in data["rows"])
    assert data["baseline_us_per_exchange"] > 0 and "batches of 60" in proc.stdout


def test_live_checker_stream_smoke(tmp_path: Path) -> None:
    """``--stream``: what the streams' tokens are, said in the title and kept in the JSON."""
    out = tmp_path / "lct.json"
    proc = _bench(
        "live_checker.py",
        "--exchanges",
        "20",
        "--rate",
        "20",
        "--batches",
        "7",
        "--stream",
        "tool-call",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["stream"] == "tool-call" and data["rows"][0]["us_per_exchange"] > 0
    assert ", tool-call streams," in proc.stdout


def test_the_benchmarks_streams_read_as_their_kind() -> None:
    """What ``--stream`` records, read back by the checker's own assembly: a thinking model's
    reasoning then its answer, and a tool call's arguments piece by piece."""
    from wirecheck.contracts import CheckConfig, build_view, check_exchanges

    recorded = _benchmark("live_checker").recorded
    thinking = build_view(recorded(0, 0.0, 20.0, 10, stream="thinking")[0]).choices[0]
    assert thinking.reasoning == "tok0 tok1 tok2 tok3 " and thinking.content == "tok4 tok5 tok6 tok7 "
    assert thinking.reasoning_fields == {"reasoning"} and thinking.finish_reason == "stop"
    exchanges = [
        recorded(n, 0.0, 20.0, 10, stream=kind)[0] for n, kind in enumerate(("thinking", "tool-call"))
    ]
    called = build_view(exchanges[1]).choices[0]
    assert called.content == "" and called.finish_reason == "tool_calls"
    (call,) = called.calls
    assert call.name == "search" and json.loads(call.arguments) == {"q": "tok2 tok3 tok4 tok5 tok6 tok7 "}
    assert call.deltas == 8
    # both conform: the request declares the tool, the arguments fit its schema
    assert check_exchanges(exchanges, CheckConfig()).findings == []


def test_store_write_smoke(tmp_path: Path) -> None:
    out = tmp_path / "sw.json"
    proc = _bench(
        "store_write.py", "--batches", "6", "--batch", "5", "--warm", "2", "--rounds", "1", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [r["ids"] for r in data["rows"]] == ["random ids", "tap ids"]
    assert all(r["cpu_us_per_exchange"] > 0 and r["bytes_written_per_exchange"] > 0 for r in data["rows"])
    assert data["rows"][0]["ratio_to_random"] == 1.0 and "x random" in proc.stdout
    bad = _bench("store_write.py", "--batches", "2", "--warm", "2", "--out", str(tmp_path / "no.json"))
    assert bad.returncode == 2 and "--batches must be more than --warm" in bad.stderr
    none = _bench("store_write.py", "--rounds", "0", "--out", str(tmp_path / "none.json"))
    assert none.returncode == 2 and "--rounds at least 1" in none.stderr


def test_checker_memory_smoke(tmp_path: Path) -> None:
    out = tmp_path / "cm.json"
    proc = _bench(
        "checker_memory.py",
        "--exchanges",
        "40",
        "--rate",
        "20",
        "--events",
        "5,30",
        "--batch",
        "16",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert [r["events"] for r in data["rows"]] == [5, 30]
    assert all(r["checked"] == 40 and r["peak_mb"] >= r["base_mb"] > 0 for r in data["rows"])
    assert data["ratio"] > 0 and "frames a stream" in proc.stdout


def test_checker_memory_two_taps_smoke(tmp_path: Path) -> None:
    # two taps without correlation ids, one prompt: every exchange is kin of every other
    out = tmp_path / "cm2.json"
    args = ["--exchanges", "30", "--rate", "20", "--events", "5,30", "--batch", "16", "--out", str(out)]
    proc = _bench("checker_memory.py", "--taps", "2", "--same-prompt", *args)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["taps"] == 2 and data["same_prompt"]
    assert all(r["checked"] == 60 and r["cut_checked"] == r["cut_left_out"] == 0 for r in data["rows"])
    assert "at two taps without correlation ids" in proc.stdout


def test_live_checker_two_taps_smoke(tmp_path: Path) -> None:
    out = tmp_path / "lc2.json"
    proc = _bench(
        "live_checker.py",
        "--exchanges",
        "30",
        "--rate",
        "20",
        "--batches",
        "7",
        "--taps",
        "2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["taps"] == 2 and data["rows"][0]["us_per_exchange"] > 0
    assert "60 exchanges" in proc.stdout


def test_live_checker_correlated_taps_smoke(tmp_path: Path) -> None:
    # both sides of each request carry its correlation id, and each request its own
    recorded = _benchmark("live_checker").recorded
    sides = [recorded(i, 0.0, 20.0, 5, taps=2, correlated=True) for i in range(3)]
    assert all(c.correlation and c.correlation == e.correlation for c, e in sides)
    assert len({c.correlation for c, _ in sides}) == 3
    assert all(ex.correlation is None for ex in recorded(0, 0.0, 20.0, 5, taps=2))
    out = tmp_path / "lc2c.json"
    proc = _bench(
        "live_checker.py",
        *("--exchanges", "30", "--rate", "20", "--batches", "7", "--taps", "2", "--correlated"),
        *("--out", str(out)),
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["correlated"] is True and data["rows"][0]["us_per_exchange"] > 0
    assert "60 exchanges" in proc.stdout and "with correlation ids" in proc.stdout


def test_proxy_instructions_smoke(tmp_path: Path) -> None:
    # valgrind is one of the Debian packages ./dev installs (scripts/dev.py)
    out = tmp_path / "pi.json"
    proc = _bench(
        "proxy_instructions.py",
        "--streams",
        "2",
        "--duration",
        "2",
        "--functions",
        "8",
        "--split",
        "60",
        "--out",
        str(out),
        timeout=420,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert set(data["rows"]) == {"relay", "wirecheck"}
    assert all(r["events"] > 0 and r["per_event"] > 0 for r in data["rows"].values())
    assert data["ratio"] > 1 and "x relay" in proc.stdout
    # the second stream length: both proxies counted again, and each cost solved from the two
    assert data["split_events"] == 60 and set(data["split_rows"]) == {"relay", "wirecheck"}
    assert all(r["events"] > 0 for r in data["split_rows"].values())
    # an exchange's own work is spread over fewer events in the shorter streams
    assert all(data["rows"][k]["per_event"] > data["split_rows"][k]["per_event"] for k in data["rows"])
    parts = data["split"]
    assert set(parts) == {"relay", "wirecheck"}
    assert all(p["per_event"] > 0 and p["per_exchange"] > 0 for p in parts.values())
    assert parts["wirecheck"]["per_exchange"] > parts["relay"]["per_exchange"]
    assert "with 60 events a stream" in proc.stdout
    # the Python functions by inclusive instructions: named through the perf map, the largest first,
    # the tap's own exchange among them (a relayed read has no Python frame where the twin is built)
    by = data["by_function"]
    assert len(by) == 8 and [f["per_event"] for f in by] == sorted((f["per_event"] for f in by), reverse=True)
    assert any(f["function"].startswith("ProxyApp.__call__:") for f in by)


def test_proxy_instructions_split() -> None:
    """Per event and per exchange, solved from two stream lengths' counts an event."""
    split = _benchmark("proxy_instructions").split
    # 4,000 an event and 100,000 an exchange: 9,000 an event in streams of 20, 4,500 in streams of 200
    got = split((20, 200), (9000.0, 4500.0))
    assert got["per_event"] == pytest.approx(4000.0) and got["per_exchange"] == pytest.approx(100000.0)
    # the order of the two lengths does not matter
    assert split((200, 20), (4500.0, 9000.0)) == pytest.approx(got)
    # an exchange of no cost of its own: the same count at both lengths
    assert split((20, 200), (700.0, 700.0)) == pytest.approx({"per_event": 700.0, "per_exchange": 0.0})
    for lengths in ((20, 20), (0, 20), (20, -1)):
        with pytest.raises(ValueError, match="two different stream lengths"):
            split(lengths, (1.0, 2.0))
    # the script refuses such a length before it counts anything (minutes under callgrind)
    for bad in ("20", "-1"):
        proc = _bench("proxy_instructions.py", "--events", "20", "--split", bad)
        assert proc.returncode == 2 and "--split needs another stream length" in proc.stderr, proc.stderr


def test_demo_time_smoke(tmp_path: Path) -> None:
    out = tmp_path / "dt.json"
    proc = _bench("demo_time.py", "--phases", "compat,cache", "--out", str(out), timeout=180)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["budget_s"] == 90.0 and data["met"] and data["rows"][0]["demo_wall_s"] > 0
    assert data["rows"][0]["verdict"] in ("go", "limited", "rework", "scale-up")
    assert "of budget" in proc.stdout


#: samples as ``perf script -F pid,tid,ip,sym,dso`` writes them (frames innermost first): the
#: forwarding process 100 (its loop thread 100, its store writer 101) and its checker 200
_PERF_SCRIPT = """\
 100/100
\tffffffff81e74c5a sock_write_iter ([kernel.kallsyms])
\t           f838f __GI___libc_write (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t           9ede0 __pyx_f_6uvloop_4loop_8UVStream__try_write (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t          1705df _PyObject_VectorcallTstate (inlined)
\t          1705df PyObject_VectorcallMethod (/x/libpython3.12.so.1.0)
\t            33ac sink_relay (/x/proxy/_relay_c.cpython-312-x86_64-linux-gnu.so)
\t            3db8 reader_data_received (/x/proxy/_relay_c.cpython-312-x86_64-linux-gnu.so)
\t          13a65d __pyx_f_6uvloop_4loop___uv_stream_on_read (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t          15c178 uv__io_poll (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t    7f246db10000 py::Runner.run:/x/asyncio/runners.py (/tmp/perf-100.map)

 100/100
\t          2ad010 find_keyword (inlined)
\t          2ad010 _PyArg_UnpackKeywords (/x/libpython3.12.so.1.0)
\t    7f246db167fb py::_Cycle._start:/x/proxy/_http.py (/tmp/perf-100.map)

 100/100
\tffffffff81000000 do_epoll_wait ([kernel.kallsyms])
\t           f9000 epoll_pwait (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          15c178 uv__io_poll (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t    7f246db10000 py::Runner.run:/x/asyncio/runners.py (/tmp/perf-100.map)

 100/100
\tffffffff81000100 __sys_accept4 ([kernel.kallsyms])
\t          150000 uv__server_io (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t          15c178 uv__io_poll (/x/uvloop/loop.cpython-312-x86_64-linux-gnu.so)
\t    7f246db10000 py::Runner.run:/x/asyncio/runners.py (/tmp/perf-100.map)

 100/101
\t          a00000 sqlite3VdbeExec (/usr/lib/x86_64-linux-gnu/libsqlite3.so.0.8.6)
\t    7f246db20000 py::Store._exec:/x/record/_store.py (/tmp/perf-100.map)

 200/200
\t          110808 _PyEval_EvalFrameDefault (/x/libpython3.12.so.1.0)
\t    7f246db30000 py::assemble_stream:/x/contracts/_assembly.py (/tmp/perf-200.map)

 200/200
\t          110808 _PyEval_EvalFrameDefault (/x/libpython3.12.so.1.0)
\t    7f246db30000 py::assemble_stream:/x/contracts/_assembly.py (/tmp/perf-200.map)

 200/200
\t          b00000 orjson_loads (/x/orjson.cpython-312-x86_64-linux-gnu.so)
\t    7f246db40000 py::build_view:/x/contracts/_view.py (/tmp/perf-200.map)
"""


def test_proxy_layers_parts_leaves_and_bound() -> None:
    """Each sample goes to its part by the first telling frame from the innermost out (the
    ``asyncio.run`` frames beyond the loop's dispatch tell nothing), and to its leaf by the object
    it stopped in (an inlined frame's being that of the function it was inlined into)."""
    pl = _benchmark("proxy_layers")
    samples = pl.parse_script(_PERF_SCRIPT)
    assert [(s.pid, s.tid, len(s.frames)) for s in samples] == [
        (100, 100, 10),
        (100, 100, 3),
        (100, 100, 4),
        (100, 100, 4),
        (100, 101, 2),
        (200, 200, 2),
        (200, 200, 2),
        (200, 200, 2),
    ]
    assert samples[0].frames[3] == ("_PyObject_VectorcallTstate", "inlined")
    assert pl._loop_pid(samples) == 100
    assert [pl.part(s, 100) for s in samples] == [
        "relay",
        "python",
        "wait",
        "loop",
        "threads",
        "helpers",
        "helpers",
        "helpers",
    ]
    assert [pl.leaf(s) for s in samples] == [
        "kernel",
        "interpreter",  # find_keyword, inlined into libpython's _PyArg_UnpackKeywords
        "kernel",
        "kernel",
        "native",
        "interpreter",
        "interpreter",
        "native",
    ]
    assert pl.python_frame(samples[1]) == "_Cycle._start (_http.py)"
    assert pl.python_frame(pl.Sample(1, 1, [("uv__io_poll", "loop.so")])) is None

    found = pl.layers(samples, 100)
    assert found["samples"] == {"forwarding": 5, "helpers": 3}
    assert found["parts"]["python"] == {"kernel": 0, "interpreter": 1, "native": 0}
    assert found["parts"]["helpers"] == {"kernel": 0, "interpreter": 2, "native": 1}
    assert found["functions"]["helpers"] == [
        ("assemble_stream (_assembly.py)", 2),
        ("build_view (_view.py)", 1),
    ]
    assert found["functions"]["python"] == [("_Cycle._start (_http.py)", 1)]

    # a part's CPU per event: its share of its process's samples times the process's CPU per event
    us = pl.per_event(found, {"forwarding": 10.0, "helpers": 6.0})
    assert us["relay"] == {"kernel": 2.0, "interpreter": 0.0, "native": 0.0}
    assert us["python"]["interpreter"] == pytest.approx(2.0)
    assert us["helpers"] == pytest.approx({"kernel": 0.0, "interpreter": 4.0, "native": 2.0})
    assert sum(sum(v.values()) for v in us.values()) == pytest.approx(16.0)
    # the bound takes the python part's samples out of the kernel only: 16 - 2 = 14
    b = pl.bound(us, 8.0)
    assert b == pytest.approx(
        {
            "nginx_us_per_event": 8.0,
            "us_per_event": 16.0,
            "x_nginx": 2.0,
            "without_python_us": 14.0,
            "without_python_x_nginx": 1.75,
        }
    )


def test_proxy_layers_refuses_a_perf_that_cannot_sample_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not root, and the kernel's perf_event_paranoid over 1: perf would sample user space only and
    every kernel share read as nothing, so the script says why and stops."""
    pl = _benchmark("proxy_layers")
    monkeypatch.setattr(pl.os, "geteuid", lambda: 1000)
    level = tmp_path / "perf_event_paranoid"
    level.write_text("2\n")
    assert "may not sample the kernel here (perf_event_paranoid is 2)" in (pl._perf_usable(level) or "")
    assert "cannot read" in (pl._perf_usable(tmp_path / "absent") or "")
    level.write_text("1\n")
    assert pl._perf_usable(level) is None
    monkeypatch.setenv("PATH", str(tmp_path))
    assert "perf is not installed" in (pl._perf_usable(level) or "")


def test_proxy_layers_smoke(tmp_path: Path) -> None:
    # perf is one of the Debian packages ./dev installs (scripts/dev.py)
    out, script = tmp_path / "pl.json", tmp_path / "pl.txt"
    proc = _bench(
        "proxy_layers.py",
        *("--streams", "16", "--duration", "4", "--record-s", "1.5", "--events", "5"),
        *("--interval-ms", "10", "--out", str(out), "--script", str(script)),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    pl = _benchmark("proxy_layers")
    assert set(data["parts"]) == set(pl.PARTS) and data["samples"]["forwarding"] > 0
    # the relay of each read and the exchange's Python steps were both sampled, and the checker
    assert sum(data["parts"]["relay"].values()) > 0 and sum(data["parts"]["python"].values()) > 0
    assert data["samples"]["helpers"] > 0
    # the parts add up to the processes' CPU per event, and the bound is under the whole
    total = sum(sum(v.values()) for v in data["parts_us"].values())
    assert total == pytest.approx(data["us_per_event"]["forwarding"] + data["us_per_event"]["helpers"])
    assert 0 < data["bound"]["without_python_us"] < data["bound"]["us_per_event"] == pytest.approx(total)
    assert data["nginx_us_per_event"] > 0 and "the bound of a native exchange" in proc.stdout
    assert len(pl.parse_script(script.read_text())) == sum(data["samples"].values())
    # a --record-s that does not fit in the load's last three quarters is refused at once
    proc = _bench("proxy_layers.py", "--duration", "4", "--record-s", "3.5")
    assert proc.returncode == 2 and "--record-s must be positive" in proc.stderr, proc.stderr
