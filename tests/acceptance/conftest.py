"""What the acceptance tests share: an acceptance run as a reviewer starts it, in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wirecheck.acceptance import AcceptanceResult, AcceptOptions, Progress, accept


def accept_ci(
    target: str, out: Path, phases: list[str], *, engine_url: str | None = None, **options: Any
) -> AcceptanceResult:
    """``accept`` of ``target`` by reviewer ``ci`` into ``out``, quietly; the engine is the target
    itself unless ``engine_url`` says where (a gateway in between), other options as given."""
    opts = AcceptOptions(
        target=target,
        engine_url=engine_url or target,
        reviewer="ci",
        out=out,
        phases=phases,
        **options,
    )
    return accept(opts, Progress(quiet=True))
