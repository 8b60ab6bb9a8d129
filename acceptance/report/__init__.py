"""The acceptance report folder, rendered from one typed :class:`Report`: Markdown, self-contained HTML
with plots, JSON, and the first days' Prometheus alerting rules and Grafana dashboard, whose
thresholds are the rollback triggers. Each phase's facts say what they show (``Facts.blocks``); no
format looks a phase up by its name."""

from ._alerts import alert_rules, grafana_dashboard
from ._document import Report
from ._html import render_html
from ._markdown import render_markdown
from ._write import write_reports

__all__ = ["Report", "alert_rules", "grafana_dashboard", "render_html", "render_markdown", "write_reports"]
