"""``wirecheck demo``: the README's main command, end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_demo_attributes_faults_to_every_side_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "wirecheck", "demo", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("report.md", "findings.json", "findings.xml", "capture.jsonl", "wirecheck.db"):
        assert (out / name).exists(), name
    res = json.loads((out / "findings.json").read_text())
    assert res["exchanges"] == 96 and res["summary"]["pairs"] == 48
    faults = set(res["summary"]["by_fault"])
    assert {"gateway", "model", "parser", "engine"} <= faults, faults
    assert "unknown" not in faults  # two taps: nothing is left unattributed
    gateway_rules = {f["rule"] for f in res["findings"] if f["fault"] == "gateway"}
    assert {"gateway-reasoning-dropped", "gateway-finish-reason-changed"} <= gateway_rules
    assert "gateway" in proc.stdout and "report.md" in proc.stdout
    # seeded: the same run gives the same findings
    again = subprocess.run(
        [sys.executable, "-m", "wirecheck", "demo", "--out", str(tmp_path / "again")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0
    res2 = json.loads((tmp_path / "again" / "findings.json").read_text())
    assert res2["summary"]["by_rule"] == res["summary"]["by_rule"]
