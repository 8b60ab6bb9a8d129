"""wirecheck.record: recording, once. The sink protocol, the recording client (per
chunk timing and one map of error kinds), the store over its SQLite and PostgreSQL backends, the
``x-wirecheck-id`` correlation, in-process taps, and serving on loopback for taps and tests.

It imports only ``wirecheck.contracts``; the proxy, replay, the generators, acceptance and the tests
record through it."""

import importlib as _importlib
import typing as _typing

from ._correlation import CORRELATION_HEADER, Correlator, correlation_secret, mint_correlation
from ._correlation import SECRET_ENV as CORRELATION_SECRET_ENV
from ._postgres import dsn_secrets, is_postgres, redact_url
from ._sink import MemorySink, Sink
from ._store import LIVE_CHECK_SKIPPED, SCHEMA_VERSION, Store, StoreStats, is_store, open_store, store_notes
from ._window import WindowRows

if _typing.TYPE_CHECKING:
    from ._client import HOP_HEADERS, error_of, record_async, record_sync
    from ._serve import StreamingASGITransport, free_port, read_body, serve
    from ._tap import RecordingTransport, TapApp, dual_taps

#: the names of the recording client, the loopback server and the taps -> their module, imported
#: when first asked for: they bring httpx and the ASGI side, which the store's readers (the live
#: checker's process among them) never use
_LAZY = {
    "HOP_HEADERS": "_client",
    "RecordingTransport": "_tap",
    "StreamingASGITransport": "_serve",
    "TapApp": "_tap",
    "dual_taps": "_tap",
    "error_of": "_client",
    "free_port": "_serve",
    "read_body": "_serve",
    "record_async": "_client",
    "record_sync": "_client",
    "serve": "_serve",
}


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once
    return value


__all__ = [
    "CORRELATION_HEADER",
    "CORRELATION_SECRET_ENV",
    "HOP_HEADERS",
    "LIVE_CHECK_SKIPPED",
    "SCHEMA_VERSION",
    "Correlator",
    "MemorySink",
    "RecordingTransport",
    "Sink",
    "Store",
    "StoreStats",
    "StreamingASGITransport",
    "TapApp",
    "WindowRows",
    "correlation_secret",
    "dsn_secrets",
    "dual_taps",
    "error_of",
    "free_port",
    "is_postgres",
    "is_store",
    "mint_correlation",
    "open_store",
    "read_body",
    "record_async",
    "record_sync",
    "redact_url",
    "serve",
    "store_notes",
]
