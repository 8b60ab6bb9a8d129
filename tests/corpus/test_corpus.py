"""The corpus keeps its shape, and the checker keeps every case it got right.

The score itself (precision and recall per party, per API) is scripts/score_corpus.py's; this test holds
the corpus to what makes it a measuring stick (size, mix, sources, ids of its own per case) and fails
when a case listed in the baseline stops being judged right.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from tests.corpus import load_cases
from tests.corpus.case import API, Case
from tests.corpus.score import BASELINE, compare, read_baseline, score
from wirecheck.contracts import rules

ROOT = Path(__file__).parents[2]
CASES = load_cases()
_IDS = re.compile(
    rb"(chatcmpl-tool-[0-9a-f]{16}|chatcmpl-[0-9a-f]{16}|resp_[0-9a-f]{16}|msg_[0-9a-f]{16}|"
    rb"rs_[0-9a-f]{16}|fc_[0-9a-f]{16}|call_[0-9a-f]{16})"
)


def test_corpus_size_and_mix() -> None:
    assert len(CASES) >= 80
    legal = sum(c.legal for c in CASES)
    assert legal * 3 >= len(CASES), f"{legal} legal of {len(CASES)}: a third must be legal shapes"
    per_api = Counter(c.api for c in CASES)
    for api in API:
        assert per_api[api] * 5 >= len(CASES), f"{api}: {per_api[api]} of {len(CASES)} cases"
    assert {c.streamed for c in CASES} == {True, False}
    assert {c.taps for c in CASES} == {"single", "dual"}
    parties = {c.party for c in CASES if not c.legal}
    assert parties == {"model", "parser", "gateway", "caller", "engine"}


def test_case_ids_unique() -> None:
    dup = [k for k, n in Counter(c.id for c in CASES).items() if n > 1]
    assert not dup


def test_rule_classes_name_registered_rules() -> None:
    ids = [r.id for r in rules()]
    for c in CASES:
        for pattern in c.rules:
            assert any(fnmatchcase(i, pattern) for i in ids), f"{c.id}: {pattern!r} matches no rule"


def _prompt(c: Case) -> str:
    for ex in c.exchanges:
        body = json.loads(ex.request.body or b"null")
        if not isinstance(body, dict):
            continue
        if isinstance(body.get("input"), str):
            return str(body["input"])
        turns = body.get("messages") or body.get("input") or []
        for m in turns:
            if isinstance(m, dict) and m.get("role") == "user":
                content = m.get("content")
                return content if isinstance(content, str) else json.dumps(content)
    raise AssertionError(f"{c.id}: no prompt")


def _wire_ids(c: Case) -> set[bytes]:
    found: set[bytes] = set()
    for ex in c.exchanges:
        if ex.response is not None:
            found.update(_IDS.findall(ex.response.content))
    return found


def test_every_case_has_ids_times_and_prompt_of_its_own() -> None:
    exchange_ids = Counter(ex.id for c in CASES for ex in c.exchanges)
    assert not [k for k, n in exchange_ids.items() if n > 1]
    owner: dict[bytes, str] = {}
    for c in CASES:
        for i in _wire_ids(c):
            assert owner.setdefault(i, c.id) == c.id, f"{i!r} in {owner[i]} and {c.id}"
    starts = Counter(ex.started_at for c in CASES for ex in c.exchanges if ex.tap in ("engine", "caller"))
    shared = {c.id for c in CASES for ex in c.exchanges if starts[ex.started_at] > 1 and c.taps == "single"}
    assert not shared, f"cases sharing a start time: {sorted(shared)}"
    prompts = Counter(_prompt(c) for c in CASES)
    assert not [p for p, n in prompts.items() if n > 1]


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return score(CASES)


def test_no_case_of_the_baseline_regressed(report: dict[str, Any]) -> None:
    baseline = read_baseline()
    assert baseline <= {c.id for c in CASES}, f"{BASELINE.name} names cases the corpus lacks"
    lost, _gained = compare(report, baseline)
    assert not lost, (
        f"judged right in {BASELINE.name}, not any more: {lost} "
        "(python scripts/score_corpus.py shows what each drew)"
    )


def test_score_script_prints_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "score.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "score_corpus.py"), "--json", str(out), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "party" in proc.stdout and "precision" in proc.stdout
    data = json.loads(out.read_text())
    assert data["cases"] == len(CASES)
    assert set(data["by_api"]) == set(API)
    assert len(data["verdicts"]) == len(CASES)
