"""report.html carries everything report.md shows: the same section headings, and every key
figure report.md prints (the verdict, its reasons, next steps, the suggested rate limit, rollback
conditions, limits, the checklist, every check's detail, the tables' cells, the workload, the OOM
evidence) is in the HTML page's text. Both files are parsed, from reports of recorded facts that
between them reach every section: a limited run over all four phases with the team's samples, an OOM
that blocked the phases after it, and a self-built comparison."""

from __future__ import annotations

import dataclasses
import html
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.acceptance import facts
from tests.acceptance.test_samples import team_bodies, write_bodies
from wirecheck.acceptance import AcceptanceResult, EngineInfo, Limits, PhaseResult, report_run
from wirecheck.acceptance.load import load_workload, workload_data
from wirecheck.acceptance.report import render_html, render_markdown


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


LIMITS = Limits(
    "10% of tenant traffic, at most 4 concurrent",
    "oncall-llm@team",
    "the alert rules in alerts.yml",
    max_retry_rate=0.25,
)
ENGINE = EngineInfo(version="0.33.0", model="moonshotai/Kimi-K3", fingerprint="vllm-0.33.0-tp8-ep-1a2b3c4d")
CURL = "curl -sN http://gateway.test/v1/chat/completions -H 'content-type: application/json' -d '{}'"


def _report(tmp: Path, judged_phases: list[PhaseResult], **options: object) -> AcceptanceResult:
    return report_run(
        facts.options(tmp, **options),  # type: ignore[arg-type]
        ENGINE,
        judged_phases[0].facts,  # type: ignore[arg-type]
        judged_phases,
        started=facts.START,
        finished=facts.START + 754,
        metrics=["http://engine.test/metrics"],
    )


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> AcceptanceResult:
    """All four phases: the team's requests in the ramp, a parser fault a retry fixes, and a shrunk
    scenario failure a retry fixes too."""
    tmp = tmp_path_factory.mktemp("parity")
    team = load_workload(str(write_bodies(tmp / "team.jsonl", team_bodies())), "http://gateway.test")
    steps = facts.ramp(1, 2, 4)
    sent = [s for st in steps for s in st.samples]
    workload = workload_data(team, sent, [i % len(team.bodies) for i in range(len(sent))])
    scenario = {
        "examples": 3,
        "ran": True,
        "requests": 20,
        "ok": False,
        "request": {"messages": [{"role": "user", "content": "Please call get for Tokyo."}]},
        "curl": CURL,
        "seed": 1,
        "note": "",
        "findings": [{"rule": "tool-markup-in-content", "fault": "parser", "message": "markup in content"}],
        "fixed_by_retry": True,
    }
    judged_phases = facts.phases(
        facts.compat(tmp),
        facts.capacity(steps, workload=workload),
        facts.cache(),
        facts.interface(21, recovered=(2, 9), scenarios=scenario),
    )
    return _report(tmp, judged_phases, limits=LIMITS)


def _oom(tmp: Path) -> AcceptanceResult:
    """An engine that died at c=2 and never came back: the OOM leads, cache and interface are blocked."""
    evidence = {
        "step": "ramp c=2",
        "concurrency": 2,
        "requests_in_step": 8,
        "step_wall_s": 2.0,
        "waiting_max": 0.0,
        "loading_finished": True,
        "input_tokens_max": 6200,
        "input_tokens_mean": 3100.5,
        "request_prompt_tokens_max": 6200,
        "request_prompt_tokens_mean": 3100.5,
        "max_output_tokens": 256,
        "max_model_len": 262144,
        "prefix_caching": True,
        "kv_offload": False,
        "kv_usage_before": 0.31,
        "kv_usage_after": 0.0,
        "gpu_memory_before": {"gpus": 8, "used_mib_max": 80000, "total_mib": 143771},
        "gpu_memory_after": {"gpus": 8, "used_mib_max": 512, "total_mib": 143771},
        "gpu_memory_peak_mib": 131000,
        "errors": ["HTTP 500: CUDA out of memory"],
        "recovered": False,
        "state": "dead (exited or left broken)",
        "recover_wait_s": 3,
    }
    steps = facts.ramp(1, 2, errors=8, error="HTTP 500: CUDA out of memory", oom=True)
    capacity = facts.capacity(steps, oom=evidence)
    assert capacity.stops_run is not None
    stopped = [PhaseResult(name, blocked=capacity.stops_run) for name in ("cache", "interface")]
    return _report(tmp, [*facts.phases(facts.compat(tmp), capacity), *stopped])


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
    res = _oom(tmp_path)
    assert res.verdict.oom is not None
    md, page = _files(res)
    assert "Out of memory (leads the verdict)" in md_sections(md)
    assert_parity(md, page)
    # the self-built comparison section, on the limited run's report
    diff = {
        "official_results": "official/report.json",
        "official_verdict": "go",
        "checks": [{"check": "compat.image", "official": "pass", "self_built": None}],
        "figures": [],
    }
    report = dataclasses.replace(limited.document, self_built=diff)
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
