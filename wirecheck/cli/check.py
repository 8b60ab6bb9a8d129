"""``wirecheck check``, ``rules`` and ``export``: the contracts over recorded traffic, offline."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from wirecheck._errors import WirecheckError
from wirecheck.contracts import (
    FAMILY_CHOICES,
    GENERIC,
    KNOWN_BUGS,
    WINDOW,
    CheckConfig,
    Exchange,
    Finding,
    bounded_loads,
    check_stream,
    detect_family,
    printable,
    render_html,
    render_json,
    render_junit,
    render_rules_markdown,
    render_text,
    rules,
    unknown_family_note,
)

from ._common import (
    STORE_ENV,
    capture_limits,
    capture_options,
    load,
    read_captures,
    redact_option,
    redaction,
    store_source,
)

__all__ = ["EXAMPLE", "register"]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "dual-tap.jsonl"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    c = sub.add_parser("check", help="check recorded exchanges (JSONL) against the contracts")
    c.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="captures: stores, exchange JSONL ('-' for standard input), HAR, mitmproxy flows "
        f"(none: the store in --store-file or ${STORE_ENV})",
    )
    c.add_argument(
        "--store-file", metavar="PATH", help="check the store named in this file (e.g. a PostgreSQL URL)"
    )
    c.add_argument("--example", action="store_true", help="check the shipped example capture")
    c.add_argument("--format", choices=("text", "json", "junit", "html"), default="text")
    c.add_argument("--output", "-o", metavar="PATH", help="write the report here instead of standard output")
    c.add_argument(
        "--pair-taps",
        action="store_true",
        help="no effect, kept so that existing scripts run: taps always pair by correlation id, then "
        "completion id, then request fingerprint and time",
    )
    c.add_argument(
        "--direct",
        action="store_true",
        help="the taps sit straight in front of the engine: single-tap findings keep their fault",
    )
    c.add_argument(
        "--family",
        choices=FAMILY_CHOICES,
        default="auto",
        help="the family table's dialect to judge against (default: detected from the model name)",
    )
    expect = c.add_mutually_exclusive_group()
    expect.add_argument(
        "--expect-reasoning",
        dest="expect_reasoning",
        action="store_true",
        default=None,
        help="every response must carry reasoning",
    )
    expect.add_argument(
        "--no-expect-reasoning", dest="expect_reasoning", action="store_false", help="never expect reasoning"
    )
    c.add_argument(
        "--disable", action="append", default=[], metavar="RULE", help="leave a rule out (repeatable)"
    )
    c.add_argument(
        "--server-version",
        metavar="VERSION",
        help="the vLLM version behind the capture, when its system_fingerprint does not say (GET /version): "
        "held against the known-bug catalogue's version ranges",
    )
    c.add_argument(
        "--window",
        type=int,
        default=WINDOW,
        metavar="N",
        help="most exchanges held at once to pair the taps and the stream/non-stream twins (default "
        f"{WINDOW}: about 200 MB of chat completions); a capture with more within a minute says so",
    )
    redact_option(c)
    capture_options(c, streamed=True)
    c.set_defaults(run=_check)

    r = sub.add_parser("rules", help="list the rule catalogue")
    r.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    r.add_argument(
        "--known-bugs",
        action="store_true",
        help="list the known-bug catalogue: upstream issues, the rules their wire shape trips, party, versions",
    )
    r.set_defaults(run=_rules)

    e = sub.add_parser("export", help="export a store (or any capture) as exchange JSONL or HAR")
    e.add_argument(
        "store",
        metavar="STORE",
        nargs="?",
        help=f"a store or capture (default: --store-file, else ${STORE_ENV})",
    )
    e.add_argument("--store-file", metavar="PATH", help="export the store named in this file")
    e.add_argument("--format", choices=("jsonl", "har"), default="jsonl")
    e.add_argument("--output", "-o", metavar="PATH")
    redact_option(e)
    capture_options(e)
    e.set_defaults(run=_export)


def _export(args: argparse.Namespace) -> int:
    from wirecheck.proxy import write_har, write_jsonl

    policy = redaction(args)
    source = store_source(args.store, args.store_file)
    if source is None:
        raise WirecheckError(f"export: name a STORE (or --store-file, or set {STORE_ENV})")
    exchanges = load([source], limits=capture_limits(args))
    fh = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115 - stdout is not closed
    try:
        n = (
            write_har(exchanges, fh, redaction=policy)
            if args.format == "har"
            else write_jsonl(exchanges, fh, redaction=policy)
        )
    finally:
        if args.output:
            fh.close()
    print(f"wirecheck export: {n} exchange(s)", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    files = list(args.files)
    if args.example:
        files.append(str(EXAMPLE))
    if not files or args.store_file:
        store = store_source(None, args.store_file)
        if store is not None:
            files.append(store)
    if not files:
        raise WirecheckError(f"check: name at least one FILE (or --example, --store-file, ${STORE_ENV})")
    unknown = [r for r in args.disable if r not in {x.id for x in rules()}]
    if unknown:
        raise WirecheckError(
            f"check: unknown rule(s) for --disable: {', '.join(unknown)} (see 'wirecheck rules')"
        )
    config = CheckConfig(
        family=args.family,
        expect_reasoning=args.expect_reasoning,
        direct=args.direct,
        disabled=frozenset(args.disable),
        server_version=args.server_version,
    )
    if args.window < 1:
        raise WirecheckError("check: --window must be positive")
    from wirecheck.replay import in_time_order

    notes: list[Finding] = []
    # text and json need only the findings: the capture is read once, in time order, and only a
    # window of it is held (check_stream); html shows every exchange and junit names each one
    seen = _Seen(keep=args.format == "html", ids=args.format == "junit", models=args.family == "auto")
    captured = seen.watch(read_captures(files, notes, capture_limits(args, holds_all=seen.keep or seen.ids)))
    result = check_stream(in_time_order(captured), config, window=args.window)
    lost = sum(int(f.evidence.get("lost", 0)) for f in notes)
    if not result.exchanges:
        # nothing was checked: that is not a pass
        raise WirecheckError(
            f"check: no exchanges in {', '.join(files)}"
            + (f" ({lost} exchange(s) recorded as lost by the store)" if lost else "")
            + ": an empty capture is not a pass"
        )
    for model in sorted(m for m in seen.models if detect_family(m) == GENERIC):
        print(f"wirecheck: note: {printable(unknown_family_note(model))}", file=sys.stderr)
    if result.cut:
        print(
            f"wirecheck: note: {result.cut} exchange(s) were judged before every exchange that might pair "
            f"with them was read (more than {args.window} within a minute); --window raises the limit",
            file=sys.stderr,
        )
    result.findings.extend(notes)
    result.lost = lost
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(result, exchange_ids=seen.id_list + sorted({f.exchange_id for f in notes}))
    elif args.format == "html":
        text = render_html(result, seen.exchanges, redaction=redaction(args))
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    if args.output:
        # check -o DIR/file makes DIR, as a report folder should
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 1 if result.errors else 0


class _Seen:
    """What the report needs of the exchanges besides their findings, taken as they are read: the
    requested models (``models``), the ids in capture order (``ids``, for junit), every exchange
    (``keep``, for html)."""

    def __init__(self, *, keep: bool, ids: bool, models: bool) -> None:
        self.keep, self.ids, self.want_models = keep, ids, models
        self.exchanges: list[Exchange] = []
        self.id_list: list[str] = []
        self.models: set[str] = set()

    def watch(self, exchanges: Iterator[Exchange]) -> Iterator[Exchange]:
        for ex in exchanges:
            if self.keep:
                self.exchanges.append(ex)
            if self.ids:
                self.id_list.append(ex.id)
            if self.want_models:
                model = _model(ex)
                if model is not None:
                    self.models.add(model)
            yield ex


def _model(ex: Exchange) -> str | None:
    """The model a request names (a family the table does not know is said, and judged generic)."""
    try:
        body = bounded_loads(ex.request.body or b"null")  # hostile depth
    except ValueError:
        return None
    return body["model"] if isinstance(body, dict) and isinstance(body.get("model"), str) else None


def _rules(args: argparse.Namespace) -> int:
    if args.known_bugs:
        for b in KNOWN_BUGS:
            fixed = b.fixed_in or ("fixed, release not determined" if b.fixed else "open")
            since = f"since {b.since}, " if b.since else ""
            print(f"{b.id:30} {b.party!s:8} {b.product:8} {since}fixed: {fixed}")
            print(f"    {b.title}")
            print(f"    rules: {', '.join(b.rules)}")
            print(f"    {b.url}")
        return 0
    if args.markdown:
        sys.stdout.write(render_rules_markdown())
        return 0
    for r in rules():
        print(f"{r.id:32} {r.severity!s:8} {r.fault!s:8} {r.summary}")
    return 0
