"""The catalogue of acceptance checks: every check, declared once, with the judge that rules on it.

A judge is a small function over one phase's typed facts, registered with :func:`judge`. Its
docstring is the catalogue's text: the first paragraph is the check's title, the rest its doc (why
the check exists). The decorator declares what a failure or missing evidence leads to and the report
section that shows the evidence::

    @judge("cache.warm-a", leads_to=(REWORK,), section="Cache")
    def _(f: CacheFacts) -> Iterator[Ruling]:
        '''Warm A (the same prompt again) hits most of the prompt.

        Why, and what vLLM counts.'''
        yield passed(...) if ... else failed(...)

A judge yields nothing when the facts say its check cannot be judged (an earlier finding decides the
phase), one :class:`Ruling` for its check, or, for a numbered family (an id ending in ``.``: one check
per startup warning), one per member. :func:`judge_facts` runs every judge of a phase over its facts
and builds the phase's :class:`~._model.Check` list, whose title and consequence come from here only:
a report cannot disagree with the catalogue. ``docs/acceptance.md`` carries the table generated from it
(:func:`render_catalogue`; a test fails when the docs are stale).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "LIMITED",
    "PHASE_NAMES",
    "REWORK",
    "SCALE_UP",
    "CheckSpec",
    "Ruling",
    "checks",
    "declared",
    "failed",
    "info",
    "judge",
    "missing",
    "passed",
    "render_catalogue",
    "warned",
]

#: the phases, in the order they run (the phase list in ``phases`` follows it)
PHASE_NAMES = ("compat", "capacity", "cache", "interface")

#: what a failed or missing check leads to: the environment must change, resources must grow, or the
#: deployment may go live with bounds
REWORK, SCALE_UP, LIMITED = "rework", "scale-up", "limited"
CONSEQUENCES = (REWORK, SCALE_UP, LIMITED)
STATUSES = ("pass", "fail", "warn", "missing", "info")


@dataclass(frozen=True, slots=True)
class Ruling:
    """What a judge says about its check: a status, the detail a reviewer reads, the evidence, and for
    a failure or missing evidence its consequence (one of the declared; needed when several are)."""

    status: str
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    leads_to: str | None = None
    #: a numbered family's member (``compat.log-warning.3``)
    number: int | None = None


def passed(detail: str, evidence: dict[str, Any] | None = None) -> Ruling:
    return Ruling("pass", detail, evidence or {})


def failed(
    detail: str,
    evidence: dict[str, Any] | None = None,
    *,
    leads_to: str | None = None,
    number: int | None = None,
) -> Ruling:
    return Ruling("fail", detail, evidence or {}, leads_to, number)


def missing(
    detail: str,
    evidence: dict[str, Any] | None = None,
    *,
    leads_to: str | None = None,
    number: int | None = None,
) -> Ruling:
    """No evidence: the check cannot pass, and what it lacks leads where a failure would."""
    return Ruling("missing", detail, evidence or {}, leads_to, number)


def warned(detail: str, evidence: dict[str, Any] | None = None, *, number: int | None = None) -> Ruling:
    """Recorded, does not block."""
    return Ruling("warn", detail, evidence or {}, None, number)


def info(detail: str, evidence: dict[str, Any] | None = None) -> Ruling:
    return Ruling("info", detail, evidence or {})


Judge = Callable[[Any], Iterable[Ruling]]


@dataclass(frozen=True, slots=True)
class CheckSpec:
    id: str
    #: what it establishes, in one line
    title: str
    #: the verdicts a failure or missing evidence can lead to (the first when a ruling names none)
    leads_to: tuple[str, ...]
    #: the report section that shows its evidence
    section: str
    #: True when only a real GPU host can give the evidence that makes it pass
    needs_gpu_host: bool = False
    #: why the check exists (the docstring past its title)
    doc: str = ""
    func: Judge | None = None

    @property
    def phase(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def family(self) -> bool:
        return self.id.endswith(".")

    def member(self, number: int | None) -> str:
        """The id a ruling gets: a family's member is numbered, a plain check is its own id."""
        if self.family != (number is not None):
            raise ValueError(f"check {self.id}: a ruling {'needs' if self.family else 'takes no'} number")
        return f"{self.id}{number}" if number is not None else self.id


