"""Known upstream bugs as data, and the pass that names them on findings.

An entry (:class:`KnownBug`, the table is ``_known_bugs.KNOWN_BUGS``) is one upstream issue or pull
request: which rules its wire shape trips, a predicate over the exchange (endpoint, streamed, served
model, request fields, a pattern in the response bytes, the tap), the party at fault, and the versions
of the product it affects (``since`` up to, not including, ``fixed_in``).

After the rules ran, :func:`name_known_bugs` looks at every finding: when an entry explains it, the
finding carries ``known_bug`` (id, link, party, fixed version, and whether this server is known to be
affected). The version comes from the wire (:func:`server_version`): vLLM's ``system_fingerprint``
(``vllm-<version>[-tpN...]-<hash8>``, written since vLLM 0.20), LiteLLM's ``x-litellm-version``
header, or what the caller knows (``CheckConfig.server_version``, an exchange's ``server_version``
field: the proxy can ask ``/version``).

- version known and inside the range: the finding names the bug, and takes the entry's party when
  the exchange carries the bug's own signature (bytes or the triggering request) and the taps had
  not decided otherwise (:func:`_may_reattribute`);
- version known and outside it: the entry is not this finding's cause, nothing is said;
- version unknown: the finding names the bug conditionally ("if this server is older than X") and
  keeps its fault.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ._registry import Fault, Finding

if TYPE_CHECKING:
    from ._view import ExchangeView

__all__ = [
    "LITELLM",
    "PROXY",
    "VLLM",
    "KnownBug",
    "name_known_bugs",
    "parse_version",
    "server_version",
    "version_in_range",
]

VLLM = "vllm"
LITELLM = "litellm"
#: a fault of whatever proxy sits in between: no version on the wire can place it
PROXY = "proxy"
_PRODUCTS = (VLLM, LITELLM, PROXY)
_FINGERPRINT = re.compile(rb'"system_fingerprint"\s*:\s*"vllm-(\d+\.\d+[^"\-]*)')
_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:(a|b|rc)(\d+))?(?:\.post(\d+))?(?:\.dev(\d+))?(?:\+.*)?$", re.I)
_PHASE = {"a": 0, "b": 1, "rc": 2}


@dataclass(frozen=True, slots=True, kw_only=True)
class KnownBug:
    #: tracker-number, e.g. ``vllm-38579``
    id: str
    title: str
    url: str
    party: Fault
    #: rule ids (fnmatch patterns) whose findings this bug explains
    rules: tuple[str, ...]
    #: what it leaves on the wire, for people
    shape: str
    #: whose version the range is about: vllm, litellm, or proxy (none: never placed in a range)
    product: str = VLLM
    #: first affected version (None: every version before the fix, as far as is known)
    since: str | None = None
    #: first version with the fix (None: open, or fixed in a release not determined)
    fixed_in: str | None = None
    #: fixed upstream (merged or closed as fixed); with ``fixed_in`` None the release is not known,
    #: so a known version cannot be placed in or out of the range
    fixed: bool = False
    #: more links: the report behind a fix, the fix behind a report
    see: tuple[str, ...] = ()
    # -- the predicate over the exchange: every given condition must hold --
    endpoints: tuple[str, ...] = ()
    streamed: bool | None = None
    #: ``re.search`` over the served model name, case-insensitive
    model: str | None = None
    #: request fields (dotted paths) and the value each must have; ``...`` means "present"
    request: Mapping[str, Any] = field(default_factory=dict)
    #: ``re.search`` over the response body as text
    wire: str | None = None
    #: the tap the exchange was recorded at (a gateway bug shows at the caller tap)
    tap: str | None = None

    def __post_init__(self) -> None:
        if self.product not in _PRODUCTS:
            raise ValueError(f"{self.id}: product {self.product!r} is not one of {_PRODUCTS}")
        for v in (self.since, self.fixed_in):
            if v is not None and parse_version(v) is None:
                raise ValueError(f"{self.id}: {v!r} is not a version")

    @property
    def specificity(self) -> int:
        """How many predicate conditions the entry sets: of two entries that explain a finding, the
        one that says more about the exchange wins."""
        given = (self.endpoints, self.streamed is not None, self.model, self.wire, self.tap)
        return sum(1 for g in given if g) + len(self.request)

    def explains(self, rule_id: str) -> bool:
        return _explains(self.rules, rule_id)

    def matches(self, view: ExchangeView) -> bool:
        if self.endpoints and view.endpoint not in self.endpoints:
            return False
        if self.streamed is not None and view.wants_stream != self.streamed:
            return False
        if self.tap is not None and view.tap != self.tap:
            return False
        if self.model is not None and not re.search(self.model, _model_name(view), re.I):
            return False
        for path, want in self.request.items():
            got = _dig(view.raw_req or view.req, path)
            if got is _MISSING or (want is not ... and got != want):
                return False
        if self.wire is not None:
            resp = view.ex.response
            text = resp.content.decode("utf-8", "replace") if resp is not None else ""
            if not re.search(self.wire, text):
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "url": self.url,
            "party": str(self.party),
            "product": self.product,
            "since": self.since,
            "fixed_in": self.fixed_in,
            "fixed": self.fixed or self.fixed_in is not None,
            "rules": list(self.rules),
            "shape": self.shape,
            "see": list(self.see),
        }


_MISSING = object()


@functools.lru_cache(maxsize=4096)
def _explains(patterns: tuple[str, ...], rule_id: str) -> bool:
    # asked for every catalogue entry and every finding (the live checker's, batch after batch):
    # the few rule ids there are, matched once each
    return any(fnmatchcase(rule_id, p) for p in patterns)


def _dig(obj: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return _MISSING
        obj = obj[key]
    return obj


def _model_name(view: ExchangeView) -> str:
    name = view.model or (view.raw_req or view.req).get("model")
    return name if isinstance(name, str) else ""


def parse_version(text: str) -> tuple[Any, ...] | None:
    """A sortable key for a PEP 440-ish version (``0.26.1rc1.dev1177+ga9a17e709``, ``1.81.12``), or
    None. Order: ``X.dev`` < ``Xa`` < ``Xb`` < ``Xrc`` < ``X`` < ``X.post``."""
    m = _VERSION.match(text.strip())
    if m is None:
        return None
    release = tuple(int(p) for p in m.group(1).split("."))
    release += (0,) * (4 - len(release))
    phase, pre = (_PHASE[m.group(2).lower()], int(m.group(3))) if m.group(2) else (3, 0)
    post = int(m.group(4)) if m.group(4) else -1
    if m.group(5) is not None:
        # a dev build comes before the pre-release or release it leads to
        dev = int(m.group(5))
        if not m.group(2) and post < 0:
            phase = -1
    else:
        dev = 1 << 62
    return (release, phase, pre, post, dev)


def version_in_range(version: str, since: str | None, fixed_in: str | None) -> bool | None:
    """Whether ``version`` is in [since, fixed_in); None when it cannot be read."""
    v = parse_version(version)
    if v is None:
        return None
    low = parse_version(since) if since else None
    high = parse_version(fixed_in) if fixed_in else None
    return (low is None or v >= low) and (high is None or v < high)


def _may_reattribute(bug: KnownBug, f: Finding) -> bool:
    """A known bug in a version on the wire outweighs a rule's default party, not what the rules or
    the taps decided from evidence: only an entry whose own signature is on the exchange (a pattern in
    the bytes, the request that triggers it) moves a fault; a vLLM bug never moves a finding the
    attribution left unknown (one tap, the other side unseen) or put on the gateway (the engine side
    was clean); a gateway bug moves a caller-side finding only on the gateway's own version header."""
    if not (bug.wire or bug.request):
        return False
    if bug.product == VLLM:
        return f.fault not in (Fault.UNKNOWN, Fault.GATEWAY)
    return bug.product == LITELLM and f.tap != "engine"


