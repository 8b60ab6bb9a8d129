"""``wirecheck demo``: the README's main command, end to end."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.servers import run_wirecheck


def test_demo_runs_accept_through_the_taps_and_attributes_faults_to_every_side(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = run_wirecheck("demo", "--out", str(out), timeout=240)
    assert proc.returncode == 0, proc.stderr
    for name in (
        "report.html",
        "report.md",
        "report.json",
        "alerts.yml",
        "grafana-dashboard.json",
        "findings.json",
        "findings.xml",
        "findings.html",
        "capture.jsonl",
        "wirecheck.db",
        "ground-truth.jsonl",
        "ground-truth-score.json",
    ):
        assert (out / name).exists(), name
    report = json.loads((out / "report.json").read_text())
    assert [p["name"] for p in report["phases"]] == ["compat", "capacity", "cache", "interface"]
    # the simulated host and container are the recipe's: compat passes; the faulty gateway is rework
    assert report["phases"][0]["status"] == "pass"
    assert report["verdict"]["decision"] == "rework"
    assert any(r.startswith("interface.gateway:") for r in report["verdict"]["reasons"])
    # the simulator's DCGM exporter gave the GPU memory curves: every step sampled, every GPU drawn
    capacity = report["phases"][1]
    gpu = next(c for c in capacity["checks"] if c["id"] == "capacity.gpu-memory")
    assert gpu["status"] == "pass" and capacity["data"]["gpu"]["source"] == "dcgm", gpu
    assert report["verdict"]["simulated"] and any("DCGM" in s for s in report["verdict"]["simulated_sources"])
    assert (out / "report.html").read_text().count('class="gpu"') == 8  # the simulated host's 8 GPUs
    iface = report["phases"][3]["data"]
    assert iface["attributed_from"].startswith("both taps")
    assert {"gateway", "model", "parser"} <= set(iface["errors_by_fault"])
    res = json.loads((out / "findings.json").read_text())
    assert res["summary"]["pairs"] * 2 == res["exchanges"]  # both taps saw every request
    faults = set(res["summary"]["by_fault"])
    assert {"gateway", "model", "parser", "engine"} <= faults, faults
    assert "unknown" not in faults  # two taps: nothing is left unattributed
    gateway_rules = {f["rule"] for f in res["findings"] if f["fault"] == "gateway"}
    assert {"gateway-reasoning-dropped", "gateway-finish-reason-changed"} <= gateway_rules
    assert "verdict: rework" in proc.stdout and "gateway" in proc.stdout and "report.html" in proc.stdout
    # against what the simulator and the gateway say they injected, every
    # finding is explained and every observable fault found, class by class
    score = json.loads((out / "ground-truth-score.json").read_text())
    table = {c["fault"]: c for c in score["classes"]}
    demo_classes = {
        "model.invalid_json",
        "model.undeclared_tool",
        "parser.markup_in_content",
        "engine.error_mid_stream",
        "reasoning_dropped",
        "finish_reason_changed",
        "stream_buffered",
    }
    assert demo_classes <= set(table), sorted(table)
    for name in demo_classes:
        c = table[name]
        assert c["injected"] > 0, c
        assert (c["precision"], c["recall"]) == (1.0, 1.0), c
    for c in table.values():  # a class not seen on the wire may have no flag, never a wrong one
        assert c["precision"] in (None, 1.0) and c["recall"] in (None, 1.0), c
        assert not c["not_observable"] or c["not_observable_why"], c  # hidden only with a reason
    assert score["unexplained"] == [] and score["unmatched_truth"] == 0, score
    assert score["perfect"] is True
    truth_lines = (out / "ground-truth.jsonl").read_text().splitlines()
    assert {json.loads(line)["side"] for line in truth_lines} == {"engine", "gateway"}
    assert "## Ground truth (demo only)" in (out / "report.md").read_text()
    assert 'id="ground-truth"' in (out / "report.html").read_text()
    assert "precision and recall per fault class" in proc.stdout and "all 1.00" in proc.stdout
