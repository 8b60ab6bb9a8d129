"""How the checker does on the corpus: each case judged on its own, then precision and recall per
party, "attributed right" per API, and false alarms on legal shapes.

A case's **leading findings** are its error findings, or its warnings when there is no error (info
never counts). Its **predicted party** is the one party the leading findings blame, ``mixed`` when they
blame several, ``none`` when there are none.

- A legal case is right when it draws no error and no warning (anything else is a false alarm).
- A faulty case is right when its predicted party is the party of the report and a leading finding
  of that party matches the case's rule class.

Per party P: recall = right cases of P / cases of P; precision = right cases of P / cases predicted
P (legal and other parties' cases predicted P count against it).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from wirecheck.contracts import CheckConfig, Finding, check_exchanges

from .case import API, PARTIES, Case

__all__ = ["BASELINE", "Verdict", "compare", "judge", "read_baseline", "render", "score", "write_baseline"]


@dataclass(frozen=True, slots=True)
class Verdict:
    case: Case
    findings: tuple[Finding, ...]
    predicted: str
    right: bool
    #: a leading finding of the expected party matches the rule class (faulty cases)
    rule_matched: bool

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "id": c.id,
            "api": c.api,
            "party": c.party or "legal",
            "predicted": self.predicted,
            "right": self.right,
            "rule_matched": self.rule_matched,
            "streamed": c.streamed,
            "taps": c.taps,
            "sources": list(c.sources),
            "findings": [
                {"rule": f.rule, "severity": str(f.severity), "fault": str(f.fault), "tap": f.tap}
                for f in self.findings
            ],
        }


def _leading(findings: list[Finding]) -> list[Finding]:
    errors = [f for f in findings if f.severity == "error"]
    return errors or [f for f in findings if f.severity == "warning"]


def judge(c: Case) -> Verdict:
    result = check_exchanges(list(c.exchanges), CheckConfig(**c.config))
    shown = [f for f in result.findings if f.severity in ("error", "warning")]
    lead = _leading(shown)
    parties = {str(f.fault) for f in lead}
    predicted = "none" if not parties else parties.pop() if len(parties) == 1 else "mixed"
    if c.legal:
        return Verdict(c, tuple(shown), predicted, not shown, False)
    matched = any(str(f.fault) == c.party and any(fnmatchcase(f.rule, p) for p in c.rules) for f in lead)
    return Verdict(c, tuple(shown), predicted, predicted == c.party and matched, matched)


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 3) if den else None


def score(cases: Iterable[Case]) -> dict[str, Any]:
    verdicts = [judge(c) for c in cases]
    by_api: dict[str, dict[str, Any]] = {}
    for api in API:
        vs = [v for v in verdicts if v.case.api == api]
        by_api[api] = {
            "cases": len(vs),
            "right": sum(v.right for v in vs),
            "share": _ratio(sum(v.right for v in vs), len(vs)),
            "faulty": sum(not v.case.legal for v in vs),
            "faulty_right": sum(v.right for v in vs if not v.case.legal),
            "legal": sum(v.case.legal for v in vs),
            "false_alarms": sum(not v.right for v in vs if v.case.legal),
        }
    by_party: dict[str, dict[str, Any]] = {}
    for party in PARTIES:
        expected = [v for v in verdicts if v.case.party == party]
        predicted = [v for v in verdicts if v.predicted == party]
        tp = sum(v.right for v in expected)
        by_party[party] = {
            "cases": len(expected),
            "right": tp,
            "predicted": len(predicted),
            "recall": _ratio(tp, len(expected)),
            "precision": _ratio(tp, len(predicted)),
        }
    by_shape: dict[str, dict[str, Any]] = {}
    for name, pick in (
        ("streamed", lambda v: v.case.streamed),
        ("non-streamed", lambda v: not v.case.streamed),
        ("single tap", lambda v: v.case.taps == "single"),
        ("dual tap", lambda v: v.case.taps == "dual"),
    ):
        vs = [v for v in verdicts if pick(v)]
        by_shape[name] = {"cases": len(vs), "right": sum(v.right for v in vs)}
    legal = [v for v in verdicts if v.case.legal]
    return {
        "cases": len(verdicts),
        "right": sum(v.right for v in verdicts),
        "share": _ratio(sum(v.right for v in verdicts), len(verdicts)),
        "legal": len(legal),
        "false_alarms": sorted(v.case.id for v in legal if not v.right),
        "by_api": by_api,
        "by_party": by_party,
        "by_shape": by_shape,
        "verdicts": [v.to_dict() for v in verdicts],
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render(report: dict[str, Any]) -> str:
    """The tables the score script prints."""
    out = [
        f"corpus: {report['cases']} cases, {report['right']} attributed right ({_pct(report['share'])}); "
        f"{report['legal']} legal shapes, {len(report['false_alarms'])} false alarm(s)",
        "",
        f"{'api':10} {'cases':>5} {'right':>5} {'share':>6} {'faulty':>7} {'f.right':>7} {'legal':>5} {'false alarms':>12}",
    ]
    for api, r in report["by_api"].items():
        out.append(
            f"{api:10} {r['cases']:5} {r['right']:5} {_pct(r['share']):>6} {r['faulty']:7} "
            f"{r['faulty_right']:7} {r['legal']:5} {r['false_alarms']:12}"
        )
    out += ["", f"{'party':10} {'cases':>5} {'right':>5} {'predicted':>9} {'recall':>7} {'precision':>9}"]
    for party, r in report["by_party"].items():
        out.append(
            f"{party:10} {r['cases']:5} {r['right']:5} {r['predicted']:9} {_pct(r['recall']):>7} "
            f"{_pct(r['precision']):>9}"
        )
    out += ["", f"{'shape':13} {'cases':>5} {'right':>5}"]
    for name, r in report["by_shape"].items():
        out.append(f"{name:13} {r['cases']:5} {r['right']:5}")
    wrong = [v for v in report["verdicts"] if not v["right"]]
    if wrong:
        out += ["", "not right:"]
        for v in wrong:
            got = ", ".join(sorted({f"{f['rule']} [{f['fault']}]" for f in v["findings"]})) or "no finding"
            out.append(f"  {v['id']} ({v['api']}, expected {v['party']}, predicted {v['predicted']}): {got}")
    return "\n".join(out) + "\n"


#: the cases judged right when the baseline was last recorded (scripts/score_corpus.py --write-baseline)
BASELINE = Path(__file__).with_name("baseline.json")


def read_baseline(path: Path = BASELINE) -> set[str]:
    if not path.exists():
        return set()
    return set(json.loads(path.read_text(encoding="utf-8"))["right"])


def write_baseline(report: dict[str, Any], path: Path = BASELINE) -> None:
    right = sorted(v["id"] for v in report["verdicts"] if v["right"])
    body = {
        "about": "corpus cases judged right; a case listed here that stops being right fails the corpus test",
        "cases": report["cases"],
        "right": right,
    }
    path.write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")


def compare(report: dict[str, Any], baseline: set[str]) -> tuple[list[str], list[str]]:
    """(regressed, improved): baseline cases no longer right, right cases not in the baseline."""
    right = {v["id"] for v in report["verdicts"] if v["right"]}
    return sorted(baseline - right), sorted(right - baseline)
