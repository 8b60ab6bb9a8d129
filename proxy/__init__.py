"""wirecheck.proxy: the transparent recording proxy (ASGI), its taps, the SQLite store and batch
writer, the live-check worker, export, and the mitmproxy addon (``proxy/mitm_addon.py``)."""

from ._admin import ADMIN_TOKEN_ENV, AdminApp
from ._app import CORRELATION_HEADER, DEFAULT_REDACT, ProxyApp, TapConfig
from ._correlation import SECRET_ENV as CORRELATION_SECRET_ENV
from ._correlation import correlation_secret, mint_correlation
from ._export import to_har, write_har, write_jsonl
from ._live import CheckerSupervisor, check_ids, check_pending, run_checker, start_checker
from ._runner import ListenerServer, ProxyRun, run_proxy
from ._store import SCHEMA_VERSION, Store, StoreStats, is_store, open_store, store_notes

__all__ = [
    "ADMIN_TOKEN_ENV",
    "CORRELATION_HEADER",
    "CORRELATION_SECRET_ENV",
    "DEFAULT_REDACT",
    "SCHEMA_VERSION",
    "AdminApp",
    "CheckerSupervisor",
    "ListenerServer",
    "ProxyApp",
    "ProxyRun",
    "Store",
    "StoreStats",
    "TapConfig",
    "check_ids",
    "check_pending",
    "correlation_secret",
    "is_store",
    "mint_correlation",
    "open_store",
    "run_checker",
    "run_proxy",
    "start_checker",
    "store_notes",
    "to_har",
    "write_har",
    "write_jsonl",
]
