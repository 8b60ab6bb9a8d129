"""The index of a window's kin by their own keys (``KinIndex``): its compiled twin
(proxy/_kin_c.c) builds what the Python reference builds, for any kin, and refuses alike what is
not kin."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.leaks import grown_by
from wirecheck.contracts._native import PURE_PYTHON, native
from wirecheck.proxy._kin import Kin, _owners_py

_TWIN = "wirecheck.proxy._kin_c"
_hashes = st.lists(st.integers(-3, 3) | st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=7)
_kin = st.builds(
    lambda own: Kin(("e", 1.0), "caller", 1.0, 10, True, tuple(own), ()),
    _hashes,
)


@given(st.lists(_kin, max_size=300))
def test_the_twin_indexes_kin_as_the_reference_does(kin: list[Kin]) -> None:
    twin = native(_TWIN)
    if twin is None:  # not built here (the test below says whether it should be)
        return
    got = twin.owners(kin)
    assert got == _owners_py(kin)
    assert list(got) == list(_owners_py(kin))  # in the order the keys first come


class _Odd:
    def __init__(self, own: Any) -> None:
        self.own = own


@pytest.mark.parametrize(
    "kin", [[_Odd([1, 2])], [_Odd((1, "2"))], [_Odd((1, 2.0))], [object()], [_Odd((True,))]]
)
def test_what_is_not_kin_is_refused_alike(kin: list[Any]) -> None:
    twin = native(_TWIN)
    for owners in [_owners_py] + ([twin.owners] if twin is not None else []):
        with pytest.raises((TypeError, AttributeError)) as raised:
            owners(kin)
        assert raised.type is (AttributeError if type(kin[0]) is object else TypeError)
    if twin is not None:
        with pytest.raises(TypeError):
            twin.owners(tuple(kin))  # type: ignore[arg-type]


def test_the_kin_twin_is_built_and_in_use_where_it_can_be() -> None:
    assert (native(_TWIN) is None) == PURE_PYTHON


def test_the_kin_twin_holds_no_memory_across_calls() -> None:
    twin = native(_TWIN)
    if twin is None:
        assert PURE_PYTHON
        return
    kin = [Kin((f"e{n}", 1.0), "caller", 1.0, 10, True, (n % 7, n, 2**40 + n), ()) for n in range(400)]
    bad = [*kin, _Odd((1, "x"))]

    def run() -> None:
        for _ in range(300):
            twin.owners(kin)
            with pytest.raises(TypeError):
                twin.owners(bad)

    assert grown_by(run) < 64 * 1024
