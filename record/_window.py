"""The live checker's window, read again for every batch: :meth:`Store.rows_between` (the (id,
version) of the exchanges that started between two times, in write order), reading from the store
only what may have changed since the last window.

Each batch asks for the exchanges recorded about ``NEIGHBOUR_S`` around it, and consecutive batches
share nearly all of them: at 640 exchanges a second a batch read back thousands of rows it had just
read, about 6k instructions a row (the sqlite3 module's step and tuple a row, the sort by ``seq``),
a seventh of what checking an exchange cost. A row of the last window that is still in this one
is taken from what was read then, unless the store says it may have changed:

- rows written since (a ``seq`` past the last window's highest) and rows outside the last window's
  times are read as before, in one statement;
- for the rest, the part of this window the last one covered, the store counts the rows there with
  a ``seq`` up to the last window's highest and sums a checksum of each one's seq and version
  (``ended_at`` in whole microseconds, modulo a prime) in the index alone, without making a row in
  Python; where that is not what was read, the whole window is read again.

So a row written again (a new version), a row written late with a lower ``seq`` (PostgreSQL hands
out ``seq`` before a transaction commits) or a row moved into the window makes the window read
whole, as before; an exchange is never left out of a window and never seen at a version it no longer
has, but for a rewrite whose version moved by under a microsecond (the same exchange written
twice has one end: its version does not move at all, whole windows or not), a row moved in time
within the covered part without a new version (a rewrite through the store gives it one) or a
checksum that matches by chance (1 in about 10^9). PostgreSQL compares text by its collation, which may not
be Python's: there the whole window is read every time, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from wirecheck.contracts import native

if TYPE_CHECKING:
    from ._store import Store

__all__ = ["WindowRows"]

#: a prime under 2**30: the sum of a window's checksums stays a 64-bit integer in SQL
_PRIME = 1_000_000_007
#: a row's checksum of its place and version, in SQL: its seq and its ``ended_at`` in whole
#: microseconds (a row without a version: its seq alone)
_CHECK = f"(seq * 1000003 + COALESCE(CAST(ended_at * 1000000 AS INTEGER) % {_PRIME}, 0)) % {_PRIME}"

#: (seq, id, version, started_at, checksum)
Row = tuple[int, str, Any, str, int]


class WindowRows:
    """:meth:`Store.rows_between` for a window that moves forward a little at a time (see the
    module's docstring). Holds the last window's rows (what one call returns anyway)."""

    def __init__(self) -> None:
        self._store: Store | None = None
        self._rows: list[Row] = []
        self._pairs: list[tuple[str, Any]] = []  # (id, version) of each of ``_rows``
        self._lo = self._hi = ""
        self._last = -1  # the highest seq of the last window
        #: windows read whole and windows read in part, since made (for the tests and the docs)
        self.whole = 0
        self.parts = 0

    def rows(self, store: Store, lo: str, hi: str) -> list[tuple[str, Any]]:
        """(id, version) of the exchanges that started between the ISO times ``lo`` and ``hi``, in
        write order: what ``store.rows_between(lo, hi)`` returns now."""
        if store is not self._store or store.pg or max(lo, self._lo) > min(hi, self._hi):
            return self._whole(store, lo, hi)
        # the part the last window covered, whose rows up to ``last`` were read then
        a, b, last = max(lo, self._lo), min(hi, self._hi), self._last
        try:
            kept, pairs, total = _keep(self._rows, self._pairs, a, b)
        except TypeError:  # a row not as this module made it
            return self._whole(store, lo, hi)
        # what is not kept goes now, before the rest is read (a window emptied by a failure below
        # is read whole next time: its count is not the store's)
        self._rows, self._pairs = [], []
        # (``+seq``: the index of start times, not the rows' own order, which would read them all)
        count, sums = store._rows(
            f"SELECT COUNT(*), COALESCE(SUM({_CHECK}), 0) FROM exchanges "
            "WHERE started_at >= ? AND started_at <= ? AND +seq <= ?",
            (a, b, last),
        )[0]
        if count != len(kept) or sums != total:
            return self._whole(store, lo, hi)  # written again, or late: read it all as it is
        # the rest: rows written since (by seq, not by start time), and those outside the covered part
        fresh: list[Row] = store._rows(
            f"SELECT seq, id, ended_at, started_at, {_CHECK} FROM exchanges "
            "WHERE seq > ? AND +started_at >= ? AND +started_at <= ? UNION ALL "
            f"SELECT seq, id, ended_at, started_at, {_CHECK} FROM exchanges "
            "WHERE started_at >= ? AND started_at < ? AND +seq <= ? UNION ALL "
            f"SELECT seq, id, ended_at, started_at, {_CHECK} FROM exchanges "
            "WHERE started_at > ? AND started_at <= ? AND +seq <= ? ORDER BY 1",
            (last, lo, hi, lo, a, last, b, hi, last),
        )
        if fresh:
            if kept and fresh[0][0] < kept[-1][0]:  # not all after: in write order, all of them
                kept = sorted(kept + fresh)  # by seq (unique)
                pairs = [(r[1], r[2]) for r in kept]
            else:
                kept += fresh
                pairs += [(r[1], r[2]) for r in fresh]
        self._keep(store, kept, pairs, lo, hi)
        self.parts += 1
        return list(pairs)

    def _whole(self, store: Store, lo: str, hi: str) -> list[tuple[str, Any]]:
        self.whole += 1
        self._rows, self._pairs = [], []  # let the last window go before this one is read
        if store.pg:
            return store.rows_between(lo, hi)
        rows: list[Row] = store._rows(
            f"SELECT seq, id, ended_at, started_at, {_CHECK} FROM exchanges "
            "WHERE started_at >= ? AND started_at <= ? ORDER BY seq",
            (lo, hi),
        )
        pairs = [(r[1], r[2]) for r in rows]
        self._keep(store, rows, pairs, lo, hi)
        return list(pairs)

    def _keep(self, store: Store, rows: list[Row], pairs: list[tuple[str, Any]], lo: str, hi: str) -> None:
        # every row written later has a higher seq than any read now (SQLite's writers take turns,
        # and AUTOINCREMENT never hands a seq out twice)
        last = self._last if store is self._store else -1
        self._store, self._rows, self._pairs, self._lo, self._hi = store, rows, pairs, lo, hi
        self._last = max(last, rows[-1][0] if rows else -1)


def _keep_py(
    rows: list[Row], pairs: list[tuple[str, Any]], a: str, b: str
) -> tuple[list[Row], list[tuple[str, Any]], int]:
    """The rows that started within [``a``, ``b``], their pairs and the sum of their checksums:
    the reference of the compiled twin (record/_window_c.c)."""
    if len(rows) != len(pairs):
        raise TypeError("a window's rows and pairs are one length")
    kept: list[Row] = []
    kept_pairs: list[tuple[str, Any]] = []
    total = 0
    for row, pair in zip(rows, pairs, strict=True):
        if type(row) is not tuple or len(row) != 5 or type(row[3]) is not str or type(row[4]) is not int:
            raise TypeError("a window row is a tuple of five, its start a str and its checksum an int")
        if a <= row[3] <= b:
            if not -(2**31) < row[4] < 2**31:
                raise TypeError("a window row's checksum is out of its range")
            kept.append(row)
            kept_pairs.append(pair)
            total += row[4]
    return kept, kept_pairs, total


#: the compiled twin of ``_keep_py`` (record/_window_c.c), or None
_native = native("wirecheck.record._window_c")


def _keep(
    rows: list[Row], pairs: list[tuple[str, Any]], a: str, b: str
) -> tuple[list[Row], list[tuple[str, Any]], int]:
    if _native is not None:
        got: tuple[list[Row], list[tuple[str, Any]], int] = _native.keep(rows, pairs, a, b)
        return got
    return _keep_py(rows, pairs, a, b)
