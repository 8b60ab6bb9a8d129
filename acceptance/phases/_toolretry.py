"""``interface.tool-retry``: after a failed tool result, does the model call the tool again?

The go-live checklist asks for "a retry after a tool failure" and that "retry after failure happens".
Format checks cannot see it: a model that answers a tool error with a polite text ("the weather service
is down, try later") breaks no contract, yet every agent built on it gives up at the first transient
tool error. So each ``tool-failure`` request of the interface set (a history whose last tool result is
an error) is judged by what the caller received in the end: a call to the failed tool is a retry;
an answer without one gave up. An answer that broke a contract on every attempt is left to
``interface.contracts``.

Verdict weight: a model that never retries a failed tool is not fit to carry agents, and nothing in the
serving path bounds it (no rate limit, no caller retry of the same request brings the call back): rework.
A model that sometimes gives up is bounded: an agent loop that retries a failed tool itself before
handing the error to the model covers it, so limited (with its conditions). Through a gateway, with both
taps, an engine-side answer that had the call while the caller's lacked it is the gateway's doing.
"""

from __future__ import annotations

from typing import Any

from wirecheck.contracts import Exchange, build_view

from .._model import Check
from ..load import Sample

__all__ = ["failed_tool", "tool_retry_check"]

TITLE = "The model retries a tool after a failed tool result"


def failed_tool(body: dict[str, Any]) -> str | None:
    """The name of the tool whose (failed) result ends the history of ``body``."""
    msgs = body.get("messages") or []
    if not msgs or msgs[-1].get("role") != "tool":
        return None
    call_id = msgs[-1].get("tool_call_id")
    for m in reversed(msgs):
        for tc in m.get("tool_calls") or []:
            if tc.get("id") == call_id:
                name = (tc.get("function") or {}).get("name")
                return name if isinstance(name, str) else None
    return None


def _calls(ex: Exchange | None, name: str) -> bool:
    if ex is None:
        return False
    return any(c.name == name for ch in build_view(ex).choices for c in ch.calls)


def tool_retry_check(
    judged: list[tuple[int, str, list[Sample]]],
    unjudged: list[int],
    engine_side: dict[str, Exchange],
    *,
    unverified: bool,
) -> Check:
    """``judged``: per tool-failure request (its number, the failed tool, the final attempt's samples);
    ``unjudged``: the requests whose every attempt broke a contract; ``engine_side``: the engine tap's
    exchange per correlation id (empty without both taps)."""
    retried, gave_up, dropped = [], [], []
    for n, tool, samples in judged:
        if all(_calls(s.exchange, tool) for s in samples):
            retried.append(n)
        elif any(_calls(engine_side.get(s.correlation), tool) for s in samples):
            dropped.append(n)  # the engine's answer had the retry; the caller's did not
        else:
            gave_up.append(n)
    total = len(judged) + len(unjudged)
    ev: dict[str, Any] = {
        "retried": retried,
        "gave_up": gave_up,
        "gateway_dropped": dropped,
        "unjudged": unjudged,
    }
    if not total:
        return Check(
            "interface.tool-retry",
            TITLE,
            "missing",
            "no tool-failure request was sent (give --interface-requests 4 or more)",
            ev,
            leads_to="rework",
        )
    if not judged:
        return Check(
            "interface.tool-retry",
            TITLE,
            "missing",
            f"all {total} tool-failure answers broke a contract on every attempt (interface.contracts)",
            ev,
            leads_to="rework",
        )
    where = " (what the caller saw through an unverified gateway)" if unverified else ""
    counts = f"{len(retried)} of {len(judged)} tool-failure requests retried the failed tool{where}"
    if dropped:
        return Check(
            "interface.tool-retry",
            TITLE,
            "fail",
            f"{counts}; the engine's answer called the tool again but the gateway's did not "
            f"(requests {', '.join(map(str, dropped))}): the gateway drops the retry",
            ev,
            leads_to="rework",
        )
    if not gave_up:
        return Check("interface.tool-retry", TITLE, "pass", counts, ev)
    listed = ", ".join(map(str, gave_up))
    # through an unverified gateway the caller's view is all there is: never put it on the model alone
    who = "the model (or the unverified gateway)" if unverified else "the model"
    if not retried:
        return Check(
            "interface.tool-retry",
            TITLE,
            "fail",
            f"{counts}: {who} never retries a failed tool, it answers in text instead (requests "
            f"{listed}); every agent on it gives up at the first transient tool error",
            ev,
            leads_to="rework",
        )
    return Check(
        "interface.tool-retry",
        TITLE,
        "fail",
        f"{counts}: it gave up on requests {listed}; an agent loop that retries a failed tool itself "
        "bounds this",
        ev,
        leads_to="limited",
    )
