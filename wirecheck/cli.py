"""The ``wirecheck`` command line.

Exit codes: 0 no error finding, 1 at least one error finding, 2 unusable input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from wirecheck._version import __version__
from wirecheck.contracts import (
    CheckConfig,
    Exchange,
    WirecheckError,
    check_exchanges,
    read_exchanges,
    render_json,
    render_junit,
    render_rules_markdown,
    render_text,
    rules,
)

EXAMPLE = Path(__file__).with_name("examples") / "dual-tap.jsonl"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wirecheck", description="Conformance checks for OpenAI-compatible agent traffic served by vLLM."
    )
    p.add_argument("--version", action="version", version=f"wirecheck {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    c = sub.add_parser("check", help="check recorded exchanges (JSONL) against the contracts")
    c.add_argument("files", nargs="*", metavar="FILE", help="exchange JSONL files ('-' for standard input)")
    c.add_argument("--example", action="store_true", help="check the shipped example capture")
    c.add_argument("--format", choices=("text", "json", "junit"), default="text")
    c.add_argument("--output", "-o", metavar="PATH", help="write the report here instead of standard output")
    c.add_argument(
        "--pair-taps",
        action="store_true",
        help="also pair caller and engine exchanges that lack a correlation id, by request fingerprint and time",
    )
    c.add_argument(
        "--direct",
        action="store_true",
        help="the taps sit straight in front of the engine: single-tap findings keep their fault",
    )
    c.add_argument("--family", choices=("auto", "kimi_k2", "kimi_k3", "hermes", "generic"), default="auto")
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

    r = sub.add_parser("rules", help="list the rule catalogue")
    r.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    return p


def _load(files: Sequence[str]) -> list[Exchange]:
    out: list[Exchange] = []
    for name in files:
        if name == "-":
            out.extend(read_exchanges(sys.stdin))
        else:
            out.extend(read_exchanges(name))
    return out


def _check(args: argparse.Namespace) -> int:
    files = list(args.files)
    if args.example:
        files.append(str(EXAMPLE))
    if not files:
        raise WirecheckError("check: name at least one FILE (or --example)")
    unknown = [r for r in args.disable if r not in {x.id for x in rules()}]
    if unknown:
        raise WirecheckError(
            f"check: unknown rule(s) for --disable: {', '.join(unknown)} (see 'wirecheck rules')"
        )
    config = CheckConfig(
        family=args.family,
        expect_reasoning=args.expect_reasoning,
        direct=args.direct,
        pair_by_fingerprint=args.pair_taps,
        disabled=frozenset(args.disable),
    )
    exchanges = _load(files)
    result = check_exchanges(exchanges, config)
    if args.format == "json":
        text = render_json(result)
    elif args.format == "junit":
        text = render_junit(result, exchange_ids=[e.id for e in exchanges])
    else:
        text = render_text(result, color=args.output is None and sys.stdout.isatty())
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 1 if result.errors else 0


def _rules(args: argparse.Namespace) -> int:
    if args.markdown:
        sys.stdout.write(render_rules_markdown())
        return 0
    for r in rules():
        print(f"{r.id:32} {r.severity!s:8} {r.fault!s:8} {r.summary}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "rules":
            return _rules(args)
    except WirecheckError as exc:
        print(f"wirecheck: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    parser.error(f"unknown command {args.command}")
    return 2
