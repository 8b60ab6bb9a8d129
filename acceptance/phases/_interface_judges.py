"""The interface judges, over :class:`InterfaceFacts`: who broke the contracts, whether a caller's
retry is enough, whether the model retries a failed tool, and the scenarios.

Any failed request, any error blamed on the gateway or the caller, or more recovered requests than
the retry rate allows lead to rework; recovered requests within it lead to limited.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._catalogue import LIMITED, REWORK, Ruling, failed, judge, missing, passed
from ._interface import InterfaceFacts

__all__: list[str] = []

_ATTRIBUTION = "Interface: attribution"
#: the taps a finding can name: with both, it says which side it was seen on
SIDES = ("caller", "engine")


def _blamed_on(f: InterfaceFacts, fault: str) -> Iterator[Ruling]:
    k = f.errors_by_fault.get(fault, 0)
    if k:
        rules = sorted({x.rule for x in f.errors if str(x.fault) == fault})
        yield failed(f"{k} errors blamed on the {fault}: {', '.join(rules)}", {"rules": rules})
    else:
        yield passed(f"no errors blamed on the {fault}")


@judge("interface.gateway", leads_to=(REWORK,), section=_ATTRIBUTION)
def _gateway(f: InterfaceFacts) -> Iterator[Ruling]:
    """The gateway forwards answers unchanged

    A gateway that changes what the engine sent (merges reasoning into content, re-indexes tool calls,
    drops usage) breaks every caller behind it; only both taps can show it. Through a gateway without
    an engine-side capture this is missing evidence, never a pass."""
    if not f.kinds:
        return
    if f.unverified:
        yield missing(
            "unverified: the target is a gateway and there is no engine-side capture "
            "(run with --via-proxy --engine-listen, so wirecheck taps both sides); "
            f"{f.errors_by_fault.get('unknown', 0)} errors could be the gateway's or the engine's"
        )
        return
    yield from _blamed_on(f, "gateway")


@judge("interface.caller", leads_to=(REWORK,), section=_ATTRIBUTION)
def _caller(f: InterfaceFacts) -> Iterator[Ruling]:
    """Requests keep the contract

    The agent set's own requests are well formed; an error blamed on the caller here is wirecheck's
    request set or a gateway rewriting requests."""
    if f.kinds:
        yield from _blamed_on(f, "caller")


@judge("interface.contracts", leads_to=(REWORK, LIMITED), section="Interface")
def _contracts(f: InterfaceFacts) -> Iterator[Ruling]:
    """Agent requests keep the contracts

    Each answer is checked as a careful caller would, and one that breaks a contract is retried (the
    K3 recipe: validate, then retry). A request no retry fixes is rework; recovered requests within
    --max-retry-rate are a bounded fault (limited), above it they are not occasional (rework)."""
    if not f.kinds:
        return
    n, counts, rate = len(f.kinds), f.counts, f.retry_rate
    blame = ", ".join(f"{k} {v}" for k, v in f.errors_by_fault.items()) or "none"
    summary = (
        f"{n} requests: {counts['clean']} clean, {counts['recovered']} fixed by retry, "
        f"{counts['failed']} failed; errors by fault: {blame}"
    )
    ev = {"outcomes": dict(counts)}
    if counts["failed"]:
        yield failed(summary + " (not fixed by retry)", ev, leads_to=REWORK)
    elif counts["recovered"] and rate > f.max_retry_rate:
        yield failed(
            summary + f": retry rate {rate:.1%} > {f.max_retry_rate:.1%}, not occasional", ev, leads_to=REWORK
        )
    elif counts["recovered"]:
        yield failed(
            summary + f": retry rate {rate:.1%} within {f.max_retry_rate:.1%}",
            {**ev, "retry_rate": rate},
            leads_to=LIMITED,
        )
    else:
        yield passed(summary)


@judge("interface.tool-retry", leads_to=(REWORK, LIMITED), section="Interface")
def _tool_retry(f: InterfaceFacts) -> Iterator[Ruling]:
    """The model retries a tool after a failed tool result

    Format checks cannot see it: an answer that gives up in well-formed text ("the weather service is
    down, try later") breaks no contract, yet every agent on that model gives up at the first transient
    tool error. Each tool-failure request is judged by what the caller finally received: a call to the
    failed tool is a retry. Never retrying is rework (nothing in the serving path bounds it); giving up
    sometimes is limited (an agent loop that retries a failed tool itself bounds it); with both taps, a
    retry the engine wrote and the gateway dropped is the gateway's."""
    judged = f.tool_retries
    retried = [t.request for t in judged if t.called]
    dropped = [t.request for t in judged if not t.called and t.engine_called]
    gave_up = [t.request for t in judged if not t.called and not t.engine_called]
    ev = {"retried": retried, "gave_up": gave_up, "gateway_dropped": dropped, "unjudged": f.tool_unjudged}
    total = len(judged) + len(f.tool_unjudged)
    if not total:
        yield missing(
            "no tool-failure request was sent (give --interface-requests 4 or more)", ev, leads_to=REWORK
        )
        return
    if not judged:
        yield missing(
            f"all {total} tool-failure answers broke a contract on every attempt (interface.contracts)",
            ev,
            leads_to=REWORK,
        )
        return
    where = " (what the caller saw through an unverified gateway)" if f.unverified else ""
    counts = f"{len(retried)} of {len(judged)} tool-failure requests retried the failed tool{where}"
    if dropped:
        yield failed(
            f"{counts}; the engine's answer called the tool again but the gateway's did not "
            f"(requests {', '.join(map(str, dropped))}): the gateway drops the retry",
            ev,
            leads_to=REWORK,
        )
    elif not gave_up:
        yield passed(counts, ev)
    elif not retried:
        # through an unverified gateway the caller's view is all there is: never put it on the model alone
        who = "the model (or the unverified gateway)" if f.unverified else "the model"
        yield failed(
            f"{counts}: {who} never retries a failed tool, it answers in text instead (requests "
            f"{', '.join(map(str, gave_up))}); every agent on it gives up at the first transient tool error",
            ev,
            leads_to=REWORK,
        )
    else:
        yield failed(
            f"{counts}: it gave up on requests {', '.join(map(str, gave_up))}; an agent loop that retries a "
            "failed tool itself bounds this",
            ev,
            leads_to=LIMITED,
        )


@judge("interface.scenarios", leads_to=(REWORK, LIMITED), section="Interface: scenarios")
def _scenarios(f: InterfaceFacts) -> Iterator[Ruling]:
    """Hypothesis agent scenarios

    Agent loops hypothesis draws (tool calls, tool results and failures, structured output, streamed
    and not); a failure is shrunk to its shortest request and re-sent: a retry that passes makes it a
    bounded fault (limited), else rework."""
    scen = f.scenarios
    if not scen.get("ran"):
        return
    if scen.get("ok"):
        yield passed(f"{scen['requests']} requests over {scen['examples']} examples, no contract broken")
        return
    # with both taps a finding says its side: the engine's answer, or only what the gateway passed on
    what = "; ".join(
        f"{x['rule']} [{x['fault']}]" + (f" at the {x['tap']} tap" if x.get("tap") in SIDES else "")
        for x in scen.get("findings", [])
    )
    fixed = bool(scen.get("fixed_by_retry"))
    yield failed(
        f"shrunk failure: {what}; "
        + ("a retry passed" if fixed else "retries failed too")
        + "; the shrunk request and its curl line are in the interface section",
        {"request": scen.get("request"), "curl": scen.get("curl")},
        leads_to=LIMITED if fixed else REWORK,
    )
