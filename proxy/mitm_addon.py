"""wirecheck as a mitmproxy addon, for teams that already run mitmproxy (forward, reverse or
transparent mode, TLS included): it records the same exchanges into the same store.

    mitmdump --mode reverse:http://127.0.0.1:8000 -p 8100 \\
        -s "$(python -c 'import wirecheck.proxy.mitm_addon as m; print(m.__file__)')" \\
        --set wirecheck_store=wirecheck.db --set wirecheck_tap=caller

Chat completions are streamed through (``flow.response.stream``), so mitmproxy does not buffer them;
the addon notes each chunk's arrival offset itself, since mitmproxy records no chunk timing. Bodies are
recorded raw, as they travelled (gzip stays gzip: the checker decodes it). Credentials are redacted
in the record (``wirecheck_redact``). Check afterwards with ``wirecheck check wirecheck.db``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from wirecheck.contracts import DEFAULT_REDACTION, Chunk, Exchange, ExchangeError, HttpRequest, HttpResponse
from wirecheck.record import CORRELATION_HEADER, Store

__all__ = ["WirecheckRecorder", "addons"]


class WirecheckRecorder:
    def __init__(self) -> None:
        self.store: Store | None = None
        self.tap = "caller"
        self.redact = DEFAULT_REDACTION
        self.seq = 0

    def load(self, loader: Any) -> None:
        loader.add_option("wirecheck_store", str, "wirecheck.db", "wirecheck: SQLite store to record into")
        loader.add_option(
            "wirecheck_tap", str, "caller", "wirecheck: tap name of this mitmproxy (caller or engine)"
        )
        loader.add_option(
            "wirecheck_redact",
            str,
            "",
            "wirecheck: more header names and query keys to redact in the record (comma-separated), "
            "on top of the default list (docs/proxy.md)",
        )
        loader.add_option(
            "wirecheck_stream_all", bool, True, "wirecheck: stream every response through (no buffering)"
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx

        opts = ctx.options
        if "wirecheck_store" in updated or self.store is None:
            if self.store is not None:
                self.store.close()
            self.store = Store(opts.wirecheck_store, writer=True)
        self.tap = opts.wirecheck_tap
        self.redact = DEFAULT_REDACTION.extended([opts.wirecheck_redact])

    def requestheaders(self, flow: Any) -> None:
        flow.metadata["wirecheck_t0"] = time.monotonic()
        flow.metadata["wirecheck_started"] = datetime.now(UTC).isoformat()

    def responseheaders(self, flow: Any) -> None:
        from mitmproxy import ctx

        if not ctx.options.wirecheck_stream_all:
            return
        t0 = flow.metadata.get("wirecheck_t0", time.monotonic())
        chunks: list[Chunk] = []
        flow.metadata["wirecheck_chunks"] = chunks

        def tee(data: bytes) -> bytes:
            if data:
                chunks.append(Chunk((time.monotonic() - t0) * 1000.0, data))
            return data

        flow.response.stream = tee

    def _exchange(self, flow: Any) -> Exchange:
        self.seq += 1
        req = flow.request
        headers = self.redact.header_list(req.headers.items(multi=True))
        ex = Exchange(
            id=f"mitm-{self.tap}-{flow.id}",
            tap=self.tap,
            correlation=req.headers.get(CORRELATION_HEADER),
            started_at=flow.metadata.get("wirecheck_started"),
            request=HttpRequest(req.method, self.redact.target(req.path), headers, req.raw_content or b""),
        )
        resp = flow.response
        if resp is not None:
            rh = self.redact.header_list(resp.headers.items(multi=True))
            chunks = flow.metadata.get("wirecheck_chunks")
            if chunks is not None:
                ex.response = HttpResponse(resp.status_code, rh, b"", list(chunks))
            else:
                ex.response = HttpResponse(resp.status_code, rh, resp.raw_content or b"")
        ex.extra["_ended_mono"] = time.monotonic()
        return ex

    def response(self, flow: Any) -> None:
        if self.store is not None:
            self.store.put(self._exchange(flow))

    def error(self, flow: Any) -> None:
        if self.store is None:
            return
        ex = self._exchange(flow)
        msg = str(flow.error.msg) if flow.error else "unknown error"
        low = msg.lower()
        t0 = flow.metadata.get("wirecheck_t0")
        t_ms = (time.monotonic() - t0) * 1000.0 if t0 else None
        if "client disconnected" in low or "killed" in low:
            kind = "client_abort"
        elif "timeout" in low or "timed out" in low:
            kind = "timeout"
        elif flow.response is None and ("connect" in low or "refused" in low):
            kind = "upstream_refused"
        else:
            kind = "upstream_reset"
        ex.error = ExchangeError(kind, msg, t_ms)
        self.store.put(ex)

    def done(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None


addons = [WirecheckRecorder()]
