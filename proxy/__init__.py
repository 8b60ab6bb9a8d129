"""wirecheck.proxy: the transparent recording proxy (ASGI), its taps (recording into ``wirecheck.record``'s
store), the live-check worker, export, and the mitmproxy addon (``proxy/mitm_addon.py``)."""

from ._admin import ADMIN_TOKEN_ENV, AdminApp
from ._app import DEFAULT_REDACT, ProxyApp, TapConfig
from ._export import to_har, write_har, write_jsonl
from ._http import ListenerConfig
from ._lifeline import HELPER_PRIORITY_ENV, helper_priority
from ._live import CheckerSupervisor, check_ids, check_pending, run_checker, start_checker
from ._loop import EVENT_LOOP_ENV, event_loop_name
from ._runner import ProxyRun, run_proxy
from ._server import Listener, serve_listener

__all__ = [
    "ADMIN_TOKEN_ENV",
    "DEFAULT_REDACT",
    "EVENT_LOOP_ENV",
    "HELPER_PRIORITY_ENV",
    "AdminApp",
    "CheckerSupervisor",
    "Listener",
    "ListenerConfig",
    "ProxyApp",
    "ProxyRun",
    "TapConfig",
    "check_ids",
    "check_pending",
    "event_loop_name",
    "helper_priority",
    "run_checker",
    "run_proxy",
    "serve_listener",
    "start_checker",
    "to_har",
    "write_har",
    "write_jsonl",
]
