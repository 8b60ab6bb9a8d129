"""Headless Chromium (Debian's package) for the HTML report tests: the DOM as the browser built it,
and a screenshot to read pixels from."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from PIL import Image

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _flags(profile: str, size: str) -> list[str]:
    assert Path(CHROMIUM).exists(), "chromium is missing: apt-get install -y chromium (./dev test does)"
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={size}",
    ]


def render(page: Path, size: str = "1200,800") -> tuple[str, Image.Image]:
    """Open ``page`` offline; returns the DOM after parsing and a screenshot of the window."""
    with tempfile.TemporaryDirectory(prefix="wc-chromium-") as tmp:
        flags = _flags(f"{tmp}/profile", size)
        dom = subprocess.run(
            [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
        shot = Path(tmp) / "shot.png"
        subprocess.run(
            [CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()],
            capture_output=True,
            timeout=120,
            check=False,
        )
        img = Image.open(shot).convert("RGB")
        img.load()
    return dom, img


def count_color(img: Image.Image, rgb: tuple[int, int, int], *, top_fraction: float = 0.5) -> int:
    """Pixels of exactly ``rgb`` in the top part of the image (every second row and column)."""
    w, h = img.size
    return sum(
        1 for x in range(0, w, 2) for y in range(0, int(h * top_fraction), 2) if img.getpixel((x, y)) == rgb
    )
