"""The live checker's window read from what changed since the last one (``WindowRows``): whatever
happens to the store between two windows (rows written, written again, written late with a lower
seq, moved in time, removed), each window is what ``Store.rows_between`` reads whole."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.leaks import grown_by
from wirecheck.contracts import Exchange, HttpRequest
from wirecheck.contracts._native import PURE_PYTHON, native
from wirecheck.record import Store, WindowRows
from wirecheck.record._window import Row, _keep_py


def _at(second: int) -> str:
    return f"2026-12-05T10:00:{second:02d}.000000+00:00"


def _exchange(i: int | str, second: int) -> Exchange:
    ex_id = i if isinstance(i, str) else f"e{i}"
    return Exchange(id=ex_id, started_at=_at(second), request=HttpRequest(body=b"{}"))


#: every test here runs with the twins and on their Python references (tests/record/conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(st.integers(0, 59), min_size=1, max_size=6)),
        st.tuples(st.just("again"), st.integers(0, 200), st.integers(0, 59)),  # written again (a new end)
        st.tuples(st.just("late"), st.integers(0, 59)),  # a lower seq than rows read already
        st.tuples(st.just("end"), st.integers(0, 200)),  # the version changed in place
        st.tuples(st.just("move"), st.integers(0, 200), st.integers(0, 59)),  # written again elsewhere
        st.tuples(st.just("remove"), st.integers(0, 200)),
        st.tuples(st.just("window"), st.integers(0, 30), st.integers(20, 59)),
        st.tuples(st.just("window"), st.integers(0, 30), st.integers(20, 59)),
        st.tuples(st.just("window"), st.integers(0, 30), st.integers(20, 59)),
    ),
    max_size=30,
)


@settings(max_examples=80, deadline=None)
@given(_steps)
def test_every_window_is_the_store_s_window_read_whole(steps: list[tuple[object, ...]]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        _run(Path(tmp) / "w.db", steps)


def _run(path: Path, steps: list[tuple[object, ...]]) -> None:
    store = Store(path)
    raw = sqlite3.connect(path, isolation_level=None)
    window = WindowRows()
    written = 0
    try:
        store.write_now([_exchange(k, k % 60) for k in range(0, 40, 3)])  # leaves seq gaps once removed
        written = 40
        for step in steps:
            kind = step[0]
            ids = [r[0] for r in raw.execute("SELECT id FROM exchanges ORDER BY seq")]
            pick = (
                ids[int(step[1]) % len(ids)] if ids and kind in ("again", "end", "move", "remove") else None
            )  # type: ignore[call-overload]
            if kind == "write":
                store.write_now([_exchange(written + n, s) for n, s in enumerate(step[1])])  # type: ignore[arg-type]
                written += len(step[1])  # type: ignore[arg-type]
            elif kind == "again" and pick is not None:
                store.write_now([_exchange(pick, int(step[2]))])  # type: ignore[call-overload]
            elif kind == "late":
                free = raw.execute(
                    "SELECT MIN(seq) + 1 FROM exchanges WHERE seq + 1 NOT IN (SELECT seq FROM exchanges)"
                ).fetchone()[0]
                low = raw.execute(
                    "SELECT MIN(s) FROM (SELECT seq - 1 AS s FROM exchanges WHERE seq > 1 AND seq - 1 NOT IN (SELECT seq FROM exchanges))"
                ).fetchone()[0]
                seq = low if low is not None else free
                raw.execute(
                    "INSERT INTO exchanges(seq, id, tap, started_at, ended_at, doc) VALUES (?, ?, 'caller', ?, ?, '{}')",
                    (seq, f"late{written}", _at(int(step[1])), 1.5e9 + written),  # type: ignore[call-overload]
                )
                written += 1
            elif kind == "end" and pick is not None:
                raw.execute("UPDATE exchanges SET ended_at = ended_at + 0.25 WHERE id = ?", (pick,))
            elif kind == "move" and pick is not None:
                raw.execute(
                    "UPDATE exchanges SET started_at = ?, ended_at = ended_at + 0.5 WHERE id = ?",
                    (_at(int(step[2])), pick),  # type: ignore[call-overload]
                )  # type: ignore[call-overload]
            elif kind == "remove" and pick is not None:
                raw.execute("DELETE FROM exchanges WHERE id = ?", (pick,))
            elif kind == "window":
                lo, hi = _at(int(step[1])), _at(min(59, int(step[1]) + int(step[2])))  # type: ignore[call-overload]
                assert window.rows(store, lo, hi) == store.rows_between(lo, hi)
        lo, hi = _at(0), _at(59)  # and the last, whatever came before
        assert window.rows(store, lo, hi) == store.rows_between(lo, hi)
    finally:
        raw.close()
        store.close()


def _move(store: Store, window: WindowRows, *, seconds: int, each: int, span: int) -> None:
    """``each`` exchanges written a second for ``seconds``, the window of the last ``span`` seconds
    read after each second's: always the store's own window."""
    for second in range(seconds):
        store.write_now([_exchange(second * each + k, second) for k in range(each)])
        lo, hi = _at(max(0, second - span)), _at(second)
        assert window.rows(store, lo, hi) == store.rows_between(lo, hi)


def test_a_window_that_moves_forward_reads_only_what_is_new(tmp_path: Path) -> None:
    """Windows that move a second at a time over a store written between them are read in part
    (the rows of the last one are not made again), and are the store's windows."""
    store = Store(tmp_path / "m.db")
    window = WindowRows()
    try:
        _move(store, window, seconds=50, each=10, span=8)
        assert window.whole == 1 and window.parts == 49
        # written again in place: the next window is read whole, and right
        store.write_now([_exchange(455, 45)])  # (its end: when written, now)
        assert window.rows(store, _at(42), _at(49)) == store.rows_between(_at(42), _at(49))
        assert window.whole == 2
        # a version changed in place, a row removed, one written late with a lower seq, one
        # written again at another time: each seen by the next window
        raw = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
        for change in (
            "UPDATE exchanges SET ended_at = ended_at + 1e-5 WHERE id = 'e452'",
            "DELETE FROM exchanges WHERE id = 'e448'",
            "INSERT INTO exchanges(seq, id, tap, started_at, ended_at, doc) VALUES (449, 'late', 'caller', '"
            + _at(44)
            + "', 1.0, '{}')",
            "UPDATE exchanges SET started_at = '" + _at(47) + "', ended_at = 2.0 WHERE id = 'e441'",
            "UPDATE exchanges SET started_at = '" + _at(30) + "' WHERE id = 'e443'",
        ):
            whole = window.whole
            raw.execute(change)
            assert window.rows(store, _at(42), _at(49)) == store.rows_between(_at(42), _at(49)), change
            assert window.whole == whole + 1
        raw.close()
    finally:
        store.close()


