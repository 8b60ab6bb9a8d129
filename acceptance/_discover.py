"""What the engine says about itself before any phase runs: its version (``/version``), the model it
serves (``/v1/models``, unless the options name one) and, from one small request, the
``system_fingerprint`` of the instance that answered. A target that does not answer stops the run."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import httpx

from wirecheck.contracts import InputError

from .load import measure

__all__ = ["EngineInfo", "discover"]


@dataclass(slots=True)
class EngineInfo:
    version: str | None = None
    model: str | None = None
    fingerprint: str | None = None
    #: the small request's measurement
    probe: dict[str, Any] = field(default_factory=dict)


async def discover(
    target: str, engine_url: str | None, headers: dict[str, str], model: str | None
) -> EngineInfo:
    info = EngineInfo(model=model)
    async with httpx.AsyncClient(timeout=httpx.Timeout(60, connect=10)) as client:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
            r = await client.get((engine_url or target).rstrip("/") + "/version", timeout=10)
            if r.status_code == 200:
                info.version = r.json().get("version")
        if info.model is None:
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, IndexError):
                r = await client.get(target.rstrip("/") + "/v1/models", timeout=10, headers=headers)
                if r.status_code == 200:
                    info.model = r.json()["data"][0]["id"]
        body: dict[str, Any] = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 8}
        if info.model:
            body["model"] = info.model
        s = await measure(client, target.rstrip("/") + "/v1/chat/completions", body, headers=headers)
    if s.status is None:
        raise InputError(f"the target {target} does not answer: {s.error}")
    info.fingerprint, info.probe = s.fingerprint, s.to_json()
    return info
