"""Version strings as vLLM writes them: ``/version`` (and the log's), and ``system_fingerprint``."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_fingerprint", "parse_version", "version_at_least"]


def parse_version(text: str) -> tuple[int, ...] | None:
    """``0.33.0`` -> (0, 33, 0); a dev build such as ``0.1.dev19262+gb6bbf29dd`` -> None (not comparable)."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|post)\d+)?(?:\+\S+)?$", text.strip())
    if not m or ".dev" in text:
        return None
    return tuple(int(x) for x in m.groups() if x is not None)


def version_at_least(text: str, minimum: str) -> bool | None:
    have, need = parse_version(text), parse_version(minimum)
    if have is None or need is None:
        return None
    width = max(len(have), len(need))
    return have + (0,) * (width - len(have)) >= need + (0,) * (width - len(need))


_FP = re.compile(r"^vllm-(?P<version>.+?)(?P<par>(?:-(?:tp|pp|dp)\d+|-ep)*)-(?P<hash>[0-9a-f]{8})$")


def parse_fingerprint(fp: str) -> dict[str, Any] | None:
    """``vllm-0.33.0-tp8-ep-1a2b3c4d`` -> version, tp, pp, dp, ep, hash; None when it is not vLLM's."""
    m = _FP.match(fp.strip())
    if not m:
        return None
    par = m.group("par")
    out: dict[str, Any] = {"version": m.group("version"), "hash": m.group("hash"), "ep": "-ep" in par}
    for key in ("tp", "pp", "dp"):
        k = re.search(rf"-{key}(\d+)", par)
        out[key] = int(k.group(1)) if k else 1
    return out
