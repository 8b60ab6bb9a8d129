"""The HTML report: self-contained, escapes model output, and renders in headless Chromium."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from tests.support.chromium import count_color, render
from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import CheckConfig, check_exchanges, render_html

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _report() -> str:
    bad = exchange(
        tool_req(),
        completion(
            message(EVIL, tool_calls=[call("rm_rf", '{"path": "' + EVIL.replace('"', "'") + '"}')]),
            "tool_calls",
        ),
        id="ex-<b>1</b>",
    )
    good = exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls"), id="ok")
    res = check_exchanges([bad, good], CheckConfig(direct=True))
    return render_html(res, [bad, good])


def test_every_model_string_is_escaped_and_nothing_external_is_loaded() -> None:
    page = _report()
    assert "<script" not in page and "onerror=alert" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;" in page
    assert "ex-&lt;b&gt;1&lt;/b&gt;" in page
    # nothing is loaded from elsewhere; the only addresses are known-bug links a reader may follow
    assert "<link" not in page and "url(" not in page and not re.search(r"<[a-z]+[^>]*\ssrc=", page)
    addresses = re.findall(r"https?://[^\s\"<]+", page)
    assert all(a.startswith("https://github.com/") for a in addresses), addresses
    assert all(f'href="{a}"' in page for a in set(addresses)), addresses
    assert 'id="findings"' in page and "tool-call-undeclared" in page


def test_the_report_renders_in_headless_chromium_with_the_findings_table_visible() -> None:
    with tempfile.TemporaryDirectory(prefix="wc-html-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(_report())
        dom, img = render(page)
    assert 'id="findings"' in dom and "tool-call-undeclared" in dom
    assert "<script>alert" not in dom  # the browser saw text, not markup
    # the findings table's header row is #1f4e79: it must be on screen, near the top
    header = count_color(img, (0x1F, 0x4E, 0x79))
    assert header > 500, f"findings table header not visible ({header} header pixels)"
