"""The capacity load on Locust: a master and worker processes on loopback, against the simulator.

Per ramp step the Locust workers send the same requests as the in-process driver and report the same
sections. Whether their figures agree (e2e p50 within a factor 1.6, TTFT p50 within 60 ms, KV peaks
within 25%, docs/acceptance.md) is a measurement of speed: benchmarks/locust_agreement.py prints it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Coroutine
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.runs import ROOT, accept_ci
from tests.support.servers import process
from wirecheck import TransportError
from wirecheck.acceptance import CapacityPlan, LocustLoad, locustfile_path
from wirecheck.acceptance.load import spec
from wirecheck.record import free_port, serve
from wirecheck.sim import SimConfig, create_app

CFG = {"family": "kimi_k3", "time_scale": 0.05}


def _plan(**kw: object) -> CapacityPlan:
    base: dict[str, object] = {
        "ramp": [1, 2, 4],
        "long_input_turns": [12],
        "soak_requests": 8,
        "soak_windows": 2,
        "soak_drift_max": float("inf"),  # drift is judged on recorded facts (test_verdicts.py)
    }
    base.update(kw)
    return CapacityPlan(**base)  # type: ignore[arg-type]


def _capacity(url: str, out: Path, **kw: object) -> dict[str, object]:
    res = accept_ci(url, out, ["capacity"], **kw)
    assert res.phases[0].error is None, res.phases[0].error
    return json.loads(Path(res.files["json"]).read_text())["phases"][0]


def test_two_locust_workers_run_the_in_process_steps_and_the_agreement_benchmark_reports_them(
    tmp_path: Path,
) -> None:
    """The same steps, requests and report sections from both drivers, by the benchmark that compares
    their figures (benchmarks/locust_agreement.py, one run): whether the p50s and KV peaks agree
    within the stated tolerance is a measurement of speed, which the benchmark prints, not a test."""
    out = tmp_path / "agreement.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "locust_agreement.py"), "--runs", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    (local,), (dist,) = result["in_process"], result["locust"]
    assert dist["load_engine"]["engine"] == "locust" and dist["load_engine"]["workers"] == 2
    assert dist["checks"] == local["checks"]  # the same report sections
    assert dist["status"] == local["status"] == "pass"
    for a, b in zip(local["ramp"], dist["ramp"], strict=True):
        assert (a["label"], a["requests"], a["errors"]) == (b["label"], b["requests"], b["errors"])
        assert b["itl_p95_s"] is not None and b["tpot_p50_s"] is not None  # raw ITL values travelled
    assert dist["long_input_ok"] and dist["soak_requests"] == 8
    assert [r["step"] for r in result["steps"]] == ["ramp c=1", "ramp c=2", "ramp c=4"]
    assert "agree" in proc.stdout and set(result["tolerance"]) == {
        "e2e_p50_factor",
        "ttft_p50_ms",
        "kv_max_share",
    }


def _worker(port: int, late_ready_s: int = 0) -> AbstractContextManager[subprocess.Popen[str]]:
    """A plain ``locust --worker`` as a team starts it on a load machine."""
    argv = [sys.executable, "-m", "locust", "-f", locustfile_path(), "--worker"]
    return process(
        [*argv, "--master-host", "127.0.0.1", "--master-port", str(port), "--loglevel", "ERROR"],
        quiet=True,
        env={"LOCUST_WORKER_ADDITIONAL_WAIT_BEFORE_READY_AFTER_STOP": str(late_ready_s)},
    )


def _masters_on(port: int) -> list[int]:
    """Pids of wirecheck Locust masters still listening on ``port``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"master_main" in a for a in args) and str(port).encode() in args:
            found.append(int(proc.name))
    return found


