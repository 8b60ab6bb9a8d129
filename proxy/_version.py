"""The upstream's vLLM version, asked once and written on every exchange the tap records.

vLLM serves ``GET /version`` as ``{"version": "0.32.0"}`` (``entrypoints/serve/instrumentator/
basic.py``); the checker holds that version against the known-bug catalogue's version ranges
(``server_version`` on an exchange, docs/exchange-format.md). ``system_fingerprint`` carries it too,
but only on chat completions, and vLLM can be told to leave it out (``--fingerprint-mode none``).

The question goes out once, beside the first request the tap forwards and never in its way: the
exchanges recorded before the answer came carry no version. Only an answer shaped like vLLM's is
kept: a gateway in front of the engine answers ``/version`` with a 404 (LiteLLM) or passes vLLM's
answer on (nginx), so a caller tap records a version only where the engine's came through. A refused
connection (the engine not up yet, or restarting) asks again on a later request, and a restart
behind the tap is a new engine whose version is asked afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Callable

from wirecheck.contracts import Exchange

from ._upstream import Upstream, UpstreamTimeout, UpstreamUnreachable

__all__ = ["UpstreamVersion"]

#: a release (``0.32.0``, ``0.11.0rc1``) or a dev build (``0.1.dev19262+gb6bbf29dd.d20260727``)
_VERSION = re.compile(r"^\d+\.\d+[0-9A-Za-z.+\-]*$")
#: how long one question may take, and how soon a refused one is asked again
_TIMEOUT_S = 5.0
_RETRY_S = 30.0
_MAX_BODY = 4096


class UpstreamVersion:
    def __init__(
        self, upstream: Upstream, base_path: str, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._upstream = upstream
        self._target = base_path.rstrip("/") + "/version"
        self._clock = clock
        self.version: str | None = None
        #: a definite answer came (a version, or something that is not vLLM's): nothing more to ask
        self._settled = False
        self._asked_at: float | None = None
        self._task: asyncio.Task[None] | None = None

    def ask(self) -> None:
        """Start the question unless it is answered, under way, or was refused only just now."""
        if self._settled or (self._task is not None and not self._task.done()):
            return
        now = self._clock()
        if self._asked_at is not None and now - self._asked_at < _RETRY_S:
            return
        self._asked_at = now
        self._task = asyncio.ensure_future(self._ask())

    def stamp(self, ex: Exchange) -> None:
        """Write the version on a recorded exchange, once known; a refused exchange means the engine
        went away, and the next one asks again (it may come back another version)."""
        if ex.error is not None and ex.error.kind == "upstream_refused":
            self.version, self._settled = None, False
            return
        if self.version is not None:
            ex.extra["server_version"] = self.version

    async def aclose(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _ask(self) -> None:
        try:
            async with asyncio.timeout(_TIMEOUT_S):
                resp = await self._upstream.open("GET", self._target, [(b"accept", b"application/json")], b"")
                try:
                    body = b""
                    async for piece in resp.body:
                        body += piece
                        if len(body) > _MAX_BODY:
                            break
                finally:
                    await resp.aclose()
        except (UpstreamUnreachable, UpstreamTimeout, TimeoutError, OSError):
            return  # not up yet: a later request asks again
        except Exception:  # a broken answer is no version, and never the proxy's failure
            self._settled = True
            return
        self._settled = True
        self.version = _read(resp.status, body)


def _read(status: int, body: bytes) -> str | None:
    if status != 200:
        return None
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    value = doc.get("version") if isinstance(doc, dict) else None
    return value if isinstance(value, str) and _VERSION.match(value) else None
