"""A corpus case: exchanges rebuilt from one public report, and the ground truth the checker must reach.

A faulty case names the party the report blames (model, parser, gateway, caller, engine) and the rule
class that must say so (``fnmatch`` patterns over rule ids, so that a finer rule of the same class
still counts). A legal case (``party=None``) must draw no error or warning finding at all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from wirecheck.contracts import Exchange, Fault

API = ("chat", "responses", "messages")
PARTIES = tuple(str(f) for f in Fault if f != Fault.UNKNOWN)
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_SOURCE = re.compile(
    r"^https://(github\.com/[\w.-]+/[\w.-]+/(issues|pull|blob|tree)/\S+|\S+\.(ai|com|org|io|dev)/\S*)$"
)


@dataclass(frozen=True, slots=True)
class Case:
    id: str
    #: the public report(s) the case is rebuilt from (issue or PR URLs; for a legal shape, the
    #: documentation or source that makes it legal)
    sources: tuple[str, ...]
    #: the API the caller speaks
    api: str
    exchanges: tuple[Exchange, ...]
    #: the party the report blames; None for a legal shape
    party: str | None
    #: the rule class that must say so: fnmatch patterns over rule ids
    rules: tuple[str, ...] = ()
    #: what the report shows, in a line
    what: str = ""
    #: CheckConfig fields: ``direct`` for a tap straight in front of vLLM, ``family``, ...
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def legal(self) -> bool:
        return self.party is None

    @property
    def streamed(self) -> bool:
        for ex in self.exchanges:
            try:
                body = json.loads(ex.request.body or b"null")
            except ValueError:
                continue
            if isinstance(body, dict) and body.get("stream") is True:
                return True
        return False

    @property
    def taps(self) -> str:
        """single | dual (a caller and an engine side)."""
        kinds = {ex.tap for ex in self.exchanges}
        return "dual" if {"caller", "engine"} <= kinds else "single"


def case(
    id: str,
    *,
    sources: str | tuple[str, ...],
    api: str,
    exchanges: list[Exchange] | tuple[Exchange, ...],
    party: str | None,
    rules: tuple[str, ...] = (),
    what: str = "",
    **config: Any,
) -> Case:
    """A case, checked for the shape every case must have (the corpus test checks the rest)."""
    srcs = (sources,) if isinstance(sources, str) else tuple(sources)
    if not _ID.match(id):
        raise ValueError(f"case id {id!r} is not kebab-case")
    if api not in API:
        raise ValueError(f"{id}: api {api!r} is not one of {API}")
    if party is not None and party not in PARTIES:
        raise ValueError(f"{id}: party {party!r} is not one of {PARTIES}")
    if party is not None and not rules:
        raise ValueError(f"{id}: a faulty case names the rule class that must find it")
    if party is None and rules:
        raise ValueError(f"{id}: a legal case names no rule")
    if not srcs or not all(_SOURCE.match(s) for s in srcs):
        raise ValueError(f"{id}: every case names its public source as a URL: {srcs}")
    if not exchanges:
        raise ValueError(f"{id}: no exchanges")
    return Case(id, srcs, api, tuple(exchanges), party, rules, what, config)
