"""Findings as text, JSON and JUnit XML, and the rule catalogue as Markdown (docs/rules.md)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any
from xml.etree import ElementTree as ET

from ._check import CheckResult
from ._families import FAMILIES, GENERIC
from ._known_bugs import KNOWN_BUGS
from ._registry import Finding, rules
from ._rules_apis import rule_endpoints
from ._rules_limits import RECORDS
from ._text import escape_surrogates, printable

__all__ = [
    "known_bug_line",
    "known_bugs_markdown",
    "render_json",
    "render_junit",
    "render_rules_markdown",
    "render_text",
]

_ORDER = {"error": 0, "warning": 1, "info": 2}


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_ORDER.get(str(f.severity), 3), f.exchange_id, f.rule))


def render_text(result: CheckResult, *, color: bool = False) -> str:
    lines = []
    for f in _sorted(result.findings):
        where = f.evidence.get("pointer", "")
        sev = str(f.severity).upper()
        if color:
            code = {"ERROR": "31", "WARNING": "33"}.get(sev, "36")
            sev = f"\x1b[{code}m{sev}\x1b[0m"
        # every field but the severity may hold wire text: escaped, so that it cannot drive the
        # terminal or forge lines of the report
        lines.append(
            f"{sev:7} {f.rule} [{f.fault}] {printable(f.tap)}:{printable(f.exchange_id)} {printable(where)}"
        )
        lines.append(f"        {printable(f.message)}")
        if "excerpt" in f.evidence:
            lines.append(f"        > {printable(f.evidence['excerpt'])}")
        if f.known_bug is not None:
            lines.append(f"        known bug: {printable(known_bug_line(f.known_bug))}")
    s = result.summary()
    by_sev = s["by_severity"]
    lines.append(
        f"{result.exchanges} exchange(s), {len(result.findings)} finding(s): "
        f"{by_sev.get('error', 0)} error, {by_sev.get('warning', 0)} warning, {by_sev.get('info', 0)} info"
        + (f"; {result.pairs} tap pair(s)" if result.pairs else "")
        + (f"; {result.twins} stream/non-stream pair(s)" if result.twins else "")
    )
    if result.lost:
        lines.append(f"{result.lost} exchange(s) lost: the store could not write them (see store-gap)")
    if result.cut:
        lines.append(
            f"{result.cut} exchange(s) judged before every exchange that might pair with them was read: "
            "the capture held more within a minute than the check holds at once (a larger window holds more)"
        )
    if result.late:
        lines.append(
            f"{result.late} exchange(s) read out of time order, after an exchange they might pair with was judged"
        )
    if s["by_fault"]:
        lines.append("by fault: " + ", ".join(f"{k} {v}" for k, v in s["by_fault"].items()))
    return "\n".join(lines) + "\n"


def render_json(result: CheckResult) -> str:
    return json_text(result.to_dict())


def json_text(value: Any) -> str:
    """The JSON report as UTF-8-encodable text, lone surrogates escaped."""
    return escape_surrogates(json.dumps(value, indent=2, ensure_ascii=False)) + "\n"


def render_junit(result: CheckResult, *, exchange_ids: list[str] | None = None) -> str:
    """One test case per exchange (suite ``wirecheck``); each error finding is a failure, warnings go
    to system-out so CI dashboards show them without failing."""
    by_ex: dict[str, list[Finding]] = defaultdict(list)
    for f in result.findings:
        by_ex[f.exchange_id].append(f)
    ids = exchange_ids if exchange_ids is not None else sorted(by_ex)
    # XML 1.0 forbids most C0 controls (even as references) and cannot encode lone surrogates: every
    # value is escaped so that the file parses with a strict parser whatever the model wrote;
    # newlines stay in element text, where they are lines of the log.
    suite = ET.Element("testsuite", name="wirecheck", tests=str(len(ids)))
    failures = 0
    for ex_id in ids:
        case = ET.SubElement(suite, "testcase", classname="wirecheck.exchange", name=printable(ex_id))
        errs = [f for f in by_ex.get(ex_id, []) if f.severity == "error"]
        rest = [f for f in by_ex.get(ex_id, []) if f.severity != "error"]
        if errs:
            failures += 1
            fail = ET.SubElement(
                case,
                "failure",
                message=printable(f"{errs[0].rule}: {errs[0].message}"[:500]),
                type=errs[0].rule,
            )
            fail.text = "\n".join(
                printable(
                    f"{f.rule} [{f.fault}] {f.message} at {f.evidence.get('pointer', '')}"
                    + (f" (known bug: {known_bug_line(f.known_bug)})" if f.known_bug else "")
                )
                for f in errs
            )
        if rest:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(
                printable(
                    f"{f.severity} {f.rule} [{f.fault}] {f.message}"
                    + (f" (known bug: {known_bug_line(f.known_bug)})" if f.known_bug else "")
                )
                for f in rest
            )
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def render_rules_markdown() -> str:
    """The rule catalogue, generated from the registry (kept in docs/rules.md; a test checks it)."""
    out = [
        "# Rule catalogue",
        "",
        "Generated from the rule registry by `wirecheck rules --markdown`; do not edit by hand.",
        "Each rule has a stable id, a default severity and a default fault. Attribution may change the",
        "fault of a finding: see the attribution section of the README and DESIGN.md.",
        "",
        "Endpoints: `chat` is `/v1/chat/completions`, `responses` `/v1/responses`, `messages` `/v1/messages`.",
        "A Responses or Messages exchange is read into the same message view as a chat completion",
        "(`contracts/_apis.py`), so the tool-call, reasoning and markup rules judge all three with the same",
        "ids; the `api-*` rules judge their typed event streams.",
        "",
    ]
    areas: dict[str, list[str]] = defaultdict(list)
    for r in rules():
        areas[r.area].append(r.id)
    for area in sorted(areas):
        out.append(f"## {area}")
        out.append("")
        out.append("| rule | severity | fault | scope | endpoints | checks |")
        out.append("|---|---|---|---|---|---|")
        by_id = {r.id: r for r in rules()}
        for rid in areas[area]:
            r = by_id[rid]
            out.append(
                f"| `{r.id}` | {r.severity} | {r.fault} | {r.scope} | {', '.join(rule_endpoints(r.id))} "
                f"| {r.summary.replace('|', '\\|')} |"
            )
        out.append("")
        for rid in areas[area]:
            r = by_id[rid]
            if r.doc:
                out.append(f"- `{r.id}`: {r.doc}")
        out.append("")
    out.append("## Records of the checker itself")
    out.append("")
    out.append("Not rules: findings the checker writes about exchanges it could not judge.")
    out.append("")
    for rid, what in RECORDS.items():
        out.append(f"- `{rid}`: {what}")
    out.append("")
    out += _families_markdown()
    out.append("")
    out += known_bugs_markdown()
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _families_markdown() -> list[str]:
    """The family table (contracts/_families.py), and what adding a family touches."""
    out = [
        "## Families",
        "",
        "One row per dialect, in `contracts/_families.py`; `wirecheck check --family` and `accept --family`",
        "take these names. The markup rules look for every family's markup in any response; the id rule",
        "judges only families whose model writes its own ids. A model that no row matches is judged by the",
        f"generic contracts only (`{GENERIC}`), with a note: never by another family's expectations.",
        "",
        "| family | models | name patterns | tool-call markup | reasoning markup | ids | vLLM flags |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in FAMILIES.values():
        models = ", ".join(f"`{p}`" for p in f.models)
        tools = ", ".join(f"`{p}`" for p in f.tool_markup)
        think = ", ".join(f"`{p}`" for p in f.reasoning_markup)
        out.append(
            f"| `{f.name}` | {f.title} | {_cell(models)} | {_cell(tools)} | {_cell(think)} "
            f"| {_cell(f.id_shape)} | `{f.command_line}` |"
        )
    out += [
        "",
        "### Adding a family",
        "",
        "1. `contracts/_families.py`: one `Family` row (name = vLLM's `--tool-call-parser`, model-name",
        "   patterns, markup, special tokens, id format, reasoning parser, recipe flags), citing vLLM's parser",
        "   source in a comment. The rules, `CheckConfig`, the CLI's `--family` choices and auto-detection,",
        "   acceptance compat's flag check and the simulator's model names and startup log read it from there.",
        "2. `sim/_agent.py`: a writer for the family's raw markup, and `sim/_parsers.py`: a parser that does",
        "   what vLLM's parser does with it (the simulator's own code, never the checker's patterns).",
        "3. `sim/_families.py`: one `SimFamily` row joining the two, with vLLM's streaming style per dialect.",
        "4. Only when the family's special tokens are not `<|...|>`-shaped (DeepSeek's full-width bars,",
        "   MiniMax's `<minimax:tool_call>`): `sim/_tokens.py`, so that the simulator streams each as one token.",
        "5. `docs/rules.md`: regenerate (`wirecheck rules --markdown > docs/rules.md`).",
        "",
        "tests/contracts/test_families.py then serves, checks and breaks the new family with no edit: it iterates",
        "over the table. Nothing else changes: not the rules, the CLI, acceptance, nor the tests.",
    ]
    return out


def known_bug_line(bug: dict[str, Any]) -> str:
    """One line for a finding's ``known_bug``: id, party, fixed version, link."""
    fixed = f"fixed in {bug['fixed_in']}" if bug.get("fixed_in") else "no fixed release known"
    where = ""
    if bug.get("status") == "affected":
        where = f"; this server ({bug.get('version')}) is affected"
    elif bug.get("fixed_in"):
        where = f"; applies if the server is older than {bug['fixed_in']}"
    return f"{bug['id']} ({bug['party']}, {fixed}{where}) {bug['url']}"


