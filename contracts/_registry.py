"""Findings, faults, and the one rule registry (the catalogue: docs/rules.md is generated from it).

A rule is a plain function registered with :func:`rule` and one signature; its docstring is the
catalogue's text, the first paragraph the summary and the rest the why::

    @rule("tool-call-args-schema", fault=Fault.MODEL)
    def _(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
        '''Tool call arguments break the tool's parameters schema.

        Why, and what vLLM does (issue numbers).'''

``scope`` says what the function receives: ``"exchange"`` one :class:`ExchangeView`; ``"taps"`` a
:class:`TapPair` (caller and engine side of one request); ``"twins"`` a :class:`TwinPair` (a streamed
and a non-streamed exchange of the same request at one tap); ``"set"`` a :class:`TapSet` (every
exchange of the check and its pairs: what only the whole capture shows). Rule ids are kebab-case and stable.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

from ._errors import ConfigError
from ._families import FAMILY_CHOICES

__all__ = [
    "ALL_ENDPOINTS",
    "CHAT",
    "MESSAGES",
    "REGISTRY",
    "RESPONSES",
    "CheckConfig",
    "Fault",
    "Finding",
    "Hit",
    "Rule",
    "Severity",
    "hit",
    "rule",
    "rules",
    "rules_judging",
    "rules_needed",
]


class Fault(StrEnum):
    MODEL = "model"
    PARSER = "parser"
    GATEWAY = "gateway"
    CALLER = "caller"
    ENGINE = "engine"
    UNKNOWN = "unknown"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(slots=True)
class Finding:
    rule: str
    severity: Severity
    fault: Fault
    message: str
    exchange_id: str
    tap: str
    evidence: dict[str, Any] = field(default_factory=dict)
    #: the upstream bug that explains this finding (contracts/_known_bugs.py): id, url, party,
    #: fixed_in, status (affected | version-unknown), version; None when no entry matches
    known_bug: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "exchange_id": self.exchange_id,
            "tap": self.tap,
            "rule": self.rule,
            "severity": str(self.severity),
            "fault": str(self.fault),
            "message": self.message,
            "evidence": self.evidence,
        }
        if self.known_bug is not None:
            out["known_bug"] = self.known_bug
        return out


@dataclass(slots=True)
class Hit:
    """What a rule yields; the runner turns it into a :class:`Finding`."""

    message: str
    pointer: str = ""
    excerpt: str | None = None
    event: int | None = None
    fault: Fault | None = None
    severity: Severity | None = None
    exchange_id: str | None = None  # pair rules name the exchange the finding belongs to
    tap: str | None = None


def hit(
    message: str,
    pointer: str = "",
    excerpt: Any = None,
    *,
    event: int | None = None,
    fault: Fault | None = None,
    severity: Severity | None = None,
) -> Hit:
    if excerpt is not None and not isinstance(excerpt, str):
        try:
            excerpt = json.dumps(excerpt, ensure_ascii=False)  # wire values read back as JSON
        except (TypeError, ValueError):
            excerpt = repr(excerpt)
    if isinstance(excerpt, str) and len(excerpt) > 240:
        excerpt = excerpt[:240] + "…"
    return Hit(message, pointer, excerpt, event if event is None or event >= 0 else None, fault, severity)


RuleFunc = Callable[[Any, "CheckConfig"], Iterator[Hit]]

#: the endpoints a rule may judge: ``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``
CHAT = "chat"
RESPONSES = "responses"
MESSAGES = "messages"
ALL_ENDPOINTS = (CHAT, RESPONSES, MESSAGES)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    summary: str
    severity: Severity
    fault: Fault
    scope: str
    func: RuleFunc
    area: str
    doc: str = ""
    #: the endpoints it judges (in ``ALL_ENDPOINTS`` order); the runner does not call it on an
    #: exchange of another endpoint. Empty: not declared (a test fails on that; the runner then
    #: calls it everywhere, as before endpoints were declared)
    endpoints: tuple[str, ...] = ()
    #: the facts of a view (``FACTS``, or ``anomaly:KIND``) of which it needs one to find anything,
    #: neither a finding nor an exception without: ``check_view`` does not call it on a view that
    #: has none of them. Empty: it is called on every view
    needs: frozenset[str] = frozenset()

    def judges(self, endpoint: str | None) -> bool:
        """Whether the rule runs on an exchange of ``endpoint`` (None: a path that is none of the
        three, which only the rules that look at HTTP and transport have anything to say about)."""
        return endpoint is None or not self.endpoints or endpoint in self.endpoints


class _Registry(dict[str, Rule]):
    """The rules by id, counting its changes: ``rules()`` sorts it once per change, not once per
    exchange checked (every view asks for its rules)."""

    version = 0

    def _changed(self) -> None:
        self.version += 1

    def __setitem__(self, key: str, value: Rule) -> None:
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed()

    def pop(self, key: str, *default: Any) -> Any:
        self._changed()
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Rule]:
        self._changed()
        return super().popitem()

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._changed()
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self._changed()
        super().update(*args, **kwargs)

    def clear(self) -> None:
        self._changed()
        super().clear()

    def __ior__(self, other: Any) -> Self:  # type: ignore[misc,override]  # dict's |= skips update()
        self.update(other)
        return self


REGISTRY: dict[str, Rule] = _Registry()
#: ("scope", scope), ("judging", scope, endpoint) or ("needed", scope, endpoint, facts) -> (the
#: registry's version, those rules); at most ``_RULES_MAX`` keys (facts come in many combinations)
_RULES: dict[tuple[Any, ...], tuple[int, list[Rule]]] = {}
_RULES_MAX = 4096
_ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_SCOPES = ("exchange", "taps", "twins", "set")

#: what a rule may need of a view (``needs``; ``_check.view_facts`` works them out): a tool call in
#: any choice of the answer; an output constraint (``output_constraint``: response_format,
#: structured_outputs); a history turn with tool calls or a tool result (and every /v1/messages
#: request, whose blocks the history rules read as sent); tools or a tool_choice in the request
#: (``tools``, or a declared tool in the view); reasoning text in any choice; an HTTP status of 400
#: or more; a transport error recorded on the exchange; an error frame inside the stream; a body
#: past the JSON bounds (``ExchangeView.limits``); and ``anomaly:KIND``, an anomaly of that kind
#: among the view's or its stream's
CALLS = "calls"
CONSTRAINT = "constraint"
TOOL_TURNS = "tool-turns"
TOOLS = "tools"
REASONING = "reasoning"
ERROR_STATUS = "error-status"
EXCHANGE_ERROR = "exchange-error"
ERROR_FRAMES = "error-frames"
LIMITS = "limits"
FACTS = frozenset(
    {CALLS, CONSTRAINT, TOOL_TURNS, TOOLS, REASONING, ERROR_STATUS, EXCHANGE_ERROR, ERROR_FRAMES, LIMITS}
)
ANOMALY = "anomaly:"


def rule(
    rule_id: str,
    *,
    fault: Fault,
    summary: str | None = None,
    severity: Severity = Severity.ERROR,
    scope: str = "exchange",
    area: str = "response",
    doc: str | None = None,
    endpoints: Iterable[str] = (),
    needs: Iterable[str] = (),
) -> Callable[[RuleFunc], RuleFunc]:
    """Register a rule. Its summary and doc (the catalogue's "why") are the function's docstring: the
    first paragraph, then the rest. A rule built from a table, where one function serves several
    rules, gives ``summary`` and ``doc`` instead (``summary`` alone keeps the docstring as
    the doc). ``endpoints``: which of ``ALL_ENDPOINTS`` it judges; every rule declares them (a test
    holds that), and stays silent on the others. ``needs``: the facts of a view it needs one of
    (``FACTS``; ``Rule.needs``), only where its code shows that without them it yields nothing and
    raises nothing (tests/contracts/test_rule_needs.py runs every rule on every case both ways)."""
    if not _ID.match(rule_id):
        raise ValueError(f"rule id {rule_id!r} is not kebab-case")
    if scope not in _SCOPES:
        raise ValueError(f"rule scope {scope!r} is not one of {_SCOPES}")
    wanted = set(endpoints)
    if wanted - set(ALL_ENDPOINTS):
        raise ValueError(f"rule {rule_id!r}: unknown endpoint(s) {sorted(wanted - set(ALL_ENDPOINTS))}")
    declared = tuple(e for e in ALL_ENDPOINTS if e in wanted)
    needed = frozenset(needs)
    unknown = {n for n in needed if n not in FACTS and not (n.startswith(ANOMALY) and len(n) > len(ANOMALY))}
    if unknown:
        raise ValueError(f"rule {rule_id!r}: unknown need(s) {sorted(unknown)}")

    def register(func: RuleFunc) -> RuleFunc:
        if rule_id in REGISTRY:
            raise ValueError(f"rule {rule_id!r} is registered twice")
        why: str | None = func.__doc__ if doc is None else doc
        first = summary
        if first is None:
            first, why = _summary_and_why(rule_id, func.__doc__)
        text = " ".join((why or "").split())
        REGISTRY[rule_id] = Rule(rule_id, first, severity, fault, scope, func, area, text, declared, needed)
        return func

    return register


def _summary_and_why(rule_id: str, docstring: str | None) -> tuple[str, str]:
    head, _, rest = inspect.cleandoc(docstring or "").partition("\n\n")
    if not head:
        if sys.flags.optimize >= 2:  # python -OO drops docstrings: the catalogue shows ids only
            return rule_id, ""
        raise ValueError(f"rule {rule_id!r} has no summary: give it a docstring (or summary=)")
    return " ".join(head.split()), rest


def _cached(key: tuple[Any, ...], build: Callable[[], list[Rule]]) -> list[Rule]:
    """``build()``, worked out again only when the registry has changed since (its ``version``)."""
    version = getattr(REGISTRY, "version", None)
    held = _RULES.get(key)
    if held is not None and version is not None and held[0] == version:
        return held[1]
    found = build()
    if version is not None:
        if len(_RULES) >= _RULES_MAX:  # bounded: a view's facts may come in many combinations
            _RULES.clear()
        _RULES[key] = (version, found)
    return found


def rules(scope: str | None = None) -> list[Rule]:
    """The registered rules, in id order (the catalogue order)."""
    return list(
        _cached(
            ("scope", scope),
            lambda: [r for _, r in sorted(REGISTRY.items()) if scope is None or r.scope == scope],
        )
    )


def rules_judging(scope: str, endpoint: str | None) -> list[Rule]:
    """The rules of ``scope`` that judge an exchange of ``endpoint``, in id order; the list is the
    registry's until it changes (do not change it): asking each of sixty rules again for every
    exchange was a fifth of the time the rules took."""
    return _cached(("judging", scope, endpoint), lambda: [r for r in rules(scope) if r.judges(endpoint)])


def rules_needed(scope: str, endpoint: str | None, facts: frozenset[str]) -> list[Rule]:
    """Those of :func:`rules_judging` that need nothing or one of these facts (``Rule.needs``), in
    id order; the list is the registry's until it changes (do not change it). A view of plain text
    has none of them, and most of the rules found nothing to look at and still cost a generator
    made, run and ended: half a microsecond each."""
    return _cached(
        ("needed", scope, endpoint, facts),
        lambda: [r for r in rules_judging(scope, endpoint) if not r.needs or not r.needs.isdisjoint(facts)],
    )


@dataclass(kw_only=True, slots=True)
class CheckConfig:
    """How to judge. Defaults fit vLLM 0.33; everything else is read off the traffic itself."""

    #: model family for id and markup expectations: auto (detected from the model name), a name
    #: in the family table (``FAMILY_NAMES``), or generic
    family: str = "auto"
    #: expect a reasoning field: None = when the request or model name says thinking is on
    expect_reasoning: bool | None = None
    #: the taps sit straight in front of the engine (no gateway): single-tap findings keep their fault
    direct: bool = False
    #: no effect now (kept so that existing callers still construct): pairing always falls
    #: back from the correlation id to the completion id and the request fingerprint
    pair_by_fingerprint: bool = True
    #: a stream counts as buffered when the caller saw its tokens over less than this share of the
    #: time the engine spread them over (and the engine spread them over at least buffer_min_span_ms)
    buffer_ratio: float = 0.1
    buffer_min_span_ms: float = 50.0
    #: rules to leave out, by id
    disabled: frozenset[str] = frozenset()
    #: the vLLM version behind the exchanges when the wire does not say it (``/version``); placed
    #: against the known-bug catalogue's version ranges
    server_version: str | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILY_CHOICES:
            raise ConfigError(f"family {self.family!r}: expected one of {', '.join(FAMILY_CHOICES)}")
        if not 0 < self.buffer_ratio < 1:
            raise ConfigError("buffer_ratio must be between 0 and 1")
