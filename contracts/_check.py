"""Run every rule over a set of exchanges and attribute each finding (DESIGN.md, attribution).

Single tap, weaker attribution: a tap can only vouch for its own side. The caller tap decides caller
faults; the engine tap decides model, parser and engine faults. What a tap cannot decide becomes
``unknown``, and the message says which tap was missing (unless ``direct``: no gateway in between).

Dual tap: a caller-side finding that the engine side shares keeps the engine side's fault (it was
already wrong when vLLM sent it); one the engine side lacks was introduced between the taps: gateway.
An engine-side request finding the caller side lacks means the gateway broke the request.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import (  # noqa: F401 - registers rules
    _evidence,
    _rules_answer,
    _rules_apis,
    _rules_content,
    _rules_history,
    _rules_limits,
    _rules_markup,
    _rules_message,
    _rules_pairs,
    _rules_request,
    _rules_stream,
    _rules_twins,
)
from ._apis import API_ENDPOINTS
from ._bugs import name_known_bugs
from ._exchange import Exchange
from ._known_bugs import KNOWN_BUGS
from ._pairs import ENGINE, TapPair, TapSet, pair_taps, pair_twins
from ._registry import (
    ANOMALY,
    CALLS,
    CONSTRAINT,
    ERROR_FRAMES,
    ERROR_STATUS,
    EXCHANGE_ERROR,
    LIMITS,
    MESSAGES,
    REASONING,
    REGISTRY,
    TOOL_TURNS,
    TOOLS,
    CheckConfig,
    Fault,
    Finding,
    Hit,
    Rule,
    Severity,
    rules,
    rules_judging,
    rules_needed,
)
from ._rules_limits import CHECK_CRASHED
from ._rules_request import TRUNCATION_SAFE, truncated_sides
from ._translate import answer_kept, bridge_spelling
from ._view import ExchangeView, build_view, output_constraint

__all__ = [
    "CheckResult",
    "Judged",
    "check_exchanges",
    "check_view",
    "crashed",
    "judge",
    "judge_set",
    "view_facts",
    "view_or_crash",
]

_RESPONSE_FAULTS = frozenset({Fault.MODEL, Fault.PARSER, Fault.ENGINE})


@dataclass(slots=True)
class CheckResult:
    exchanges: int = 0
    findings: list[Finding] = field(default_factory=list)
    pairs: int = 0
    #: how the pairs were found: correlation, completion-id, fingerprint
    paired_by: dict[str, int] = field(default_factory=dict)
    #: engine attempts that a gateway retry made besides the one that answered
    retries: int = 0
    twins: int = 0
    taps: list[str] = field(default_factory=list)
    #: exchanges the store could not write (its gap rows): evidence missing from this result
    lost: int = 0
    #: ``check_stream``: exchanges judged before every exchange that might pair with them was read
    #: (more were recorded within a minute than it holds at once)
    cut: int = 0
    #: ``check_stream``: exchanges read out of time order after a possible partner was judged
    late: int = 0
    #: with ``focus``: the ids whose findings here are those of the whole capture (the focused ones
    #: and those that pair with one); the findings of the others may lack what their own partners add
    whole: set[str] | None = None

    @property
    def errors(self) -> int:
        return sum(1 for f in self.findings if f.severity == "error")

    def summary(self) -> dict[str, Any]:
        return {
            "by_fault": dict(sorted(Counter(str(f.fault) for f in self.findings).items())),
            "by_rule": dict(sorted(Counter(f.rule for f in self.findings).items())),
            "by_severity": dict(sorted(Counter(str(f.severity) for f in self.findings).items())),
            "pairs": self.pairs,
            "paired_by": self.paired_by,
            "retries": self.retries,
            "twins": self.twins,
            **({"window": {"cut": self.cut, "late": self.late}} if self.cut or self.late else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "exchanges": self.exchanges,
            "lost": self.lost,
            "findings": [f.to_dict() for f in self.findings],
            "summary": self.summary(),
        }


def _finding(r: Rule, h: Hit, exchange_id: str, tap: str) -> Finding:
    evidence: dict[str, Any] = {"pointer": h.pointer}
    if h.excerpt is not None:
        evidence["excerpt"] = h.excerpt
    if h.event is not None:
        evidence["event"] = h.event
    return Finding(
        rule=r.id,
        severity=h.severity or r.severity,
        fault=h.fault or r.fault,
        message=h.message,
        exchange_id=h.exchange_id or exchange_id,
        tap=h.tap or tap,
        evidence=evidence,
    )


def crashed(exchange_id: str, tap: str, where: str, exc: BaseException) -> Finding:
    """The record of an exchange the checker could not judge: one exchange never stops the others,
    and the report says which one and why."""
    return Finding(
        rule=CHECK_CRASHED,
        severity=Severity.ERROR,
        fault=Fault.UNKNOWN,
        message=f"{where} raised {type(exc).__name__}: {str(exc)[:200]}; this exchange was not judged",
        exchange_id=exchange_id,
        tap=tap,
        evidence={"pointer": ""},
    )


def _run(r: Rule, subject: object, ctx: CheckConfig, exchange_id: str, tap: str) -> list[Finding]:
    """One rule on one subject; an exception becomes a check-crashed finding, not a crash."""
    try:
        return [_finding(r, h, exchange_id, tap) for h in r.func(subject, ctx)]
    except Exception as exc:  # any bug or limit a hostile exchange finds in a rule
        return [crashed(exchange_id, tap, f"rule {r.id}", exc)]


def check_view(view: ExchangeView, config: CheckConfig | None = None) -> list[Finding]:
    """The single-exchange rules on one view, with the rules' own faults (no attribution)."""
    ctx = config or CheckConfig()
    out: list[Finding] = []
    cut = bool(truncated_sides(view))  # a cut body reads as a malformed one: only the safe rules
    ex_id, tap = view.id, view.tap
    facts = view_facts(view)
    judging = (
        rules_judging("exchange", view.endpoint)
        if facts is None
        else rules_needed("exchange", view.endpoint, facts)
    )
    if ctx.disabled or cut:
        judging = [r for r in judging if r.id not in ctx.disabled and (not cut or r.id in TRUNCATION_SAFE)]
    # one try around the loop, not a call and a list per rule (1.5 us of 40 on a plain stream): a
    # rule that raises loses what it yielded and leaves a check-crashed finding, as in ``_run``, and
    # the next one goes on
    k, n = 0, len(judging)
    while k < n:
        mark = len(out)
        try:
            while k < n:
                r = judging[k]
                mark = len(out)
                for h in r.func(view, ctx):
                    out.append(_finding(r, h, ex_id, tap))
                k += 1
        except Exception as exc:  # any bug or limit a hostile exchange finds in a rule
            del out[mark:]
            out.append(crashed(ex_id, tap, f"rule {judging[k].id}", exc))
            k += 1
    return out


