"""Reading an evidence file: its text, or a clear :class:`InputError` naming the file; and the marker
the simulator writes into every evidence file it makes (a verdict built on one must say so)."""

from __future__ import annotations

from pathlib import Path

from wirecheck.contracts import InputError

__all__ = ["SIM_MARKER", "read_text"]

#: what the simulator writes into every evidence file: a verdict built on it must say so
SIM_MARKER = "wirecheck-simulated-evidence"


def read_text(path: str | Path, what: str) -> str:
    """The file's text (undecodable bytes replaced); ``what`` names the kind of evidence in the error."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: {exc.strerror or exc}") from None