def test_an_open_loop_rate_is_split_over_workers_started_elsewhere(tmp_path: Path) -> None:
    port = free_port()
    # the second worker says ready again only 2 s after each step's stop, as a worker process kept
    # off the CPU does on a loaded machine: a step started without it, and its late return made
    # Locust re-dispatch users mid-step, losing samples (the CI hang)
    with (
        serve(create_app(SimConfig(**CFG))) as url,  # type: ignore[arg-type]
        _worker(port) as one,
        _worker(port, late_ready_s=2) as other,
    ):
        plan = _plan(open_loop_rates=[10.0, 40.0], open_loop_requests=12)
        ph = _capacity(
            url,
            tmp_path / "open",
            plan=plan,
            load_engine="locust",
            locust_master=f"127.0.0.1:{port}",
            locust_expect_workers=2,
        )
        for w in (one, other):
            w.wait(timeout=30)  # the workers end with the master's run
    assert ph["data"]["load_engine"]["local_workers"] == 0 and ph["data"]["load_engine"]["workers"] == 2
    rows = ph["data"]["ramp"]
    assert [r["rate_rps"] for r in rows] == [10.0, 40.0]
    for r in rows:
        assert r["requests"] == 12 and r["errors"] == 0
        assert r["fell_behind"] == (r["late_sends"] > 0)
        # the schedule held across both workers: 12 sends at the rate take about 11 intervals
        assert r["achieved_rps"] <= r["rate_rps"] * 1.6


def test_the_locustfile_runs_under_a_plain_locust_and_writes_raw_measurements(tmp_path: Path) -> None:
    out, stats = tmp_path / "raw.jsonl", tmp_path / "stats.json"
    with serve(create_app(SimConfig(**CFG))) as url:  # type: ignore[arg-type]
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                locustfile_path(),
                "--headless",
                "-u",
                "2",
                # all users at once, and a run long enough for a loaded machine: Locust's clock starts
                # before its users are spawned (CI saw them ready 0.4 s before a 3 s limit)
                "-r",
                "100",
                "-t",
                "15s",
                # a request under way when the run ends is answered and counted, not cut: a user
                # that started late still measures the one it began
                "--stop-timeout",
                "30",
                "--host",
                url,
                "--wirecheck-out",
                str(out),
                "--json-file",
                str(stats.with_suffix("")),  # Locust adds the ".json"
                "--only-summary",
                "--loglevel",
                "ERROR",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    # one row for every request Locust counted (how many it made in its run depends on how soon a
    # loaded machine let its users start: once 3 in 15 s); Locust's own statistics (requests,
    # failures, times) say what happened where the two differ
    said = stats.read_text()
    entries = json.loads(said)
    counted = sum(e["num_requests"] for e in entries)
    assert counted >= 1 and len(rows) == counted, said[-3000:] + proc.stderr[-2000:]
    assert all(r["ok"] for r in rows) and not any(e["num_failures"] for e in entries), said[-3000:]
    assert all(r["ttft_s"] is not None and 0 < r["ttft_s"] <= r["e2e_s"] for r in rows)
    assert {e["name"] for e in entries} == {"agent sample"}  # Locust's own statistics name the requests


def test_a_worker_killed_mid_step_fails_the_phase_in_bounded_time(tmp_path: Path) -> None:
    port = free_port()
    app = create_app(SimConfig(**CFG))  # type: ignore[arg-type]
    chats: list[float] = []
    busy = threading.Event()

    async def counting(scope: Any, receive: Any, send: Any) -> None:
        # the first chat request is the in-process warm-up, the others the ramp step's 40 on the
        # Locust workers: at the sixth, both workers are in the middle of the step
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            chats.append(time.monotonic())
            if len(chats) == 6:
                busy.set()
        await app(scope, receive, send)

    stack = ExitStack()
    workers = [stack.enter_context(_worker(port)) for _ in range(2)]
    killed_at: list[float] = []

    def kill_one() -> None:
        if busy.wait(120):
            workers[0].kill()  # SIGKILL: no goodbye to the master, only heartbeats that stop
            killed_at.append(time.monotonic())

    killer = threading.Thread(target=kill_one, daemon=True)
    try:
        with serve(counting) as url:
            killer.start()
            res = accept_ci(
                url,
                tmp_path / "killed",
                ["capacity"],
                plan=_plan(ramp=[4], min_requests=40, long_input_turns=[]),
                load_engine="locust",
                locust_master=f"127.0.0.1:{port}",
                locust_expect_workers=2,
            )
            returned = time.monotonic()
    finally:
        killer.join(timeout=5)
        stack.close()
    # the phase's own error says why where the step never got there (a loaded machine once)
    assert killed_at, f"the ramp step never reached the Locust workers: {res.phases[0].error}"
    error = res.phases[0].error
    assert error is not None and error.startswith("TransportError: Locust step ramp c=4: Locust worker ")
    assert "went missing: no heartbeat for over 18 s" in error and "samples reported" in error, error
    # Locust marks the worker missing after ~4 s, the step fails 15 s later; the old wait was 3600 s
    assert returned - killed_at[0] < 60, returned - killed_at[0]
    # the phase's error reaches the report, and nothing is left running
    report = Path(res.files["json"]).read_text()
    assert "went missing" in report
    assert workers[1].returncode == 0  # the master told the surviving worker to quit
    assert _masters_on(port) == []


