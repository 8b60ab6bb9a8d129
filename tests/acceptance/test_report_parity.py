"""report.html carries everything report.md shows: the same section headings, and every key
figure report.md prints (the verdict, its reasons, next steps, the suggested rate limit, rollback
conditions, limits, the checklist, every check's detail, the tables' cells, the workload, the OOM
evidence) is in the HTML page's text. Both files are parsed, from real ``accept`` runs on the simulator
that between them reach every section: a limited run over all four phases with the team's samples,
an OOM, and a self-built comparison."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.runs import FAST, run_accept
from tests.acceptance.test_samples import team_bodies, write_bodies
from wirecheck.acceptance import AcceptanceResult, CapacityPlan, Limits
from wirecheck.acceptance._report import render_html, render_markdown
from wirecheck.sim import SimConfig, parse_faults


class _Page(HTMLParser):
    """The page's headings and its text, each element's text set apart by a space."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.text: list[str] = []
        #: every table row, as its cells' texts
        self.rows: list[list[str]] = []
        self._heading: list[str] | None = None
        self._cell: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "svg"):
            self._skip += 1  # CSS, and plot labels (the figures must be in the page's text, not only a plot)
        elif tag in ("h1", "h2", "h3"):
            self._heading = []
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        self.text.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "svg"):
            self._skip -= 1
        elif tag in ("h1", "h2", "h3") and self._heading is not None:
            self.headings.append(_norm("".join(self._heading)))
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(_norm("".join(self._cell)))
            self._cell = None
        self.text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        self.text.append(data)
        if self._heading is not None:
            self._heading.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _md_text(s: str) -> str:
    """A Markdown fragment as the reader sees it: no backticks, bold marks or table escapes."""
    return _norm(s.replace("\\|", "|").replace("**", "").replace("`", ""))


def md_sections(md: str) -> list[str]:
    return [_md_text(line.lstrip("#")) for line in md.splitlines() if re.match(r"#{1,3} ", line)]


def md_facts(md: str) -> list[str]:
    """Every figure and statement report.md shows, one string each."""
    facts: list[str] = []
    code = False
    for raw in md.splitlines():
        line = raw.rstrip()
        if line.startswith("```"):
            code = not code
            continue
        if code:
            facts.append(_norm(line))  # the shrunk request's curl line, the self-built comparison
            continue
        if not line.strip() or re.match(r"#{1,3} ", line) or line.startswith("|"):
            continue  # headings are md_sections, tables are compared row by row (md_rows)
        text = line.strip()
        if text.startswith("> "):
            text = text[2:]
        if text.startswith("- "):
            text = text[2:]
            m = re.match(r"\[[ x-]\] (.*) — (.*)$", text)
            if m:  # a checklist item and its evidence
                facts += [_md_text(m.group(1)), _md_text(m.group(2))]
                continue
            # "key: value": the HTML page sets the key in its own column; a reason that starts with a
            # check id ("capacity.ramp: ...") is one statement in both formats
            key, sep, value = text.partition(": ")
            if sep and len(key) <= 24 and "." not in key:
                text = value
        if text.endswith(":"):
            continue  # a label for the list or block that follows ("key log lines:"): not a figure
        if text.startswith("Files: "):
            facts += [_md_text(f) for f in text[len("Files: ") :].split(", ")]
            continue
        facts.append(_md_text(text))
    return [f for f in facts if f]


