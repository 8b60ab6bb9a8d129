"""wirecheck.proxy: the transparent recording proxy (ASGI), its taps (recording into ``wirecheck.record``'s
store), the live-check worker, export, and the mitmproxy addon (``proxy/mitm_addon.py``).

Its names are imported when first asked for (``__getattr__``): the live-check worker, a process of its
own that needs only ``_live`` and what that imports, did not then load the forwarding side (uvloop's
loop, the ASGI app, httpx through the recording client): about 10 MB of its resident memory.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._admin import ADMIN_TOKEN_ENV, AdminApp
    from ._app import DEFAULT_REDACT, ProxyApp, TapConfig
    from ._export import to_har, write_har, write_jsonl
    from ._http import ListenerConfig
    from ._lifeline import HELPER_PRIORITY_ENV, helper_priority
    from ._live import CheckerSupervisor, check_ids, check_pending, run_checker, start_checker
    from ._loop import EVENT_LOOP_ENV, event_loop_name
    from ._runner import ProxyRun, run_proxy
    from ._server import Listener, serve_listener

#: each name -> the module of this package that defines it
_WHERE = {
    "ADMIN_TOKEN_ENV": "_admin",
    "AdminApp": "_admin",
    "CheckerSupervisor": "_live",
    "DEFAULT_REDACT": "_app",
    "EVENT_LOOP_ENV": "_loop",
    "HELPER_PRIORITY_ENV": "_lifeline",
    "Listener": "_server",
    "ListenerConfig": "_http",
    "ProxyApp": "_app",
    "ProxyRun": "_runner",
    "TapConfig": "_app",
    "check_ids": "_live",
    "check_pending": "_live",
    "event_loop_name": "_loop",
    "helper_priority": "_lifeline",
    "run_checker": "_live",
    "run_proxy": "_runner",
    "serve_listener": "_server",
    "start_checker": "_live",
    "to_har": "_export",
    "write_har": "_export",
    "write_jsonl": "_export",
}


def __getattr__(name: str) -> _typing.Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # asked once
    return value


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
