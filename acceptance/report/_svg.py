"""The HTML report's plots as inline SVG, drawn from the plot blocks the facts give: lines against
one axis, grouped bars, and one line per name against time with an alarm mark."""

from __future__ import annotations

import html

from .._blocks import BarPlot, LinePlot, Plot, TimePlot

__all__ = ["svg"]

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def _line_chart(p: LinePlot) -> str:
    title, xs, series, ylabel, ymax = p.title, p.xs, p.series, p.ylabel, p.ymax
    w, h, pad = 460, 240, 44
    vals = [v for _, ys in series for v in ys if v is not None]
    if not xs or not vals:
        return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption><p>no data</p></figure>'
    top = ymax * 1.3 if ymax is not None else max(vals) * 1.45 or 1.0  # headroom for the legend
    xlo, xhi = min(xs), max(xs)
    span = (xhi - xlo) or 1.0

    def px(x: float) -> float:
        return pad + (x - xlo) / span * (w - 2 * pad)

    def py(y: float) -> float:
        return h - pad - (y / top) * (h - 2 * pad)

    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>',
        f'<text x="{pad}" y="{pad - 8}" font-size="11">{html.escape(ylabel)} (highest {max(vals):.3g})</text>',
    ]
    for x in xs:
        parts.append(
            f'<text x="{px(x):.1f}" y="{h - pad + 16}" font-size="11" text-anchor="middle">{x:g}</text>'
        )
    for k, (name, ys) in enumerate(series):
        color = COLORS[k % len(COLORS)]
        pts = [(px(x), py(y)) for x, y in zip(xs, ys, strict=False) if y is not None]
        if pts:
            parts.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}"/>'
            )
            parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{color}"/>' for a, b in pts]
        parts.append(
            f'<text x="{w - pad - 110}" y="{pad + 14 * k}" font-size="11" fill="{color}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{"".join(parts)}</figure>'


def _bar_chart(p: BarPlot) -> str:
    title, groups, series = p.title, p.groups, p.series
    w, h, pad = 460, 240, 44
    top = max([v for _, vs in series for v in vs] + [1.0]) * 1.45  # headroom for the legend
    gw = (w - 2 * pad) / max(len(groups), 1)
    bw = gw / (len(series) + 1)
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{html.escape(title)}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#888"/>',
    ]
    for g, name in enumerate(groups):
        parts.append(
            f'<text x="{pad + g * gw + gw / 2:.1f}" y="{h - pad + 16}" font-size="11" text-anchor="middle">{html.escape(name)}</text>'
        )
        for k, (_, vs) in enumerate(series):
            v = vs[g]
            bh = v / top * (h - 2 * pad)
            parts.append(
                f'<rect x="{pad + g * gw + (k + 0.5) * bw:.1f}" y="{h - pad - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="{COLORS[k % len(COLORS)]}"><title>{v:g}</title></rect>'
            )
    for k, (sname, _) in enumerate(series):
        parts.append(
            f'<text x="{w - pad - 110}" y="{pad + 14 * k}" font-size="11" fill="{COLORS[k % len(COLORS)]}">{html.escape(sname)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{"".join(parts)}</figure>'


def _time_plot(p: TimePlot) -> str:
    """One line per name against time (each GPU's memory through the steps), the alarm marked."""
    curves, marks, title = p.curves, p.marks, html.escape(p.title)
    if not curves:
        return f'<figure class="plot" id="{p.id}"><figcaption>{title}</figcaption><p>{html.escape(p.empty)}</p></figure>'
    w, h, pad, legend = 680, 280, 54, 90
    pts = [pt for c in curves.values() for pt in c]
    xmax = max(t for t, _ in pts) or 1.0
    top = max(v for _, v in pts) * 1.15 or 1.0

    def px(t: float) -> float:
        return pad + t / xmax * (w - 2 * pad - legend)

    def py(v: float) -> float:
        return h - pad - v / top * (h - 2 * pad)

    e = html.escape
    parts = [
        f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{title}">',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad - legend}" y2="{h - pad}" stroke="#888"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#888"/>',
        f'<text x="{pad}" y="{pad - 10}" font-size="11">{e(p.ylabel)} (highest {max(v for _, v in pts):.0f})</text>',
        f'<text x="{w / 2}" y="{h - 8}" font-size="11" text-anchor="middle">{e(p.xlabel)}</text>',
        f'<text x="{pad - 4}" y="{py(0):.1f}" font-size="10" text-anchor="end">0</text>',
        f'<text x="{pad - 4}" y="{py(top / 1.15):.1f}" font-size="10" text-anchor="end">{top / 1.15:.0f}</text>',
    ]
    for t, label in marks:
        parts.append(
            f'<line x1="{px(t):.1f}" y1="{pad}" x2="{px(t):.1f}" y2="{h - pad}" stroke="#ddd"/>'
            f'<text x="{px(t) + 2:.1f}" y="{h - pad + 14}" font-size="9">{e(label)}</text>'
        )
    if p.alarm is not None:
        at, what = p.alarm
        # the class names what the alarm is: the page's style and its readers find the OOM by it
        parts.append(
            f'<line class="{e(what.lower())}" x1="{px(at):.1f}" y1="{pad}" x2="{px(at):.1f}" y2="{h - pad}" stroke="#c00" stroke-width="2"/>'
            f'<text x="{px(at) + 3:.1f}" y="{pad + 12}" font-size="11" fill="#c00">{e(what)}</text>'
        )
    for k, (name, c) in enumerate(sorted(curves.items())):
        color = _MANY[k % len(_MANY)]
        line = " ".join(f"{px(t):.1f},{py(v):.1f}" for t, v in c)
        parts.append(
            f'<polyline class="{e(p.line_class)}" fill="none" stroke="{color}" stroke-width="1.5" points="{line}"><title>{e(name)}</title></polyline>'
        )
        parts.append(
            f'<text x="{w - pad - legend + 6}" y="{pad + 11 * k}" font-size="9" fill="{color}">{e(name)}</text>'
        )
    parts.append("</svg>")
    return f'<figure class="plot" id="{p.id}"><figcaption>{title}</figcaption>{"".join(parts)}</figure>'


_MANY = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def svg(p: Plot) -> str:
    """The plot as a ``<figure>`` with its SVG."""
    if isinstance(p, LinePlot):
        return _line_chart(p)
    if isinstance(p, BarPlot):
        return _bar_chart(p)
    return _time_plot(p)
