"""``wirecheck proxy``: the recording proxy in the request path, one tap or two."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from wirecheck._errors import WirecheckError

from ._common import engine_tap_options, hostport, redact_option, redaction, size

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    x = sub.add_parser("proxy", help="run the recording proxy in the request path")
    x.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="where the (caller) listener forwards: the gateway, or vLLM",
    )
    x.add_argument("--listen", default="127.0.0.1:8100", metavar="HOST:PORT")
    x.add_argument("--tap", default="caller", help="name of the first listener's tap (default caller)")
    engine_tap_options(
        x,
        "dual tap: point the gateway's upstream here",
        "dual tap: where the engine listener forwards (vLLM)",
    )
    x.add_argument(
        "--store",
        default="wirecheck.db",
        help="SQLite file (default wirecheck.db) or postgresql://USER@HOST/DB, shared by several proxy replicas",
    )
    x.add_argument("--no-store", action="store_true", help="forward only, record nothing")
    x.add_argument(
        "--no-live-checks", action="store_true", help="record only; check later with wirecheck check STORE"
    )
    redact_option(x)
    x.add_argument("--body-limit", default="32MiB", help="largest request body (413 past it)")
    x.add_argument(
        "--read-timeout", type=float, default=600.0, help="seconds to wait for the upstream's next byte"
    )
    x.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="seconds to wait for the other tap before checking an exchange",
    )
    x.add_argument(
        "--admin",
        default="127.0.0.1:8102",
        metavar="HOST:PORT",
        help="the admin listener: /wirecheck/health, /findings, /metrics (default 127.0.0.1:8102; 'off' for none)",
    )
    x.add_argument(
        "--admin-token",
        default=None,
        metavar="TOKEN",
        help="bearer token the admin listener asks for (default $WIRECHECK_ADMIN_TOKEN); needed beyond loopback",
    )
    x.add_argument(
        "--correlation-secret",
        default=None,
        metavar="TEXT",
        help="key of the x-wirecheck-id correlation; replicas sharing a store need the same one "
        "(default $WIRECHECK_CORRELATION_SECRET, else random per process)",
    )
    x.add_argument(
        "--record-limit",
        default="16MiB",
        help="most bytes recorded per request or response body; the rest is forwarded, not kept",
    )
    x.add_argument("--max-header-size", default="64KiB", help="largest request head a caller may send (431)")
    x.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        help="seconds a caller has to send a request head, and again its body (408)",
    )
    x.add_argument(
        "--idle-timeout", type=float, default=75.0, help="seconds before an idle caller connection is closed"
    )
    x.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="proxy processes sharing the listeners' ports (SO_REUSEPORT) and the store (default 1)",
    )
    x.set_defaults(run=_proxy)


def _proxy(args: argparse.Namespace) -> int:
    from wirecheck.proxy import ADMIN_TOKEN_ENV, ProxyRun, TapConfig, run_proxy
    from wirecheck.record import correlation_secret

    redact = redaction(args)
    limit = size(args.body_limit)
    record_limit = size(args.record_limit, "--record-limit")
    max_head = size(args.max_header_size, "--max-header-size")
    for name in ("request_timeout", "idle_timeout"):
        if not getattr(args, name) > 0:
            raise WirecheckError(f"--{name.replace('_', '-')}: must be a positive number of seconds")
    if not 1 <= args.workers <= 256:
        raise WirecheckError(f"--workers: must be a whole number from 1 to 256, not {args.workers}")
    secret = correlation_secret(args.correlation_secret)
    tap_limits: dict[str, Any] = {
        "redact": redact,
        "body_limit": limit,
        "read_timeout_s": args.read_timeout,
        "record_limit": record_limit,
        "request_timeout_s": args.request_timeout,
        "correlation_secret": secret,
    }
    admin = None if args.admin.strip().lower() == "off" else hostport(args.admin, "--admin")
    token = args.admin_token or os.environ.get(ADMIN_TOKEN_ENV) or None
    loopback = ("127.0.0.1", "localhost", "::1")
    if admin is not None and admin[0] not in loopback and not token:
        # findings carry excerpts of every caller's prompts and answers (issue 11, point 11)
        raise WirecheckError(
            f"--admin: {admin[0]} is beyond loopback; give --admin-token (or WIRECHECK_ADMIN_TOKEN) too"
        )
    taps = [
        (
            TapConfig(upstream=args.upstream, tap=args.tap, **tap_limits),
            *hostport(args.listen, "--listen"),
        )
    ]
    if args.engine_upstream:
        engine = TapConfig(
            upstream=args.engine_upstream, tap="engine", inject_correlation=False, **tap_limits
        )
        taps.append((engine, *hostport(args.engine_listen, "--engine-listen")))
    for cfg, host, _ in taps:
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"wirecheck proxy: warning: the {cfg.tap} tap listens on {host}, beyond loopback",
                file=sys.stderr,
            )
    return run_proxy(
        ProxyRun(
            taps=taps,
            store_path=None if args.no_store else args.store,
            live_checks=not args.no_live_checks,
            settle_s=args.settle,
            admin=admin,
            admin_token=token,
            max_head=max_head,
            head_timeout_s=args.request_timeout,
            idle_timeout_s=args.idle_timeout,
            workers=args.workers,
        )
    )