def test_a_store_opened_again_starts_a_window_afresh(tmp_path: Path) -> None:
    first = Store(tmp_path / "o.db")
    first.write_now([_exchange(k, k) for k in range(5)])
    window = WindowRows()
    assert window.rows(first, _at(0), _at(4)) == first.rows_between(_at(0), _at(4))
    first.close()
    second = Store(tmp_path / "o.db")
    try:
        second.write_now([_exchange(9, 2)])
        assert window.rows(second, _at(0), _at(4)) == second.rows_between(_at(0), _at(4))
        assert window.whole == 2
    finally:
        second.close()


_starts = st.sampled_from([_at(s) for s in (0, 1, 2, 5, 9)] + ["", "2026-12-05T10:00:01Z", "\u00e9", "zz"])
_window_rows = st.lists(
    st.tuples(
        st.integers(0, 99),
        st.sampled_from(["e1", "e2"]),
        st.none() | st.floats(),
        _starts,
        st.integers(-(2**31) + 1, 2**31 - 1),
    ),
    max_size=12,
)


@given(_window_rows, _starts, _starts)
def test_the_last_windows_rows_are_kept_by_the_twin_as_by_the_reference(
    rows: list[Row], a: str, b: str
) -> None:
    twin = native("wirecheck.record._window_c")
    if twin is None:  # not built here (the test below says whether it should be)
        return
    pairs = [(r[1], r[2]) for r in rows]
    assert twin.keep(rows, pairs, a, b) == _keep_py(rows, pairs, a, b)


@pytest.mark.parametrize(
    "rows",
    [
        [(1, "e", 1.0, _at(1), 2**31)],  # a checksum out of range
        [(1, "e", 1.0, _at(1), "1")],
        [(1, "e", 1.0, None, 1)],
        [(1, "e", 1.0, _at(1))],
        [[1, "e", 1.0, _at(1), 1]],
    ],
)
def test_a_row_not_as_the_window_made_it_is_refused_alike(rows: list[Any]) -> None:
    twin = native("wirecheck.record._window_c")
    pairs = [("e", 1.0)] * len(rows)
    for keep in [_keep_py] + ([twin.keep] if twin is not None else []):
        with pytest.raises(TypeError):
            keep(rows, pairs, _at(0), _at(9))
    with pytest.raises(TypeError):
        _keep_py(rows, [], _at(0), _at(9))


def test_the_window_twin_is_built_and_in_use_where_it_can_be() -> None:
    assert (native("wirecheck.record._window_c") is None) == PURE_PYTHON


def test_the_window_twin_holds_no_memory_across_calls() -> None:
    twin = native("wirecheck.record._window_c")
    if twin is None:
        assert PURE_PYTHON
        return
    rows = [(k, f"e{k}", 1.5, _at(k % 10), k) for k in range(50)]
    pairs = [(r[1], r[2]) for r in rows]
    bad = [*rows, (99, "x", 1.0, _at(1), "no")]

    def run() -> None:
        for _ in range(5_000):
            twin.keep(rows, pairs, _at(2), _at(7))
            with contextlib.suppress(TypeError):
                twin.keep(bad, [*pairs, ("x", 1.0)], _at(0), _at(9))

    assert grown_by(run) < 64 * 1024


def test_every_window_is_the_store_s_on_either_backend(store_url: str) -> None:
    """PostgreSQL compares text by its collation and hands out seq before a transaction commits:
    there every window is read whole, as ``rows_between`` reads it."""
    store = Store(store_url)
    window = WindowRows()
    try:
        _move(store, window, seconds=12, each=3, span=4)
        assert (window.whole, window.parts) == ((12, 0) if store.pg else (1, 11))
    finally:
        store.close()
