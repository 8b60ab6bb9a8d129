"""The compiled twin of the row's chunk columns (record/_rows_c.c) against its Python reference
(``chunk_columns``): the same columns wherever it answers, None (the reference decides) for every
response it leaves, and no crash or leak on hostile input."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import Chunk, native
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.record._rows import chunk_columns

twin = native("wirecheck.record._rows_c")
needs_twin = pytest.mark.skipif(twin is None, reason="the compiled twin is off or not built")


def test_the_twin_is_built_and_in_use() -> None:
    # a silent fall back to Python (no compiler at install, a build that broke) would hide here
    assert PURE_PYTHON or twin is not None


# offsets of every kind: any float, on and next to a microsecond's half, past 2**32 us, before the
# start, NaN and the infinities, -0.0, and the few right at the edges of the twin's path
_edges = [0.0, -0.0, -0.0005, 0.0005, 4294967.2955, 4294967.2965, 4294967.296, 1e-300, -1e-300]
_offsets = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=-1.0, max_value=5e6)
    | st.integers(0, 10**10).map(lambda n: n / 1000.0 + 0.0005)
    | st.tuples(
        st.integers(0, 10**8), st.sampled_from([0.0, 2.0**-16, -(2.0**-16), 2.0**-17, 1e-9, -1e-9])
    ).map(lambda p: (p[0] + 0.5 + p[1]) / 1000.0)
    | st.sampled_from(_edges)
)
_chunks = st.lists(st.builds(Chunk, _offsets, st.binary(max_size=40)), max_size=40)


@needs_twin
@given(_chunks)
def test_the_twin_gives_the_references_columns_or_leaves_them_to_it(chunks: list[Chunk]) -> None:
    assert twin is not None
    got = twin.chunk_columns(chunks)
    try:
        want: Any = chunk_columns(chunks)
    except (ValueError, OverflowError):  # NaN or an infinity: the reference raises, the twin leaves it
        want = None
    if all(math.isfinite(c.t_ms) and 1 <= c.t_ms * 1000.0 + 0.5 <= 2.0**32 - 2 for c in chunks):
        assert got is not None  # one on a half microsecond too: the twin takes the decimal way's step
    if got is None:
        # left only where an offset is out of the twin's range
        assert any(not math.isfinite(c.t_ms) or not 0 <= c.t_ms * 1000.0 + 0.5 < 2.0**32 for c in chunks)
    else:
        assert got == want
        assert [type(v) for v in got[0] + got[1]] == [int] * (2 * len(chunks)) and type(got[2]) is bytes


@needs_twin
def test_chunks_of_another_shape_are_left_to_the_reference_or_raise_as_it_does() -> None:
    assert twin is not None

    class Odd:
        def __init__(self, t_ms: Any, data: Any) -> None:
            self.t_ms, self.data = t_ms, data

    assert twin.chunk_columns([]) == ([], [], b"")
    for chunks in (
        [Odd(1, b"x")],  # an integer offset: the reference multiplies it, the twin leaves it
        [Odd(1.0, bytearray(b"x"))],
        [Odd(1.0, memoryview(b"x"))],
        [Odd("1", b"x")],
        [Odd(1.0, "text")],
    ):
        assert twin.chunk_columns(chunks) is None
    assert twin.chunk_columns((Chunk(1.0, b"x"),)) is None  # type: ignore[arg-type]  # not a list
    for bad in ([object()], [Chunk(1.0, b"x"), None], [Chunk.__new__(Chunk)]):  # (the last: no fields set)
        with pytest.raises(AttributeError):
            chunk_columns(bad)  # type: ignore[arg-type]
        with pytest.raises(AttributeError):
            twin.chunk_columns(bad)  # type: ignore[arg-type]


@needs_twin
def test_a_list_changed_while_it_is_read_is_left_to_the_reference() -> None:
    assert twin is not None
    chunks: list[Any] = []

    class Shrinks:
        data = b"x"

        @property
        def t_ms(self) -> float:
            chunks.clear()  # the list the twin walks loses its items under it
            return 1.0

    chunks += [Shrinks(), Chunk(2.0, b"y"), Chunk(3.0, b"z")]
    assert twin.chunk_columns(chunks) is None


@needs_twin
def test_the_twin_holds_no_memory_after_a_hundred_thousand_calls() -> None:
    assert twin is not None
    chunks = [Chunk(i * 0.77, b"data: %d\n\n" % i * 3) for i in range(20)]
    odd = [Chunk(1.0, bytearray(b"x")), Chunk(2.0, b"y")]
    tracemalloc.start()
    try:
        for _ in range(10_000):  # warm up under tracing: free lists, caches
            twin.chunk_columns(chunks)
            twin.chunk_columns(odd)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000):
            twin.chunk_columns(chunks)
            twin.chunk_columns(odd)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024  # a leak of one object a call would be megabytes
