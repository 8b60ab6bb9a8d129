"""``wirecheck sim`` and ``wirecheck sim-gateway`` as processes on loopback."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support import wire
from tests.support.servers import run_wirecheck, running, sim_behind_gateway, wait_up
from wirecheck.record import free_port


def test_sim_and_gateway_processes_serve_and_inject_faults() -> None:
    sp, gp = free_port(), free_port()
    with sim_behind_gateway(sp, gp, sp, gateway_faults="finish_reason_changed"):
        wait_up(f"http://127.0.0.1:{sp}/health")
        wait_up(f"http://127.0.0.1:{gp}/health")
        direct = httpx.post(
            f"http://127.0.0.1:{sp}/v1/chat/completions", json=wire.tool_req(), timeout=10
        ).json()
        assert direct["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather_v2"
        assert direct["choices"][0]["finish_reason"] == "tool_calls"
        via = httpx.post(
            f"http://127.0.0.1:{gp}/v1/chat/completions", json=wire.tool_req(), timeout=10
        ).json()
        assert via["choices"][0]["finish_reason"] == "stop"
        assert (
            httpx.get(f"http://127.0.0.1:{gp}/metrics", timeout=5).text.count("vllm:num_requests_running")
            >= 1
        )


def test_unknown_fault_is_a_clear_error() -> None:
    out = run_wirecheck("sim", "--faults", "model.nope", timeout=30)
    assert out.returncode == 2 and "unknown fault 'model.nope'" in out.stderr
    listing = run_wirecheck("sim-gateway", "--list-faults", timeout=30)
    assert listing.returncode == 0 and "stream_buffered" in listing.stdout


def test_sim_writes_its_evidence_and_accept_reads_it(tmp_path: Path) -> None:
    port, ev = free_port(), tmp_path / "ev"
    with running(
        "sim", "--port", str(port), "--family", "kimi_k3", "--time-scale", "0.01", "--environment", str(ev)
    ):
        url = f"http://127.0.0.1:{port}"
        wait_up(url + "/health")
        proc = run_wirecheck("accept", "--target", url, "--engine-url", url,
                "--host-info", str(ev / "nvidia-smi.xml"), str(ev / "nvidia-smi.txt"),
                "--container-info", str(ev / "container.json"), "--startup-log", str(ev / "startup.log"),
                "--official-image", "--reviewer", "ci", "--on-call", "ci-oncall", "--phases", "compat,cache", "--out", str(tmp_path / "out"), "--quiet", timeout=120)  # fmt: skip
    # compat and cache pass on the simulated deployment; two phases are not a go-live decision
    assert proc.returncode == 1 and "verdict: go (partial" in proc.stdout, proc.stdout + proc.stderr
    assert "[SIMULATED evidence" in proc.stdout  # the simulator marks its evidence
