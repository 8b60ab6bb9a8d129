"""Ground truth: which faults the simulator and the simulated gateway really put on the wire.

Attribution must be measured, not eyeballed: the demo's simulator and faulty gateway
know every fault they inject, so each writes one JSON line per exchange it changed, keyed by what
the checker can join on (the ``x-wirecheck-id`` correlation id the caller tap injects, and the chat
completion ``id``). A fault that *fires* by its rate but changes nothing (``finish_reason_changed`` on
an answer without tool calls, a model fault on an answer without calls) is not written: nothing of
it is on the wire. A fault that changed the bytes but that no reader of the wire can tell apart from
a correct answer is written with ``observable: false`` and the reason (the demo lists them), so that
recall is measured over what can be seen and a finding of it still counts as correct.

The simulator shares nothing with the checker (DESIGN.md): this module only writes what was done;
scoring the checker's findings against it lives in ``wirecheck.acceptance``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

__all__ = ["CORRELATION_HEADER", "GroundTruth", "Injected", "read_truth"]

#: the caller tap's correlation header (proxy's CORRELATION_HEADER; sim may not import proxy)
CORRELATION_HEADER = "x-wirecheck-id"


@dataclass(frozen=True, slots=True)
class Injected:
    """One fault put on one exchange: its name (``model.invalid_json``, ``reasoning_dropped``), the
    side to blame (``model`` | ``parser`` | ``engine`` | ``gateway``), and whether the wire shows it."""

    fault: str
    blame: str
    observable: bool = True
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fault": self.fault, "blame": self.blame, "observable": self.observable}
        if self.why:
            out["why"] = self.why
        return out


class GroundTruth:
    """Append-only JSONL of injected faults, one line per changed exchange; shared by the simulator
    and the gateway of one demo (each line names its ``side``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO | None = self.path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def record(
        self,
        side: str,
        *,
        seq: int,
        correlation: str | None,
        completion_id: str | None,
        faults: Iterable[Injected],
    ) -> None:
        items = [f.to_dict() for f in faults]
        if not items:
            return
        line = json.dumps(
            {
                "side": side,
                "seq": seq,
                "correlation": correlation,
                "completion_id": completion_id,
                "faults": items,
            },
            sort_keys=True,
        )
        with self._lock:
            if self._fh is not None:  # a late stream after close is dropped, not a crash
                self._fh.write(line + "\n")
                self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None


def read_truth(path: str | Path) -> list[dict[str, Any]]:
    """The lines a :class:`GroundTruth` wrote."""
    out: list[dict[str, Any]] = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line))
    return out