def _view_rules(view: ExchangeView, ctx: CheckConfig) -> list[Finding]:
    """``check_view``'s findings, worked out once a view and config (the live checker judges a
    view again with each batch it pairs with) and handed out as copies: attribution changes them."""
    held = view.memo.get("rules")
    if held is None or not _same_config(held[0], ctx):
        held = (ctx, check_view(view, ctx))
        view.memo["rules"] = held
    return _copies(held[1])


def _pair_rules(p: TapPair, ctx: CheckConfig) -> list[Finding]:
    """The tap rules' findings on this pair, worked out once a pair (the same sides, by the same
    key, the same retries) and config, as ``_view_rules`` does; kept on the caller's view."""
    key = (ctx, p.engine, p.by, tuple(p.retries))
    held = p.caller.memo.get("taps")
    if held is None or not _same_pair(held[0], key):
        found: list[Finding] = []
        for r in rules("taps"):
            if r.id not in ctx.disabled and r.judges(p.caller.endpoint):
                found.extend(_run(r, p, ctx, p.caller.id, p.caller.tap))
        held = (key, found)
        p.caller.memo["taps"] = held
    return _copies(held[1])


def _same_pair(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """The same config (the same one, or an equal one) and the same sides, by identity."""
    return (
        _same_config(a[0], b[0])
        and a[1] is b[1]
        and a[2] == b[2]
        and len(a[3]) == len(b[3])
        and all(x is y for x, y in zip(a[3], b[3], strict=True))
    )


def _same_config(a: CheckConfig, b: CheckConfig) -> bool:
    """The same config, or an equal one (the live checker makes one a batch where none is given)."""
    return a is b or a == b


def _copies(found: list[Finding]) -> list[Finding]:
    """Findings to hand out from a memo: attribution and the known bugs change them in place."""
    return [
        Finding(f.rule, f.severity, f.fault, f.message, f.exchange_id, f.tap, dict(f.evidence), f.known_bug)
        for f in found
    ]


def view_facts(view: ExchangeView) -> frozenset[str] | None:
    """What the rules may need of this view (``Rule.needs``, ``_registry.FACTS``): the rules that
    need one of them run only where one is there. None, and every rule runs, where working them
    out fails (a view of hostile shapes: then each rule meets it as it would)."""
    try:
        facts: set[str] = set()
        choices = view.choices
        if any(ch.calls for ch in choices):
            facts.add(CALLS)
        if any(ch.reasoning for ch in choices):
            facts.add(REASONING)
        req = view.req
        if output_constraint(req) is not None:
            facts.add(CONSTRAINT)
        if view.tools or req.get("tools") is not None or req.get("tool_choice") is not None:
            facts.add(TOOLS)
        if view.status is not None and view.status >= 400:
            facts.add(ERROR_STATUS)
        if view.ex.error is not None:
            facts.add(EXCHANGE_ERROR)
        if view.stream is not None and view.stream.error_frames:
            facts.add(ERROR_FRAMES)
        if view.limits:
            facts.add(LIMITS)
        if view.endpoint == MESSAGES:
            facts.add(TOOL_TURNS)  # the history rules read its blocks as sent
        else:
            msgs = req.get("messages")
            if isinstance(msgs, list) and any(
                isinstance(m, dict) and ("tool_calls" in m or m.get("role") == "tool") for m in msgs
            ):
                facts.add(TOOL_TURNS)
        for a in view.anomalies:
            facts.add(ANOMALY + a.kind)
        if view.stream is not None and view.stream.anomalies is not view.anomalies:
            for a in view.stream.anomalies:
                facts.add(ANOMALY + a.kind)
    except Exception:  # any shape the view holds: then no rule is left out
        return None
    return frozenset(facts)


def check_exchanges(
    exchanges: Iterable[Exchange],
    config: CheckConfig | None = None,
    *,
    focus: Collection[str] | None = None,
    view_of: Callable[[Exchange], ExchangeView] = build_view,
    around: TapSet | None = None,
) -> CheckResult:
    """Check every exchange, pairing the two taps of a request and the streamed and non-streamed
    twins. ``focus``: the ids whose findings are wanted; the others are there only as possible
    partners, and only those that pair with a focused exchange are checked themselves (the live
    checker passes each batch with the exchanges recorded around it: it once checked every
    neighbour again in every batch, about 40 times per exchange at 256 streams). ``view_of``: how an
    exchange is read (the live checker keeps the views of recent exchanges between batches).
    ``around``: the rest of a capture of which ``exchanges`` are a part closed under pairing (no
    exchange of the rest may pair with one of them), recorded after them: the set rules count it
    with them (its agent exchanges by tap, the first of each tap, and whether any of it paired).

    Every exchange is held at once; ``check_stream`` checks a capture of any size in bounded memory
    and finds the same."""
    ctx = config or CheckConfig()
    views: list[ExchangeView] = []
    unreadable: list[Finding] = []
    count = 0
    whole = TapSet()  # the set rules judge the whole capture, focus or not
    for ex in exchanges:
        got = view_or_crash(ex, view_of)
        if isinstance(got, Finding):
            unreadable.append(got)
        else:
            whole.add(got, count)
            views.append(got)
        count += 1
    result = CheckResult(exchanges=count, taps=sorted({v.tap for v in views}))
    result.findings.extend(unreadable)
    judged = judge(views, ctx, focus=focus)
    whole.pairs = judged.found_pairs
    if around is not None:
        whole.pairs += around.pairs
        for tap, n in around.agents.items():
            whole.agents[tap] = whole.agents.get(tap, 0) + n
            if tap not in whole.first and tap in around.first:
                whole.first[tap] = around.first[tap]
    result.findings.extend(judge_set(whole, ctx))
    for v in judged.views:
        result.findings.extend(judged.findings[id(v)])
    judged.count_into(result)
    result.whole = judged.whole
    return result


def view_or_crash(
    ex: Exchange, view_of: Callable[[Exchange], ExchangeView] = build_view
) -> ExchangeView | Finding:
    """The view of ``ex``, or the finding that says it could not be read."""
    try:
        return view_of(ex)
    except Exception as exc:  # a view that cannot be built is one exchange not judged, not a crash
        return crashed(ex.id, ex.tap, "reading the exchange", exc)


@dataclass(slots=True)
class Judged:
    """Views judged together: each one's findings after pairing and attribution."""

    #: the views judged, in the order given (with ``focus``: those wanted and their partners)
    views: list[ExchangeView]
    #: id(view) -> its findings
    findings: dict[int, list[Finding]]
    pairs: list[TapPair]
    twins: int
    #: the pairs found before ``focus`` chose among them: what the set rules count
    found_pairs: int
    #: with ``focus``: the ids judged as the whole capture would judge them (the focused ones and
    #: those that pair with one); the other views were judged only for what their partners need
    whole: set[str] | None = None

    def count_into(self, result: CheckResult) -> None:
        """Add this group's pairs, retries and twins to ``result``'s counts."""
        result.pairs += len(self.pairs)
        by = Counter(result.paired_by)
        by.update(p.by for p in self.pairs)
        result.paired_by = dict(sorted(by.items()))
        result.retries += sum(len(p.retries) for p in self.pairs)
        result.twins += self.twins


def judge(views: list[ExchangeView], ctx: CheckConfig, *, focus: Collection[str] | None = None) -> Judged:
    """Pair ``views`` (taps and twins), run the rules, attribute each finding and name the known bugs
    that explain them. Whatever may pair with one of ``views`` must be among them
    (``_pairs.may_pair``): then judging them apart from the rest of a capture finds what judging the
    whole capture finds (``check_stream`` relies on that)."""
    twins = pair_twins(views)
    pairs = pair_taps(views)
    found = len(pairs)
    whole: set[str] | None = None
    if focus is not None:
        wanted = set(focus)

        def touches(*sides: ExchangeView) -> bool:
            return any(s.id in wanted for s in sides)

        # what pairs with a focused exchange (its twin, its other tap's side, the retries) is judged
        # whole too: its findings change with the focused one's (the live checker stores them again
        # for one judged in an earlier batch, before this one was recorded)
        for tw in twins:
            if touches(tw.streamed, tw.plain):
                wanted.update((tw.streamed.id, tw.plain.id))
        for p in pairs:
            if touches(p.caller, p.engine, *p.retries):
                wanted.update(s.id for s in (p.caller, p.engine, *p.retries))
        whole = wanted
        twins = [tw for tw in twins if touches(tw.streamed, tw.plain)]
        pairs = [p for p in pairs if touches(p.caller, p.engine, *p.retries)]
        # a partner is judged with its own partners' findings (attribution, the twins' model
        # fault), so those are checked too; the rest of the neighbours are not
        needed = {id(v) for v in views if v.id in wanted}
        needed.update(id(s) for tw in twins for s in (tw.streamed, tw.plain))
        needed.update(id(s) for p in pairs for s in (p.caller, p.engine, *p.retries))
        views = [v for v in views if id(v) in needed]
    per_view: dict[int, list[Finding]] = {id(v): _view_rules(v, ctx) for v in views}

    for tw in twins:
        if truncated_sides(tw.streamed) or truncated_sides(tw.plain):
            continue
        # the model's own error on one side (an undeclared tool, arguments that are not JSON) already
        # explains why the two answers differ: only structure is compared then (the demo's
        # ground truth showed the value comparison putting those model faults on the parser too)
        tw.model_fault = _model_fault(per_view[id(tw.streamed)]) or _model_fault(per_view[id(tw.plain)])
        for r in rules("twins"):
            if r.id not in ctx.disabled and r.judges(tw.streamed.endpoint):
                per_view[id(tw.streamed)].extend(_run(r, tw, ctx, tw.streamed.id, tw.streamed.tap))

    # parser, model or engine from the evidence each exchange and its twin carry (before the taps
    # are compared: a party settled at the engine tap is the one the caller side's copy defers to)
    _evidence.decide(views, per_view, twins)

    partner: dict[int, TapPair] = {}
    for p in pairs:
        partner[id(p.caller)] = p
        partner[id(p.engine)] = p
        for attempt in p.retries:
            partner[id(attempt)] = p

    for v in views:
        found_here = per_view[id(v)]
        tp = partner.get(id(v))
        if tp is None:
            _attribute_single(v, found_here, ctx)
        elif v is tp.caller:
            per_view[id(v)] = _attribute_caller(
                [f for f in found_here if not bridge_spelling(f.rule, tp.caller, tp.engine)],
                per_view[id(tp.engine)],
                relayed=_relayed_failure(tp),
                kept=answer_kept(tp.caller, tp.engine),
            )
        else:
            per_view[id(v)] = _attribute_engine(found_here, per_view[id(tp.caller)])
    for p in pairs:
        if truncated_sides(p.caller) or truncated_sides(p.engine):
            continue  # comparing a cut capture with a whole one would blame the gateway for the cut
        per_view[id(p.caller)].extend(_pair_rules(p, ctx))
    for v in views:
        if v.endpoint in API_ENDPOINTS:
            for f in per_view[id(v)]:
                if str(f.evidence.get("pointer", "")).startswith("/choices/"):
                    # a message rule's pointer is into the chat view a Responses / Messages exchange
                    # is read into (contracts/_apis.py), not into its own body: say so
                    f.evidence["view"] = "chat"
    # after attribution: a catalogue entry that explains a finding names itself there
    by_id = {v.id: v for v in views}
    name_known_bugs(
        (f for v in views for f in per_view[id(v)]), by_id, KNOWN_BUGS, configured_version=ctx.server_version
    )
    return Judged(views, per_view, pairs, len(twins), found, whole)


def judge_set(tap_set: TapSet, ctx: CheckConfig) -> list[Finding]:
    """The rules of scope ``set`` over a whole check in summary; each hit names its own exchange."""
    out: list[Finding] = []
    for r in rules("set"):
        if r.id not in ctx.disabled:
            out.extend(_run(r, tap_set, ctx, "", ""))
    name_known_bugs(
        out, {v.id: v for v in tap_set.first.values()}, KNOWN_BUGS, configured_version=ctx.server_version
    )
    return out


def _model_fault(found: list[Finding]) -> bool:
    return any(f.fault == Fault.MODEL and f.severity == Severity.ERROR for f in found)


def _failed(v: ExchangeView) -> bool:
    return (
        bool(v.stream is not None and v.stream.error_frames)
        or (v.ex.error is not None and not v.closed_after_done)
        or (v.status or 0) >= 400
    )


def _relayed_failure(p: TapPair) -> bool:
    """The engine failed and the caller saw a failure: what is wrong with the caller's side is the
    engine's error passed on (an engine error relayed by the gateway was blamed on both)."""
    return _failed(p.engine) and _failed(p.caller)


def _attribute_single(v: ExchangeView, found: list[Finding], ctx: CheckConfig) -> None:
    if ctx.direct:
        return
    for f in found:
        if v.tap == ENGINE and f.fault == Fault.CALLER and f.severity != "info":
            f.fault = Fault.UNKNOWN
            f.message += " (seen at the engine tap only: caller tap missing, so a gateway is not ruled out)"
        elif v.tap != ENGINE and f.fault in _RESPONSE_FAULTS:
            f.fault = Fault.UNKNOWN
            f.message += f" (seen at the {v.tap} tap only: engine tap missing, so a gateway is not ruled out)"


def _attribute_caller(
    found: list[Finding], engine_found: list[Finding], *, relayed: bool = False, kept: bool = False
) -> list[Finding]:
    """A finding both taps share is reported once, at the engine tap that decides its fault. When the
    engine failed and the gateway relayed the failure, the caller side's response findings are that
    failure seen again: reported once, at the engine tap. So are findings on a message the gateway
    passed on unchanged (``kept``) whose engine side has findings of its own: a bridge to another API
    may spell the same broken answer so that another rule names it (a parser's dropped call ends
    ``tool_calls`` at the engine and ``end_turn`` at a Messages caller)."""
    at_engine = {f.rule: f for f in engine_found}
    engine_response = [f for f in engine_found if f.fault in _RESPONSE_FAULTS]
    out: list[Finding] = []
    for f in found:
        seen_again = relayed or (kept and str(f.evidence.get("pointer", "")).startswith("/choices/"))
        if (f.fault in _RESPONSE_FAULTS or _undecided_response(f)) and seen_again and engine_response:
            for e in engine_response:
                if not e.message.endswith("(reached the caller too)"):
                    e.message += " (reached the caller too)"
            continue
        if f.fault in _RESPONSE_FAULTS or _undecided_response(f):
            twin = at_engine.get(f.rule)
            if twin is not None:
                if not twin.message.endswith("(reached the caller too)"):
                    twin.message += " (reached the caller too)"
                continue
            f.fault = Fault.GATEWAY
            f.message += " (not at the engine tap: introduced by the gateway)"
        out.append(f)
    return out


def _undecided_response(f: Finding) -> bool:
    """A response rule's finding left ``unknown`` for want of evidence at its own tap (no usage to
    tell model from parser): the engine side of its pair tells whether the gateway made it."""
    r = REGISTRY.get(f.rule)
    return f.fault == Fault.UNKNOWN and r is not None and r.fault in _RESPONSE_FAULTS


def _attribute_engine(found: list[Finding], caller_found: list[Finding]) -> list[Finding]:
    """Caller-fault findings: shared with the caller side they are reported once, there; seen only
    at the engine tap, the gateway made them."""
    caller_rules = {f.rule for f in caller_found}
    kept: list[Finding] = []
    for f in found:
        if f.fault == Fault.CALLER:
            if f.rule in caller_rules:
                continue
            f.fault = Fault.GATEWAY
            f.message += " (not at the caller tap: the gateway changed the request)"
        kept.append(f)
    return kept
