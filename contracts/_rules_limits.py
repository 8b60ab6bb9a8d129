"""Rules about what the checker itself could not read or judge.

A hostile exchange must become a finding, never a crash: JSON past the depth or size bound
(``_json``) is ``json-limit``. An exchange on which a rule (or building its view) raised anyway gets a
``check-crashed`` record, made by the checker in ``_check`` so that one exchange never stops the others;
such records are not rules (no function judges an exchange for them) and are listed in ``RECORDS``.
"""

from __future__ import annotations

from collections.abc import Iterator

from ._json import JsonLimitError
from ._registry import ALL_ENDPOINTS, ANOMALY, CALLS, LIMITS, CheckConfig, Fault, Hit, hit, rule
from ._rules_message import read_arguments
from ._view import ExchangeView

__all__ = ["CHECK_CRASHED", "LIVE_CHECK_SKIPPED", "RECORDS", "STORE_GAP"]

CHECK_CRASHED = "check-crashed"
LIVE_CHECK_SKIPPED = "live-check-skipped"
STORE_GAP = "store-gap"


@rule(
    "json-limit",
    fault=Fault.UNKNOWN,
    area="http",
    endpoints=ALL_ENDPOINTS,
    needs=(LIMITS, ANOMALY + "json-limit", CALLS),
)
def _json_limit(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """A JSON document (body, SSE data, tool arguments) nests deeper or is larger than the checker parses.

    Bodies, SSE data and tool arguments are parsed at most 128 levels deep and 64 MiB large: past
    that, JSON costs one recursion per level and a few thousand levels stopped parsers (Python's among
    them). No real request or answer comes near it. The fault is the side that sent it: a request body
    is the caller's, a response or its tool arguments the engine's (unknown at a single caller tap)."""
    for pointer, what in view.limits:
        yield hit(what, pointer, fault=Fault.CALLER if pointer.startswith("/request") else Fault.ENGINE)
    for a in view.anomalies:
        if a.kind == "json-limit":
            yield hit(
                f"SSE data: {a.detail}", a.pointer or "/response/body", event=a.event, fault=Fault.ENGINE
            )
    if not view.ok:
        return
    for ch in view.choices:
        for pos, c in enumerate(ch.calls):
            exc = read_arguments(view, c)[1]
            if isinstance(exc, JsonLimitError):  # another refusal: not JSON at all, tool-call-args-json's
                ptr = f"/choices/{ch.index}/message/tool_calls/{pos}/function/arguments"
                yield hit(f"{c.name}: arguments: {exc}", ptr, event=c.first_event, fault=Fault.MODEL)


#: Findings the checker makes about itself, not rules over an exchange: listed in the catalogue
#: (docs/rules.md) so that every rule id a report can show is documented there.
RECORDS: dict[str, str] = {
    CHECK_CRASHED: (
        "error, fault unknown. Building an exchange's view or one rule raised on it: the exchange was not"
        " judged, the others were, and the message names the exception. A wirecheck bug: please report it"
        " with the exchange."
    ),
    LIVE_CHECK_SKIPPED: (
        "warning, fault unknown. Written by the proxy's supervisor of the live checker: the worker process"
        " died while checking this exchange on each of its tries, so it was set aside to keep live checking"
        " going. `wirecheck check STORE` shows it and checks the exchange again."
    ),
    STORE_GAP: (
        "warning, fault unknown. Read from a store's gap rows by `wirecheck check STORE`: this many"
        " exchanges went through the proxy but could not be written (queue full, database down, disk"
        " full), with the time span; the report's summary counts them as lost."
    ),
}
