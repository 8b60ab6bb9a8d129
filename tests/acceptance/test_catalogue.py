"""The acceptance phases as units and their declared checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wirecheck.acceptance import ALL_PHASES, CHECKS, PHASES, Check
from wirecheck.acceptance._catalogue import declared, render_catalogue

ROOT = Path(__file__).resolve().parents[2]


def test_docs_carry_the_generated_catalogue() -> None:
    text = (ROOT / "docs" / "acceptance.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- catalogue:begin -->\n(.*?)<!-- catalogue:end -->", text, re.S)
    assert m is not None, "docs/acceptance.md lost its catalogue markers"
    assert m.group(1) == render_catalogue(), "docs/acceptance.md is stale: paste render_catalogue()"


def test_the_phase_list_is_the_catalogues_and_each_phase_declares_its_checks() -> None:
    assert tuple(p.name for p in PHASES) == ALL_PHASES
    for p in PHASES:
        assert p.checks and all(c.startswith(p.name + ".") for c in p.checks)
    assert sum(len(p.checks) for p in PHASES) == len(CHECKS)
    assert len({c.id for c in CHECKS}) == len(CHECKS)


def test_an_undeclared_id_or_verdict_is_refused_and_numbered_families_resolve() -> None:
    with pytest.raises(ValueError, match="not declared"):
        Check("capacity.made-up", "pass", "x")
    with pytest.raises(ValueError, match="leads to"):
        Check("compat.driver", "fail", "x", leads_to="scale-up")
    spec = declared("compat.log-warning.12")
    assert spec is not None and spec.family
    assert declared("compat.log-warning.x") is None


def test_docs_map_every_checklist_item_to_its_checks_and_report_section() -> None:
    from wirecheck.acceptance._verdict import CHECKLIST, render_checklist

    text = (ROOT / "docs" / "acceptance.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- checklist:begin -->\n(.*?)<!-- checklist:end -->", text, re.S)
    assert m is not None and m.group(1) == render_checklist(), "run scripts/gen_acceptance_docs.py"
    for _title, keys in CHECKLIST:
        for k in keys:
            assert any(c.id == k or (k.endswith(".") and c.id.startswith(k)) for c in CHECKS), k
