"""Pieces every command shares: reading captures, host:port and size options, headers, redaction."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from wirecheck._errors import WirecheckError
from wirecheck.contracts import DEFAULT_REDACTION, Exchange, Finding, Redaction, read_exchanges

__all__ = [
    "PROGRESS_EVERY_S",
    "engine_tap_options",
    "float_list",
    "headers_arg",
    "hostport",
    "load",
    "progress_options",
    "redact_option",
    "redaction",
    "size",
    "via_proxy_options",
]


def redact_option(p: argparse.ArgumentParser) -> None:
    # one policy for every writer: --redact only ever adds to the default list
    p.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="NAME",
        help="also redact this header or query parameter in everything written (repeatable, or "
        "comma-separated); always redacted: headers "
        + ", ".join(sorted(DEFAULT_REDACTION.headers))
        + ", any header ending in "
        + ", ".join(DEFAULT_REDACTION.header_suffixes)
        + "; query keys "
        + ", ".join(sorted(DEFAULT_REDACTION.query_keys)),
    )


def redaction(args: argparse.Namespace) -> Redaction:
    return DEFAULT_REDACTION.extended(args.redact)


def load(files: Sequence[str], notes: list[Finding] | None = None) -> list[Exchange]:
    """Exchanges from stores, exchange JSONL, HAR and mitmproxy flow files, told apart by content.
    Stores are opened read-only; what a store says it lost (gap rows) or set aside (live checks
    skipped) is added to ``notes`` as findings, so that a report counts it."""
    from wirecheck.record import is_store, open_store, store_notes
    from wirecheck.replay import load_capture

    out: list[Exchange] = []
    for name in files:
        if name == "-":
            out.extend(read_exchanges(sys.stdin))
        elif is_store(name):
            store = open_store(name)
            try:
                out.extend(store.exchanges())
                if notes is not None:
                    notes.extend(store_notes(store))
            finally:
                store.close()
        else:
            out.extend(load_capture(name))
    return out


def hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise WirecheckError(f"{what}: expected HOST:PORT, got {value!r}")
    return host or "127.0.0.1", int(port)


def size(value: str, what: str = "--body-limit") -> int:
    units = {
        "kib": 1024,
        "mib": 1024**2,
        "gib": 1024**3,
        "kb": 1000,
        "mb": 1000**2,
        "gb": 1000**3,
        "b": 1,
        "": 1,
    }
    num = value.strip().lower().rstrip()
    for unit in sorted(units, key=len, reverse=True):
        if unit and num.endswith(unit):
            try:
                return int(float(num[: -len(unit)]) * units[unit])
            except ValueError:
                break
    if num.isdigit():
        return int(num)
    raise WirecheckError(f"{what}: cannot read {value!r} (e.g. 32MiB)")


def headers_arg(values: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for h in values:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            raise WirecheckError(f"--header: expected K:V, got {h!r}")
        headers[k.strip()] = v.strip()
    return headers


def float_list(value: str | None, what: str) -> list[float] | None:
    if not value:
        return None
    try:
        out = [float(x) for x in value.split(",") if x.strip()]
    except ValueError:
        raise WirecheckError(f"{what}: expected numbers separated by commas, got {value!r}") from None
    if not out or any(x <= 0 for x in out):
        raise WirecheckError(f"{what}: rates must be positive")
    return out


#: seconds between progress lines in a CI log (no terminal), for scenarios and replay
PROGRESS_EVERY_S = 5.0


def progress_options(p: argparse.ArgumentParser) -> None:
    """--quiet and --progress-every for the long-running commands."""
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument(
        "--progress-every",
        type=float,
        default=PROGRESS_EVERY_S,
        metavar="S",
        help="without a terminal (CI logs): one progress line every S seconds",
    )


def engine_tap_options(
    p: argparse.ArgumentParser, listen_help: str, upstream_help: str | None = None
) -> None:
    """--engine-listen (and --engine-upstream): the engine side of a dual tap, for ``proxy`` and for
    the commands that put taps around a gateway (``--via-proxy``)."""
    if upstream_help is not None:
        p.add_argument("--engine-upstream", metavar="URL", help=upstream_help)
    p.add_argument("--engine-listen", default="127.0.0.1:8101", metavar="HOST:PORT", help=listen_help)


def via_proxy_options(p: argparse.ArgumentParser, engine_upstream_help: str | None = None) -> None:
    """--via-proxy and its engine tap, alike for ``accept`` and ``scenarios``."""
    p.add_argument(
        "--via-proxy",
        action="store_true",
        help="--target is a gateway: put wirecheck's taps on both sides of it",
    )
    engine_tap_options(
        p, "with --via-proxy: the engine tap; point the gateway's upstream here", engine_upstream_help
    )
