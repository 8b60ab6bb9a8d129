"""What a report shows, said once for both formats: report.md and report.html each render these blocks
their own way, so the two cannot drift apart (a table in one is a table in the other).

A phase's facts give their blocks (``Facts.blocks``); the report places them under the phase's
checks. Every value is text already: the facts decide how a figure is written (``fmt``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BarPlot", "Block", "Code", "LinePlot", "Plot", "Table", "Text", "TimePlot", "fmt"]


def fmt(v: Any, unit: str = "") -> str:
    """A figure as both report formats print it (three decimals below 100, none above)."""
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}{unit}" if abs(v) < 100 else f"{v:.0f}{unit}"
    return f"{v}{unit}"


@dataclass(frozen=True, slots=True)
class Table:
    #: the HTML table's id (pages and tests find a table by it)
    id: str
    head: list[str]
    rows: list[list[str]]
    #: a sentence above the table; with ``heading``, a section of its own
    caption: str = ""
    heading: str = ""


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Code:
    """A block a reader copies (a curl line, a JSON comparison), after its ``caption``."""

    text: str
    caption: str = ""
    heading: str = ""
    #: the language a Markdown fence names (sh, json)
    lang: str = ""


@dataclass(frozen=True, slots=True)
class LinePlot:
    """Series against one x axis (the ramp's concurrency): the HTML report draws it; the figures are
    in a table of both reports too."""

    title: str
    xs: list[float]
    series: list[tuple[str, list[float | None]]]
    ylabel: str
    ymax: float | None = None


@dataclass(frozen=True, slots=True)
class BarPlot:
    title: str
    groups: list[str]
    series: list[tuple[str, list[float]]]


@dataclass(frozen=True, slots=True)
class TimePlot:
    """One line per name over time (each GPU's memory through the capacity steps), with marks where
    each stretch starts and one alarm mark (the OOM)."""

    id: str
    title: str
    curves: dict[str, list[tuple[float, float]]]
    marks: list[tuple[float, str]]
    ylabel: str
    xlabel: str
    alarm: tuple[float, str] | None = None
    #: what the figure says when there is nothing to draw
    empty: str = "no data"
    #: the lines' class (a page finds one kind of curve by it)
    line_class: str = "series"


Plot = LinePlot | BarPlot | TimePlot
Block = Table | Text | Code | Plot
