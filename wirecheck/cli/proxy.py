"""``wirecheck proxy``: the recording proxy in the request path, one tap or two."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wirecheck._errors import WirecheckError
from wirecheck.proxy import ProxyRun, TapConfig

from ._common import (
    STORE_ENV,
    engine_tap_options,
    hostport,
    redact_option,
    redaction,
    resolve_secret,
    secret_option,
    size,
    store_source,
)
from ._fields import Opt, add_fields, build

__all__ = ["register"]

# Options that are one field of the proxy's config: type and default come from
# TapConfig and ProxyRun, so the command line cannot drift from them.
TAP_FIELDS = {
    "read_timeout_s": Opt("seconds to wait for the upstream's next byte", "--read-timeout"),
    "request_timeout_s": Opt(
        "seconds a caller has to send a request head, and again its body (408)", "--request-timeout"
    ),
}
RUN_FIELDS = {
    "live_checks": Opt("record only; check later with wirecheck check STORE", "--no-live-checks"),
    "settle_s": Opt("seconds to wait for the other tap before checking an exchange", "--settle"),
    "idle_timeout_s": Opt("seconds before an idle caller connection is closed", "--idle-timeout"),
    "workers": Opt("proxy processes sharing the listeners' ports (SO_REUSEPORT) and the store"),
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    x = sub.add_parser("proxy", help="run the recording proxy in the request path")
    x.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="where the (caller) listener forwards: the gateway, or vLLM",
    )
    x.add_argument("--listen", default="127.0.0.1:8100", metavar="HOST:PORT")
    x.add_argument(
        "--tap",
        default="caller",
        help="name of the first listener's tap (default caller); 'engine' reads x-wirecheck-id and never "
        "sets it (the engine side of replicas sharing a store)",
    )
    engine_tap_options(
        x,
        "dual tap: point the gateway's upstream here",
        "dual tap: where the engine listener forwards (vLLM)",
    )
    x.add_argument(
        "--store",
        default=None,
        help="SQLite file or postgresql://USER@HOST/DB, shared by several proxy replicas (default "
        f"${STORE_ENV}, else wirecheck.db; a URL with a password belongs in --store-file or ${STORE_ENV}, "
        "out of the process list)",
    )
    x.add_argument(
        "--store-file", metavar="PATH", help="read the store (e.g. a PostgreSQL URL) from this file"
    )
    x.add_argument("--no-store", action="store_true", help="forward only, record nothing")
    redact_option(x)
    x.add_argument("--body-limit", default="32MiB", help="largest request body (413 past it)")
    add_fields(x, TapConfig, TAP_FIELDS)
    add_fields(x, ProxyRun, RUN_FIELDS)
    # options read by hand in _proxy (an address, or a secret that may come from a file or the
    # environment: a secret on the command line is in every local user's process list)
    x.add_argument(
        "--admin",
        default="127.0.0.1:8102",
        metavar="HOST:PORT",
        help="the admin listener: /wirecheck/health, /findings, /metrics (default 127.0.0.1:8102; 'off' for none)",
    )
    secret_option(
        x,
        "--admin-token",
        env="WIRECHECK_ADMIN_TOKEN",
        metavar="TOKEN",
        help="bearer token the admin listener asks for; needed beyond loopback",
        file_help="read the admin token from this file",
    )
    x.add_argument(
        "--admin-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the admin listener answers without a token, besides localhost, 127.0.0.1 and "
        "[::1] (repeatable; others get a 403, so that a web page cannot read it by DNS rebinding)",
    )
    secret_option(
        x,
        "--correlation-secret",
        env="WIRECHECK_CORRELATION_SECRET",
        metavar="TEXT",
        help="key of the x-wirecheck-id correlation; replicas sharing a store need the same one "
        "(else random per process)",
        file_help="read the correlation key from this file",
    )
    x.add_argument(
        "--direct",
        action="store_true",
        help="the taps sit straight in front of the engine (no gateway): single-tap findings keep their "
        "rule's fault, live and in the view, as with check --direct",
    )
    x.add_argument(
        "--record-limit",
        default="16MiB",
        help="most bytes recorded per request or response body; the rest is forwarded, not kept",
    )
    x.add_argument("--max-header-size", default="64KiB", help="largest request head a caller may send (431)")
    x.add_argument(
        "--no-ask-version",
        dest="ask_version",
        action="store_false",
        help="do not ask the engine's GET /version (asked once, written on every exchange for the "
        "known-bug catalogue's version ranges)",
    )
    x.set_defaults(run=_proxy)


def _proxy(args: argparse.Namespace) -> int:
    from wirecheck.proxy import ADMIN_TOKEN_ENV, event_loop_name, helper_priority, run_proxy
    from wirecheck.record import correlation_secret

    try:
        helper_priority()  # read again by each helper process: a typo is refused here, at the start
        event_loop_name()  # the same for the event loop's choice
    except ValueError as exc:
        raise WirecheckError(str(exc)) from None

    redact = redaction(args)
    limit = size(args.body_limit)
    record_limit = size(args.record_limit, "--record-limit")
    max_head = size(args.max_header_size, "--max-header-size")
    for name in ("request_timeout_s", "idle_timeout_s"):
        if not getattr(args, name) > 0:
            raise WirecheckError(
                f"--{name[: -len('_s')].replace('_', '-')}: must be a positive number of seconds"
            )
    if not 1 <= args.workers <= 256:
        raise WirecheckError(f"--workers: must be a whole number from 1 to 256, not {args.workers}")
    secret = correlation_secret(resolve_secret(args, "--correlation-secret", "WIRECHECK_CORRELATION_SECRET"))
    tap_limits: dict[str, Any] = {
        "redact": redact,
        "body_limit": limit,
        "record_limit": record_limit,
        "correlation_secret": secret,
        **{name: getattr(args, name) for name in TAP_FIELDS},
    }
    admin = None if args.admin.strip().lower() == "off" else hostport(args.admin, "--admin")
    token = resolve_secret(args, "--admin-token", ADMIN_TOKEN_ENV)
    loopback = ("127.0.0.1", "localhost", "::1")
    if admin is not None and admin[0] not in loopback and not token:
        # findings carry excerpts of every caller's prompts and answers
        raise WirecheckError(
            f"--admin: {admin[0]} is beyond loopback; give --admin-token (or WIRECHECK_ADMIN_TOKEN) too"
        )
    if args.direct and args.engine_upstream:
        raise WirecheckError(
            "--direct: says the taps sit straight in front of the engine, but --engine-upstream puts a "
            "gateway between the two taps; leave --direct out (dual tap blames the gateway itself)"
        )
    taps = [
        (
            # the one tap's upstream is the engine; with two taps it is the gateway
            TapConfig(
                upstream=args.upstream,
                tap=args.tap,
                # an engine tap on its own (a replica of the engine side) reads the caller tap's id and
                # never sets one: a caller tap takes back no id a tap minted, so re-stamping here would
                # give the two sides of a request two ids
                inject_correlation=args.tap != "engine",
                ask_version=args.ask_version and not args.engine_upstream,
                **tap_limits,
            ),
            *hostport(args.listen, "--listen"),
        )
    ]
    if args.engine_upstream:
        engine = TapConfig(
            upstream=args.engine_upstream,
            tap="engine",
            inject_correlation=False,
            ask_version=args.ask_version,
            **tap_limits,
        )
        taps.append((engine, *hostport(args.engine_listen, "--engine-listen")))
    for cfg, host, _ in taps:
        if host not in ("127.0.0.1", "localhost", "::1"):
            print(
                f"wirecheck proxy: warning: the {cfg.tap} tap listens on {host}, beyond loopback",
                file=sys.stderr,
            )
    return run_proxy(
        build(
            ProxyRun,
            args,
            RUN_FIELDS,
            taps=taps,
            store_path=None if args.no_store else store_source(args.store, args.store_file, "wirecheck.db"),
            admin=admin,
            admin_token=token,
            admin_hosts=tuple(args.admin_host),
            direct=args.direct,
            max_head=max_head,
            head_timeout_s=args.request_timeout_s,
        )
    )
