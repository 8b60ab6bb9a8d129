"""Pieces every command shares: reading captures, host:port and size options, headers, redaction,
secrets."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from wirecheck._errors import WirecheckError
from wirecheck.contracts import DEFAULT_REDACTION, Exchange, Finding, Redaction, printable

__all__ = [
    "PROGRESS_EVERY_S",
    "STORE_ENV",
    "capture_limits",
    "capture_options",
    "engine_tap_options",
    "float_list",
    "headers_arg",
    "hostport",
    "keep_secret",
    "load",
    "progress_options",
    "read_captures",
    "read_secret_file",
    "redact_option",
    "redaction",
    "resolve_secret",
    "scrub_secrets",
    "secret_option",
    "size",
    "store_source",
    "via_proxy_options",
]


#: the store (a SQLite path or a PostgreSQL URL, which may carry a password) when none is named
STORE_ENV = "WIRECHECK_STORE"

#: secret values this run handles (tokens, store passwords): scrubbed from every message it prints
_SECRETS: set[str] = set()


def keep_secret(value: str | None) -> None:
    """Remember a secret so that no error message of this run prints it."""
    if value:
        _SECRETS.add(value)


def scrub_secrets(text: str, argv: Sequence[str] = ()) -> str:
    """``text`` without any secret this run knows: those kept, and the passwords of every
    PostgreSQL URL on the command line or in ``WIRECHECK_STORE``."""
    from wirecheck.record import dsn_secrets, is_postgres

    found = set(_SECRETS)
    for value in [*argv, os.environ.get(STORE_ENV, "")]:
        for piece in (value, value.partition("=")[2]):  # --store=URL as one argument too
            if is_postgres(piece):
                found.update(dsn_secrets(piece))
    for secret in sorted(found, key=len, reverse=True):
        text = text.replace(secret, "[redacted]")
    return text


def read_secret_file(path: str, what: str) -> str:
    """The secret in a file (its first line, without surrounding white space): for secrets that
    must not stand on a command line, where every local user can read them (``ps``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise WirecheckError(f"{what}: cannot read {path} ({reason})") from None
    value = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not value:
        raise WirecheckError(f"{what}: {path} is empty")
    keep_secret(value)
    return value


def secret_option(
    p: argparse.ArgumentParser, flag: str, *, env: str, metavar: str, help: str, file_help: str
) -> None:
    """``--NAME VALUE`` and ``--NAME-file PATH`` for a secret that may also come from ``env``."""
    p.add_argument(flag, default=None, metavar=metavar, help=f"{help} (default ${env})")
    p.add_argument(f"{flag}-file", default=None, metavar="PATH", help=file_help)


def resolve_secret(args: argparse.Namespace, flag: str, env: str) -> str | None:
    """The secret of ``flag``: given, from its file, or from ``env`` (one of the first two at most).
    Given on the command line it works, with a note that ``ps`` shows it to every local user."""
    name = flag.lstrip("-").replace("-", "_")
    given, path = getattr(args, name), getattr(args, f"{name}_file")
    if given is not None and path is not None:
        raise WirecheckError(f"{flag}: give it or {flag}-file, not both")
    if path is not None:
        return read_secret_file(path, f"{flag}-file")
    if given is not None:
        keep_secret(given)
        print(
            f"wirecheck: note: {flag} on the command line is visible to every local user (ps); "
            f"{flag}-file or ${env} keep it out of the process list",
            file=sys.stderr,
        )
        return str(given) or None
    value = os.environ.get(env) or None
    keep_secret(value)
    return value


def store_source(given: str | None, path: str | None, default: str | None = None) -> str | None:
    """The store to use: ``--store``, else the one in ``--store-file``, else ``$WIRECHECK_STORE``,
    else ``default``. A PostgreSQL URL's password is kept secret (scrubbed from every message)."""
    from wirecheck.record import dsn_secrets, is_postgres

    if given is not None and path is not None:
        raise WirecheckError("--store: give it or --store-file, not both")
    store = read_secret_file(path, "--store-file") if path is not None else given
    if store is None:
        store = os.environ.get(STORE_ENV) or default
    if store is not None and is_postgres(store):
        for secret in dsn_secrets(store):
            keep_secret(secret)
        if given is not None and dsn_secrets(given):
            print(
                "wirecheck: note: the store URL on the command line carries a password that every local "
                f"user can read (ps); --store-file or ${STORE_ENV} keep it out of the process list",
                file=sys.stderr,
            )
    return store


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


def capture_options(p: argparse.ArgumentParser, *, streamed: bool = False) -> None:
    """The limits every reader of captures applies (``wirecheck.replay.CaptureLimits``). A
    ``streamed`` reader (``check``) holds a window of the capture, not all of it: no limit on the
    exchanges unless asked for, or unless what it writes needs every exchange at once."""
    from wirecheck.replay import CaptureLimits

    d = CaptureLimits()
    p.add_argument(
        "--max-entry-size",
        default=f"{d.entry_bytes // (1024 * 1024)}MiB",
        metavar="SIZE",
        help="largest single entry of a capture: a JSONL line, a HAR entry, a store row, a flow "
        f"(default {d.entry_bytes // (1024 * 1024)}MiB)",
    )
    p.add_argument(
        "--max-exchanges",
        type=int,
        default=None if streamed else d.exchanges,
        metavar="N",
        help=(
            "most exchanges read from one capture file or store (default: none for the text and "
            f"json reports, which hold a window of the capture; {d.exchanges} for html and junit, "
            "which hold every exchange)"
            if streamed
            else f"most exchanges read from one capture file or store (default {d.exchanges})"
        ),
    )


def capture_limits(args: argparse.Namespace, *, holds_all: bool = True) -> Any:
    """The limits of ``capture_options``; ``holds_all``: the command holds every exchange it reads
    (the default limit applies when none was given)."""
    from wirecheck.replay import CaptureLimits

    entry = size(args.max_entry_size, "--max-entry-size")
    given = args.max_exchanges
    if entry < 1 or (given is not None and given < 1):
        raise WirecheckError("--max-entry-size and --max-exchanges must be positive")
    if given is None:
        given = CaptureLimits().exchanges if holds_all else sys.maxsize
    return CaptureLimits(entry_bytes=entry, exchanges=given)


def read_captures(
    files: Sequence[str], notes: list[Finding] | None = None, limits: Any = None
) -> Iterator[Exchange]:
    """The exchanges of stores, exchange JSONL, HAR and mitmproxy flow files, one at a time, told
    apart by content (``wirecheck.replay.read_capture``, the one way every reader opens a capture).
    Stores are opened read-only; what a store says it lost (gap rows) or set aside (live checks
    skipped) is added to ``notes`` as findings once it is read, so that a report counts it."""
    from wirecheck.replay import CaptureLimits, read_capture

    for name in files:
        yield from read_capture(name, limits=limits or CaptureLimits(), notes=notes)


def load(files: Sequence[str], notes: list[Finding] | None = None, limits: Any = None) -> list[Exchange]:
    """Every exchange of :func:`read_captures`, held at once."""
    return list(read_captures(files, notes, limits))


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


#: an HTTP field name (RFC 9110 ``token``)
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: what a field value may not hold: CR, LF, NUL and the other controls but tab (RFC 9110 5.5)
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def headers_arg(values: list[str]) -> dict[str, str]:
    """``--header K:V`` values. They are credentials as a rule, so no message quotes a value; a
    name or value HTTP would refuse (a CR, another control character) is refused here, before
    anything is sent or printed."""
    headers: dict[str, str] = {}
    for h in values:
        k, sep, v = h.partition(":")
        k, v = k.strip(), v.strip()
        if not sep or not k:
            raise WirecheckError(
                "--header: expected NAME: VALUE (the text given is not shown: it may be a secret)"
            )
        if not _TOKEN.fullmatch(k):
            raise WirecheckError(f"--header: {printable(k[:60])!s} is not an HTTP header name")
        if _BAD_VALUE.search(v):
            raise WirecheckError(
                f"--header {k}: the value holds a control character (CR, LF, ...) that HTTP refuses"
            )
        headers[k] = v
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
