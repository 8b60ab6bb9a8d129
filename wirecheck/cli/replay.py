"""``wirecheck replay``: captured requests re-sent to a target (or two) and checked."""

from __future__ import annotations

import argparse
import json
import sys

from wirecheck.contracts import printable

from ._common import (
    capture_limits,
    capture_options,
    headers_arg,
    load,
    progress_options,
    redact_option,
    redaction,
)

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rp = sub.add_parser("replay", help="re-send captured requests to a target (or two) and check the answers")
    rp.add_argument("source", metavar="SOURCE", help="store, exchange JSONL, HAR or mitmproxy flow file")
    rp.add_argument("--target", required=True, metavar="URL")
    rp.add_argument(
        "--compare", metavar="URL2", help="send each request to this target too and compare the answers"
    )
    rp.add_argument("--concurrency", type=int, default=4)
    rp.add_argument("--rate", type=float, default=None, help="requests per second, open loop")
    rp.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="K:V",
        help="set a header (replaces redacted credentials; its value is never written anywhere)",
    )
    redact_option(rp)
    rp.add_argument("--store", metavar="OUT", help="record the answers into this store")
    rp.add_argument("--dry-run", action="store_true", help="list what would be sent, send nothing")
    rp.add_argument("--format", choices=("text", "json"), default="text")
    progress_options(rp)
    capture_options(rp)
    rp.set_defaults(run=_replay)


def _replay(args: argparse.Namespace) -> int:
    from wirecheck.record import Store, is_store
    from wirecheck.replay import detect_format, replay

    headers = headers_arg(args.header)
    policy = redaction(args)
    captured = load([args.source], limits=capture_limits(args))
    lines = None
    if args.source != "-" and not is_store(args.source) and detect_format(args.source) == "jsonl":
        # the n-th exchange of a JSONL file is on its n-th non-blank line: name it in errors
        with open(args.source, encoding="utf-8", errors="replace") as fh:
            lines = [n for n, line in enumerate(fh, 1) if line.strip()]
    import time

    from wirecheck.acceptance import Progress

    ticker, t0 = Progress(quiet=args.quiet or args.dry_run, every_s=args.progress_every), time.monotonic()

    def progress(done: int, total: int, failed: int) -> None:
        eta = ticker.eta(time.monotonic() - t0, done, total)
        ticker.tick(f"replay: {done}/{total} requests sent, {failed} failed so far, {eta}")

    res = replay(
        captured,
        args.target,
        compare=args.compare,
        concurrency=args.concurrency,
        rate=args.rate,
        headers=headers,
        dry_run=args.dry_run,
        progress=progress,
        redaction=policy,
        source=args.source,
        lines=lines,
    )
    ticker.done()
    if args.dry_run:
        for ex in res.planned:
            print(
                printable(
                    f"{ex.request.method} {policy.url(args.target).rstrip('/')}{policy.target(ex.request.path)} ({len(ex.request.body)} bytes, from {ex.id})"
                )
            )
        print(f"replay: {len(res.planned)} request(s) would be sent; nothing was sent", file=sys.stderr)
        return 0
    if args.store:
        store = Store(args.store)
        try:
            store.write_now(res.answers)
        finally:
            store.close()
    errors = [f for f in res.findings if f.severity == "error"]
    if args.format == "json":
        print(
            json.dumps(
                {
                    "sent": res.sent,
                    "answers": len(res.answers),
                    "findings": [f.to_dict() for f in res.findings],
                    "diffs": [
                        {
                            "source": d.source_id,
                            "what": d.what,
                            "target": d.a,
                            "compare": d.b,
                            "breaks_contract": d.blamed,
                        }
                        for d in res.diffs
                    ],
                },
                indent=2,
                default=str,
            )
        )
    else:
        for f in res.findings:
            print(
                f"{str(f.severity).upper():7} {f.rule} [{f.fault}] "
                + printable(f"{f.tap}:{f.exchange_id} {f.message}")
            )
        for d in res.diffs:
            side = {"a": "the target", "b": "the compare target", "both": "both", "neither": "neither side"}[
                d.blamed
            ]
            print(
                printable(
                    f"DIFF    {d.source_id}: {d.what}: {d.a!r} vs {d.b!r} (breaks the contract: {side})"
                )
            )
        print(
            f"replay: {res.sent} request(s) sent, {len(res.answers)} answer(s), {len(errors)} error finding(s), {len(res.diffs)} difference(s)"
        )
    return 1 if errors or any(d.blamed != "neither" for d in res.diffs) else 0
