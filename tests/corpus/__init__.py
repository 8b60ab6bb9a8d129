"""A corpus of exchanges rebuilt from public bug reports (vLLM, LiteLLM, agent SDKs), with the ground
truth each must be judged by: the measuring stick for attribution (``scripts/score_corpus.py``).

One module per source group; each has ``cases()``. :func:`load_cases` is the whole corpus in a stable
order.
"""

from __future__ import annotations

from importlib import import_module

from .case import Case

__all__ = ["GROUPS", "Case", "load_cases"]

#: the source groups, each a module of this package with ``cases()``
GROUPS = ("chat_parsers", "chat_gateway", "legal_chat", "responses", "messages", "bridges", "more_faults")


def load_cases() -> list[Case]:
    out: list[Case] = []
    for name in GROUPS:
        out.extend(import_module(f"{__name__}.{name}").cases())
    return out