def known_bugs_markdown() -> list[str]:
    """The known-bug catalogue (contracts/_known_bugs.py) for docs/rules.md."""
    out = [
        "## Known bugs",
        "",
        "One entry per upstream issue or pull request (`contracts/_known_bugs.py`; `wirecheck rules",
        "--known-bugs` lists them). After the rules ran, a finding that an entry explains (one of its rules,",
        "and the exchange matches its predicate) carries `known_bug`: the link, the party, the fixed version,",
        "and whether the server is affected. The version is read off the wire (vLLM's `system_fingerprint`,",
        "written since 0.20; LiteLLM's `x-litellm-version` header) or given (`check --server-version`,",
        "an exchange's `server_version`). Inside the range, and with the bug's own signature on the exchange",
        "(its bytes or its triggering request), the finding takes the entry's party; outside the range",
        "nothing is said; with no version the finding names the bug conditionally.",
        "",
        "| id | party | product | affected | shape on the wire | rules |",
        "|---|---|---|---|---|---|",
    ]
    for b in KNOWN_BUGS:
        if b.fixed_in:
            span = f"{b.since or '…'} to <{b.fixed_in}"
        elif b.fixed:
            span = f"{b.since or '…'} to a fix (release not determined)"
        else:
            span = f"{b.since or '…'} and later (open)"
        rules_cell = ", ".join(f"`{r}`" for r in b.rules)
        out.append(
            f"| [{b.id}]({b.url}) | {b.party} | {b.product} | {_cell(span)} | {_cell(b.title)}: "
            f"{_cell(b.shape)} | {rules_cell} |"
        )
    return out
