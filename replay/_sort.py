"""A capture in time order, in bounded memory: what ``check_stream`` reads.

A store lists its exchanges as they were written (when each ended), two captures given one after the
other are two timelines, and a foreign HAR may be in any order. :func:`in_time_order` sorts by start
time (exchanges without a time first), ties in the capture's order, and numbers each exchange with its
place in the capture. Up to one run (``run_bytes`` of exchanges as ``exchange_bytes`` counts them) is
sorted in memory; a larger capture is cut into sorted runs written to a private temporary
folder and merged (an external merge sort), so memory stays one run's whatever the capture's size,
and the disk holds about the capture once, until the last exchange is read.
"""

from __future__ import annotations

import contextlib
import heapq
import pickle
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from wirecheck.contracts import ConfigError, Exchange, exchange_bytes

__all__ = ["RUN_BYTES", "in_time_order"]

#: bytes of exchanges sorted in memory at once at the most (about 30 000 chat completions)
RUN_BYTES = 64 * 1024 * 1024

_Key = tuple[bool, float, int]


def _key(position: int, ex: Exchange) -> _Key:
    start = ex.started_epoch
    return (start is not None, start or 0.0, position)


def in_time_order(
    exchanges: Iterable[Exchange], *, run_bytes: int | None = None
) -> Iterator[tuple[int, Exchange]]:
    """``(position, exchange)`` for each exchange of the capture (``position``: its place in
    ``exchanges``), sorted by start time, those without a time first, ties by position. ``run_bytes``:
    ``RUN_BYTES`` unless given. The temporary folder is made only when a first run is written out;
    one that cannot be written is a ``ConfigError`` that names it (``TMPDIR`` chooses another)."""
    limit = RUN_BYTES if run_bytes is None else run_bytes
    if limit < 1:
        raise ConfigError(f"run_bytes must be positive, not {limit}")
    with contextlib.ExitStack() as stack:
        folder: Path | None = None
        runs: list[Path] = []
        buffered: list[tuple[_Key, Exchange]] = []
        size = 0
        for position, ex in enumerate(exchanges):
            buffered.append((_key(position, ex), ex))
            size += exchange_bytes(ex)
            if size >= limit:
                if folder is None:
                    folder = Path(stack.enter_context(_private_folder()))
                runs.append(_spill(buffered, folder, len(runs)))
                buffered, size = [], 0
        buffered.sort(key=lambda item: item[0])
        if not runs:
            for (_, _, position), ex in buffered:
                yield position, ex
            return
        files = [stack.enter_context(path.open("rb")) for path in runs]
        merged = heapq.merge(*(_read(fh) for fh in files), iter(buffered), key=lambda item: item[0])
        for (_, _, position), ex in merged:
            yield position, ex


def _private_folder() -> tempfile.TemporaryDirectory[str]:
    try:
        return tempfile.TemporaryDirectory(prefix="wirecheck-sort-")
    except OSError as exc:
        raise ConfigError(_cannot_write(tempfile.gettempdir(), exc)) from None


def _cannot_write(where: str | Path, exc: OSError) -> str:
    return (
        f"sorting the capture by time: cannot write to the temporary folder {where} "
        f"({exc.strerror or exc}); TMPDIR names one with room for about the capture's size"
    )


def _spill(items: list[tuple[_Key, Exchange]], folder: Path, n: int) -> Path:
    """One sorted run, written out. Pickled: the run is read back whole and alike by this process
    only, from a folder only its user can open (the interchange JSONL would redact credentials
    and round chunk times, and the check must see what the capture holds)."""
    items.sort(key=lambda item: item[0])
    path = folder / f"run-{n:06d}.pickle"
    try:
        with path.open("wb") as fh:
            for item in items:
                pickle.dump(item, fh, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as exc:  # a full disk mid-run: say so, never a traceback
        raise ConfigError(_cannot_write(folder, exc)) from None
    return path


def _read(fh: IO[bytes]) -> Iterator[tuple[_Key, Exchange]]:
    while True:
        try:
            item: tuple[_Key, Exchange] = pickle.load(fh)
        except EOFError:
            return
        yield item