_CATALOGUE: dict[str, CheckSpec] = {}
_ID = re.compile(r"^(?:" + "|".join(PHASE_NAMES) + r")\.[a-z0-9]+(?:-[a-z0-9]+)*\.?$")


def judge(
    check_id: str,
    *,
    leads_to: tuple[str, ...],
    section: str,
    needs_gpu_host: bool = False,
    title: str | None = None,
) -> Callable[[Judge], Judge]:
    """Register the judge of ``check_id`` and declare the check (see the module docstring).
    ``title``: a check whose title is not the first paragraph of the docstring."""
    if not _ID.match(check_id):
        raise ValueError(f"check id {check_id!r}: <phase>.<kebab-case>, a family ending in '.'")
    if not set(leads_to) <= set(CONSEQUENCES):
        raise ValueError(f"check {check_id}: leads_to {leads_to} is not among {CONSEQUENCES}")

    def register(func: Judge) -> Judge:
        if check_id in _CATALOGUE:
            raise ValueError(f"check {check_id!r} is declared twice")
        head, doc = _title_and_doc(check_id, func.__doc__)
        spec = CheckSpec(check_id, title or head, leads_to, section, needs_gpu_host, doc, func)
        _CATALOGUE[check_id] = spec
        return func

    return register


def _title_and_doc(check_id: str, docstring: str | None) -> tuple[str, str]:
    head, _, rest = inspect.cleandoc(docstring or "").partition("\n\n")
    if not head:
        if sys.flags.optimize >= 2:  # python -OO drops docstrings: the catalogue shows ids only
            return check_id, ""
        raise ValueError(f"check {check_id!r} has no title: give its judge a docstring")
    return " ".join(head.split()), " ".join(rest.split())


def checks(phase: str | None = None) -> list[CheckSpec]:
    """The declared checks in catalogue order: by phase as they run, then as declared."""
    order = {name: i for i, name in enumerate(PHASE_NAMES)}
    specs = sorted(_CATALOGUE.values(), key=lambda s: order[s.phase])  # stable: declaration order kept
    return [s for s in specs if phase is None or s.phase == phase]


def declared(check_id: str) -> CheckSpec | None:
    """The declaration of ``check_id``: its own line, or the numbered family it belongs to."""
    spec = _CATALOGUE.get(check_id)
    if spec is not None:
        return spec
    head, _, tail = check_id.rpartition(".")
    fam = _CATALOGUE.get(head + ".")
    return fam if fam is not None and tail.isdigit() else None


def consequence(spec: CheckSpec, status: str, leads_to: str | None) -> str | None:
    """What a check of ``spec`` with ``status`` leads to: nothing unless it blocks; else ``leads_to``,
    which must be declared, or the only consequence declared."""
    if status not in STATUSES:
        raise ValueError(f"check {spec.id}: status {status!r}")
    if status not in ("fail", "missing"):
        if leads_to is not None:
            raise ValueError(f"check {spec.id}: a {status} leads nowhere")
        return None
    if leads_to is None:
        if len(spec.leads_to) != 1:
            raise ValueError(f"check {spec.id}: a {status} must name one of {spec.leads_to}")
        return spec.leads_to[0]
    if leads_to not in spec.leads_to:
        raise ValueError(f"check {spec.id}: leads to {leads_to}, declared {spec.leads_to}")
    return leads_to


def render_catalogue() -> str:
    """The Markdown table docs/acceptance.md carries between its catalogue markers."""
    lines = [
        "| check | phase | what it establishes | failure leads to | report section | real GPU host |",
        "|---|---|---|---|---|---|",
    ]
    for c in checks():
        cid = f"`{c.id}N`" if c.family else f"`{c.id}`"
        leads = ", ".join(c.leads_to) or "listed (warn)"
        lines.append(
            f"| {cid} | {c.phase} | {c.title} | {leads} | {c.section} | {'yes' if c.needs_gpu_host else 'no'} |"
        )
    lines += ["", "Why each check:", ""]
    lines += [f"- `{c.id}{'N' if c.family else ''}`: {c.doc}" for c in checks() if c.doc]
    return "\n".join(lines) + "\n"
