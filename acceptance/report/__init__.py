"""The acceptance report folder: Markdown, self-contained HTML with plots, JSON, and the first days'
Prometheus alerting rules and Grafana dashboard."""

from ._render import alert_rules, grafana_dashboard, render_html, render_markdown, write_reports

__all__ = ["alert_rules", "grafana_dashboard", "render_html", "render_markdown", "write_reports"]
