"""Test helpers for driving the simulator and gateway without sockets (the in-process tee and ASGI
transport they record through are ``wirecheck.record``'s)."""

from __future__ import annotations

import json
from typing import Any

import httpx


async def post(client: httpx.AsyncClient, body: dict[str, Any], corr: str | None = None) -> httpx.Response:
    """POST a chat completion and read it to the end (streams too); a reset leaves the exchange's error."""
    headers = {"x-wirecheck-id": corr} if corr else {}
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            await r.aread()
            return r
    except httpx.HTTPError:
        return httpx.Response(599)


def dumps(o: Any) -> bytes:
    return json.dumps(o).encode()
