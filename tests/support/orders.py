"""Write orders for the live checker's tests: a capture's exchanges written in any order and checked
in batches cut anywhere, as a checker that claims what has settled meets them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping

from hypothesis import strategies as st

from wirecheck.contracts import Exchange


def written_in_batches(
    captures: Mapping[str, Callable[[], list[Exchange]]],
) -> st.SearchStrategy[tuple[str, list[list[str]]]]:
    """The name of one of ``captures`` and its exchanges' ids in any write order, cut into one to
    four batches."""

    @st.composite
    def drawn(draw: st.DrawFn) -> tuple[str, list[list[str]]]:
        name = draw(st.sampled_from(sorted(captures)))
        order = draw(st.permutations([ex.id for ex in captures[name]()]))
        cuts = sorted(draw(st.sets(st.integers(1, len(order) - 1), max_size=3)))
        bounds = [0, *cuts, len(order)]
        return name, [order[a:b] for a, b in itertools.pairwise(bounds)]

    return drawn()