def _affected(bug: KnownBug, version: str | None) -> bool | None:
    """True, False, or None when it cannot be said (no version, or a fix in an unknown release)."""
    if version is None or (bug.fixed and bug.fixed_in is None):
        return None
    return version_in_range(version, bug.since, bug.fixed_in)


def server_version(view: ExchangeView, product: str = VLLM, configured: str | None = None) -> str | None:
    """The version of ``product`` behind this exchange, as the wire or the caller tells it."""
    if product == PROXY:
        return None
    if product == LITELLM:
        resp = view.ex.response
        header = resp.header("x-litellm-version") if resp is not None else None
        return header.strip() if header else None
    if configured:
        return configured
    extra = view.ex.extra.get("server_version")
    if isinstance(extra, str) and extra:
        return extra
    resp = view.ex.response
    if resp is None:
        return None
    m = _FINGERPRINT.search(resp.content[-65536:]) or _FINGERPRINT.search(resp.content[:65536])
    return m.group(1).decode("ascii", "replace") if m else None


def name_known_bugs(
    findings: Iterable[Finding],
    views: Mapping[str, ExchangeView],
    catalogue: Iterable[KnownBug],
    *,
    configured_version: str | None = None,
) -> None:
    """Name the known bug that explains each finding (see the module docstring)."""
    entries = list(catalogue)
    explaining: dict[str, list[KnownBug]] = {}  # rule id -> the entries that explain its findings
    for f in findings:
        view = views.get(f.exchange_id)
        if view is None or f.severity == "info":
            continue
        best: tuple[KnownBug, str | None, bool | None] | None = None
        candidates = explaining.get(f.rule)
        if candidates is None:
            candidates = explaining[f.rule] = [bug for bug in entries if bug.explains(f.rule)]
        for bug in candidates:
            if not bug.matches(view):
                continue
            version = server_version(view, bug.product, configured_version)
            affected = _affected(bug, version)
            if affected is False:
                continue
            if best is None or (bool(affected), bug.specificity) > (bool(best[2]), best[0].specificity):
                best = (bug, version, affected)
        if best is None:
            continue
        bug, version, affected = best
        f.known_bug = {
            "id": bug.id,
            "url": bug.url,
            "party": str(bug.party),
            "fixed_in": bug.fixed_in,
            "status": "affected" if affected else "version-unknown",
            "version": version,
        }
        if bug.fixed_in:
            fixed = f"fixed in {bug.product} {bug.fixed_in}"
        else:
            fixed = "fixed upstream, release not determined" if bug.fixed else "open upstream"
        if affected:
            if _may_reattribute(bug, f):
                f.fault = bug.party
            f.message += f" [known bug {bug.id}, {fixed}; this server runs {bug.product} {version}]"
        else:
            older = f" if this server is older than {bug.fixed_in}" if bug.fixed_in else ""
            f.message += f" [matches known bug {bug.id} ({fixed}){older}]"
