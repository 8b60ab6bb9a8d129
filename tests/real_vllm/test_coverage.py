"""Every family the family table names is either served by the real tier or named with the reason
it cannot be: nothing leaves the tier silently."""

from __future__ import annotations

from tests.real_vllm.families import NOT_SERVED, SERVED
from wirecheck.contracts import FAMILY_NAMES


def test_every_family_is_served_or_named_with_a_reason() -> None:
    assert sorted([*SERVED, *NOT_SERVED]) == sorted(FAMILY_NAMES)
    assert not set(SERVED) & set(NOT_SERVED)
    assert all(len(why) > 40 for why in NOT_SERVED.values())
