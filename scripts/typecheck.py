"""Run mypy (strict) on the package as it is laid out once installed.

The source folders are mapped into ``wirecheck.*`` by setuptools' package-dir (DESIGN.md), which
mypy cannot follow through an editable install. This lays the installed shape out as symlinks in a
temporary folder and checks that, so the check needs no build.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping: dict[str, str] = cfg["tool"]["setuptools"]["package-dir"]
    with tempfile.TemporaryDirectory(prefix="wirecheck-types-") as tmp:
        top = Path(tmp) / "wirecheck"
        top.mkdir()
        for item in (ROOT / mapping["wirecheck"]).iterdir():
            if item.name != "__pycache__":
                (top / item.name).symlink_to(item)
        for pkg, folder in mapping.items():
            # a subpackage (wirecheck.acceptance.load) lies inside its parent's folder already
            if pkg.count(".") == 1:
                (top / pkg.split(".", 1)[1]).symlink_to(ROOT / folder)
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "wirecheck"]
        return subprocess.call(cmd, cwd=tmp)


if __name__ == "__main__":
    raise SystemExit(main())
