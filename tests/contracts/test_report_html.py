"""The HTML report: self-contained, escapes model output, and renders in headless Chromium."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from PIL import Image

from tests.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import CheckConfig, check_exchanges, render_html

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
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
    assert "http://" not in page and "https://" not in page and "<link" not in page
    assert 'id="findings"' in page and "tool-call-undeclared" in page


def test_the_report_renders_in_headless_chromium_with_the_findings_table_visible() -> None:
    assert Path(CHROMIUM).exists(), "chromium is missing: apt-get install -y chromium (./dev test does)"
    with tempfile.TemporaryDirectory(prefix="wc-html-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(_report())
        shot = Path(tmp) / "shot.png"
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp}/profile",
            "--window-size=1200,800",
        ]
        dom = subprocess.run(
            [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert 'id="findings"' in dom.stdout and "tool-call-undeclared" in dom.stdout
        assert "<script>alert" not in dom.stdout  # the browser saw text, not markup
        subprocess.run(
            [CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()],
            capture_output=True,
            timeout=120,
            check=False,
        )
        img = Image.open(shot).convert("RGB")
        w, h = img.size
        # the findings table's header row is #1f4e79: it must be on screen, near the top
        header = sum(
            1
            for x in range(0, w, 2)
            for y in range(0, h // 2, 2)
            if img.getpixel((x, y)) == (0x1F, 0x4E, 0x79)
        )
        assert header > 500, f"findings table header not visible ({header} header pixels)"
