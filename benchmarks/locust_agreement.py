"""Whether the capacity load on Locust workers measures what the in-process driver measures.

Both drivers time requests with the same code; what differs is the client process (asyncio in the
acceptance run, gevent greenlets on the workers), so the figures should agree in scale, not to the
millisecond. The in-process run is the baseline, in the same run: per ramp step, the Locust run's e2e
p50 within a factor 1.6 either way, its TTFT p50 within 60 ms, its KV usage peak within 25% (+0.01)
(docs/acceptance.md). The simulator runs in its own process (``wirecheck sim``): served from the
acceptance run's own process it shares the interpreter lock with the in-process driver, which alone
moved the in-process figures by over 100 ms on a loaded machine.

Each run is the capacity phase of ``accept`` (ramp 1, 2, 4 with 12 requests a step, so each p50 is a
median), once per driver, held to an SLO nothing here breaks: the figures are compared, not judged.
With several runs each step's p50 is the lowest (background load only ever adds time). Prints a table
and writes JSON.

    python benchmarks/locust_agreement.py [--runs 3] [--workers 2] [--out benchmarks/results/locust_agreement.json]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import closing
from pathlib import Path
from typing import Any

from bench_output import write_json

from wirecheck.acceptance import AcceptOptions, CapacityPlan, Progress, Slo, accept

E2E_FACTOR, TTFT_MS, KV_SHARE = 1.6, 60.0, 0.25
#: per step, what a run reports of each driver (and keeps in the JSON)
STEP_KEYS = ("label", "requests", "errors", "ttft_p50_s", "e2e_p50_s", "itl_p95_s", "tpot_p50_s", "kv_max")


def _port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not answer in {seconds:.0f} s") from None
            time.sleep(0.2)


def _capacity(url: str, dcgm: str, out: Path, locust_workers: int) -> dict[str, Any]:
    plan = CapacityPlan(
        ramp=[1, 2, 4],
        min_requests=12,
        long_input_turns=[12],
        soak_requests=8,
        soak_windows=2,
        soak_drift_max=float("inf"),
    )
    opts = AcceptOptions(
        target=url,
        engine_url=url,
        gpu_metrics_urls=[dcgm],
        reviewer="bench",
        out=out,
        phases=["capacity"],
        plan=plan,
        slo=Slo(ttft_p95_s=60.0, itl_p95_s=60.0, e2e_p95_s=600.0),
        load_engine="locust" if locust_workers else "in-process",
        locust_workers=locust_workers or 2,
    )
    phase = accept(opts, Progress(quiet=True)).report["phases"][0]
    if phase["error"]:
        raise SystemExit(f"the capacity phase failed: {phase['error']}")
    return {
        "status": phase["status"],
        "checks": [c["id"] for c in phase["checks"]],
        "load_engine": phase["data"]["load_engine"],
        "long_input_ok": all(r["ok"] for r in phase["data"]["long_input"]),
        "soak_requests": (phase["data"].get("soak") or {}).get("requests"),
        "ramp": [{k: r.get(k) for k in STEP_KEYS} for r in phase["data"]["ramp"]],
    }


def _lowest(runs: list[dict[str, Any]], i: int, key: str) -> float:
    return min(float(r["ramp"][i][key]) for r in runs)


def compare(local: list[dict[str, Any]], dist: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per step: each driver's lowest p50s over the runs, the KV peaks of the first run, and whether
    they agree within the stated tolerance."""
    rows = []
    for i, step in enumerate(local[0]["ramp"]):
        a_e2e, b_e2e = _lowest(local, i, "e2e_p50_s"), _lowest(dist, i, "e2e_p50_s")
        a_ttft, b_ttft = _lowest(local, i, "ttft_p50_s"), _lowest(dist, i, "ttft_p50_s")
        a_kv, b_kv = float(step["kv_max"] or 0), float(dist[0]["ramp"][i]["kv_max"] or 0)
        ratio = b_e2e / a_e2e if a_e2e else None
        ttft_ms = abs(b_ttft - a_ttft) * 1000
        rows.append(
            {
                "step": step["label"],
                "in_process_e2e_p50_s": a_e2e,
                "locust_e2e_p50_s": b_e2e,
                "e2e_ratio": None if ratio is None else round(ratio, 3),
                "in_process_ttft_p50_s": a_ttft,
                "locust_ttft_p50_s": b_ttft,
                "ttft_diff_ms": round(ttft_ms, 1),
                "in_process_kv_max": a_kv,
                "locust_kv_max": b_kv,
                "agree": ratio is not None
                and 1 / E2E_FACTOR <= ratio <= E2E_FACTOR
                and ttft_ms < TTFT_MS
                and abs(b_kv - a_kv) <= KV_SHARE * a_kv + 0.01,
            }
        )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each driver (each step's p50 is the lowest)")
    ap.add_argument("--workers", type=int, default=2, help="local Locust workers")
    ap.add_argument("--time-scale", default="0.05", help="the simulator's time scale")
    ap.add_argument("--out", default="benchmarks/results/locust_agreement.json")
    args = ap.parse_args()
    sp, dp = _port(), _port()
    argv = [sys.executable, "-m", "wirecheck", "sim", "--port", str(sp), "--dcgm-port", str(dp)]
    sim = subprocess.Popen(
        [*argv, "--family", "kimi_k3", "--time-scale", args.time_scale],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url, dcgm = f"http://127.0.0.1:{sp}", f"http://127.0.0.1:{dp}/metrics"
    local: list[dict[str, Any]] = []
    dist: list[dict[str, Any]] = []
    try:
        _wait(url + "/health")
        _wait(dcgm)
        with tempfile.TemporaryDirectory(prefix="wc-locust-bench-") as tmp:
            for i in range(args.runs):
                local.append(_capacity(url, dcgm, Path(tmp) / f"local{i}", 0))
                dist.append(_capacity(url, dcgm, Path(tmp) / f"locust{i}", args.workers))
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    rows = compare(local, dist)
    print(
        f"{'step':<12} {'e2e p50 in-proc':>16} {'locust':>8} {'ratio':>6} {'TTFT diff ms':>13} {'KV in/locust':>13} agree"
    )
    for r in rows:
        print(
            f"{r['step']:<12} {r['in_process_e2e_p50_s']:>16.3f} {r['locust_e2e_p50_s']:>8.3f} {r['e2e_ratio']:>6} "
            f"{r['ttft_diff_ms']:>13} {r['in_process_kv_max']:>6.2f}/{r['locust_kv_max']:<6.2f} {'yes' if r['agree'] else 'NO'}"
        )
    result = {
        "runs": args.runs,
        "workers": args.workers,
        "time_scale": float(args.time_scale),
        "tolerance": {"e2e_p50_factor": E2E_FACTOR, "ttft_p50_ms": TTFT_MS, "kv_max_share": KV_SHARE},
        "steps": rows,
        "all_agree": all(r["agree"] for r in rows),
        "in_process": local,
        "locust": dist,
    }
    print(f"wrote {write_json(args.out, result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