def _chat_step(load: LocustLoad, url: str, name: str, specs: list[Any]) -> Coroutine[Any, Any, Any]:
    """One capacity step of ``specs`` at one user, against ``url``'s chat endpoint."""
    return load.step(name, specs, url=url + "/v1/chat/completions", headers={}, users=1)


async def _seconds_to_fail(load: LocustLoad, step: Awaitable[Any], match: str) -> float:
    """How long ``step`` took to fail with a TransportError that matches ``match``; the load is
    closed afterwards, however the step ended."""
    t0 = time.monotonic()
    try:
        with pytest.raises(TransportError, match=match):
            await step
        return time.monotonic() - t0
    finally:
        await load.close()


def test_the_acceptance_run_gives_up_on_a_silent_master_and_leaves_no_process() -> None:
    async def go(url: str) -> tuple[float, LocustLoad]:
        load = LocustLoad(workers=1)
        load.silent_s = 3.0  # the master ticks every 2 s; 60 s in real runs
        await load.start(url)
        assert load.master is not None
        os.kill(load.master.pid, signal.SIGSTOP)  # a master that hangs: alive, says nothing
        step = _chat_step(load, url, "stalled", [])
        return await _seconds_to_fail(load, step, "step stalled: silent for 3 s"), load

    with serve(create_app(SimConfig(**CFG))) as url:  # type: ignore[arg-type]
        took, load = asyncio.run(go(url))
    assert took < 10, took
    assert load.master is not None and load.master.returncode == -signal.SIGKILL
    assert [w.returncode for w in load.workers] == [-signal.SIGKILL]


def _chat_never_answered(asked: threading.Event | None = None) -> Any:
    """The simulator, but chat requests never get an answer: the worker that sent one stays alive
    and silent (its heartbeats go on). ``asked`` is set when the first one arrives."""
    app = create_app(SimConfig(**CFG))  # type: ignore[arg-type]

    async def stuck(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            if asked is not None:
                asked.set()
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await app(scope, receive, send)

    return stuck


def test_a_worker_stuck_on_a_request_fails_the_step_after_the_idle_bound() -> None:
    stuck = _chat_never_answered()

    async def go(url: str) -> tuple[float, LocustLoad]:
        load = LocustLoad(workers=1)
        load.idle_s = 3.0  # the request timeout (600 s) plus 60 s in real runs
        await load.start(url)
        step = _chat_step(load, url, "stuck", [spec("varied", 1)])
        return await _seconds_to_fail(
            load, step, r"Locust step stuck: Locust worker \S+ sent no sample for 3 s"
        ), load

    with serve(stuck) as url:
        took, load = asyncio.run(go(url))
    assert took < 30, took
    assert load.master is not None and load.master.returncode == 0  # it quit when asked
    assert [w.returncode for w in load.workers] == [0]  # told to quit by the master


def test_the_step_fails_at_once_when_locust_stops_the_test_for_its_last_worker() -> None:
    asked = threading.Event()
    stuck = _chat_never_answered(asked)

    async def go(url: str) -> tuple[float, LocustLoad]:
        load = LocustLoad(workers=1)
        await load.start(url)
        step = asyncio.ensure_future(_chat_step(load, url, "alone", [spec("varied", 1)]))
        assert await asyncio.to_thread(asked.wait, 120)  # the worker is in its request
        load.workers[0].kill()
        return await _seconds_to_fail(
            load, step, "Locust step alone: Locust stopped the test in the middle"
        ), load

    with serve(stuck) as url:
        took, load = asyncio.run(go(url))
    # Locust marks the only worker missing after ~4 s and stops the test; the idle bound is 660 s
    assert took < 30, took
    assert load.master is not None and load.master.returncode == 0