def md_rows(md: str) -> list[list[str]]:
    """Each table row of report.md, as its cells (header and rule rows left out: a header names the
    columns in each format's own words)."""
    rows: list[list[str]] = []
    run = 0
    for line in md.splitlines():
        if not line.startswith("|"):
            run = 0
            continue
        run += 1
        cells = [_md_text(c) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if run == 1 or set("".join(cells)) <= set("-: "):
            continue
        rows.append(cells)
    return rows


def _holds(html_row: list[str], md_row: list[str]) -> bool:
    """The HTML row has every non-empty cell of the Markdown row (an HTML table may have more)."""
    left = list(html_row)
    for c in md_row:
        if not c:
            continue
        if c not in left:
            return False
        left.remove(c)
    return True


def assert_parity(md: str, page: str) -> None:
    p = _Page()
    p.feed(page)
    html_text = _norm("".join(p.text))
    missing_sections = [s for s in md_sections(md) if s not in p.headings]
    assert not missing_sections, f"report.md sections missing from report.html: {missing_sections}"
    missing = [f for f in md_facts(md) if f not in html_text]
    missing += [" | ".join(r) for r in md_rows(md) if not any(_holds(h, r) for h in p.rows)]
    assert not missing, f"{len(missing)} report.md figures missing from report.html: {missing[:8]}"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceResult:
    tmp = tmp_path_factory.mktemp("parity")
    cfg = SimConfig(**FAST, faults=parse_faults("parser.markup_in_content=0.08", seed=5))  # type: ignore[arg-type]
    return run_accept(
        tmp,
        cfg,
        limits=Limits(
            "10% of tenant traffic, at most 4 concurrent",
            "oncall-llm@team",
            "the alert rules in alerts.yml",
            max_retry_rate=0.25,
        ),
        interface_requests=21,
        samples=str(write_bodies(tmp / "team.jsonl", team_bodies())),
    )


def _files(res: AcceptanceResult) -> tuple[str, str]:
    return Path(res.files["markdown"]).read_text(), Path(res.files["html"]).read_text()


def test_a_limited_run_over_every_phase_shows_the_same_in_both_formats(limited: AcceptanceResult) -> None:
    assert limited.verdict.decision == "limited", limited.verdict.reasons
    md, page = _files(limited)
    # the comparison sees what matters: these are among the figures it compared
    facts = md_facts(md)
    sug = limited.report["verdict"]["limits"]["suggested"]
    for expected in (
        f"Verdict: {limited.verdict.label}",
        *limited.verdict.reasons,
        sug["scope"],
        sug["rollback"],
        "10% of tenant traffic, at most 4 concurrent",
        "oncall-llm@team",
    ):
        assert _norm(expected) in facts, expected
    assert any(f.startswith("--samples ") for f in facts), "the workload line"
    sections = md_sections(md)
    for s in ("Evidence", "Checklist", "Next steps suggested from the measurements"):
        assert s in sections, s
    assert_parity(md, page)


def test_an_oom_and_a_self_built_comparison_show_the_same_in_both_formats(
    tmp_path: Path, limited: AcceptanceResult
) -> None:
    cfg = SimConfig(**FAST, oom_at_tokens=6000, oom_recover_s=20)  # type: ignore[arg-type]
    res = run_accept(
        tmp_path,
        cfg,
        phases=("capacity",),
        plan=CapacityPlan(ramp=[1, 2, 4], long_input_turns=[12], soak_requests=2),
    )
    assert res.verdict.oom is not None
    md, page = _files(res)
    assert "Out of memory (leads the verdict)" in md_sections(md)
    assert_parity(md, page)
    # the self-built comparison section, on the limited run's report
    report: dict[str, Any] = json.loads(Path(limited.files["json"]).read_text())
    report["self_built_vs_official"] = {
        "official_results": "official/report.json",
        "official_verdict": "go",
        "checks": [{"check": "compat.image", "official": "pass", "self_built": None}],
        "figures": [],
    }
    assert_parity(render_markdown(report), render_html(report))


def test_the_comparison_fails_when_the_html_page_drops_a_figure(limited: AcceptanceResult) -> None:
    # a guard that cannot fail guards nothing: take the suggested rollback out of the page
    md, page = _files(limited)
    rollback = limited.report["verdict"]["limits"]["suggested"]["rollback"]
    assert html.escape(rollback, quote=False) in page
    with pytest.raises(AssertionError, match="figures missing"):
        assert_parity(md, page.replace(html.escape(rollback, quote=False), "(gone)"))
    with pytest.raises(AssertionError, match="sections missing"):
        assert_parity(md, page.replace("<h2>Checklist</h2>", "<p>Checklist</p>"))
    # a table the page lost (the cache probes' figures) is found row by row
    no_probes = re.sub(r'<table id="cache-probes">.*?</table>', "", page, flags=re.S)
    assert no_probes != page
    with pytest.raises(AssertionError, match="figures missing"):
        assert_parity(md, no_probes)
