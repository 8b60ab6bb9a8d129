"""Writing the report folder: report.json, report.md, report.html, alerts.yml and the dashboard."""

from __future__ import annotations

import json
from pathlib import Path

from ._alerts import alert_rules, grafana_dashboard
from ._document import Report
from ._html import render_html
from ._markdown import render_markdown

__all__ = ["write_reports"]


def write_reports(report: Report) -> None:
    """Each format at the path ``report.files`` names for it."""
    files = report.files
    Path(files["json"]).write_text(
        json.dumps(report.to_json(), indent=2, default=str) + "\n", encoding="utf-8"
    )
    Path(files["markdown"]).write_text(render_markdown(report), encoding="utf-8")
    Path(files["html"]).write_text(render_html(report), encoding="utf-8")
    Path(files["alerts"]).write_text(alert_rules(report), encoding="utf-8")
    Path(files["dashboard"]).write_text(
        json.dumps(grafana_dashboard(report), indent=2) + "\n", encoding="utf-8"
    )
