"""A real PostgreSQL server for the shared-store tests: Debian's ``postgresql`` package, a throwaway
cluster in a temporary folder, listening on loopback only."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.servers import process
from wirecheck.record import free_port


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    assert initdb, "PostgreSQL is missing: apt-get install -y postgresql (./dev test does)"
    return Path(initdb).resolve().parent


def _as_owner(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root: run them as the package's postgres user
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """Start a cluster; yields the URL of its ``postgres`` database for the ``wirecheck`` role."""
    bindir = _bindir()
    tmp = Path(tempfile.mkdtemp(prefix="wc-pg-"))
    data = tmp / "data"
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres", "postgres")
    subprocess.run(
        _as_owner(
            [
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-A",
                "trust",
                "-U",
                "wirecheck",
                "--no-sync",
                "-E",
                "UTF8",
            ]
        ),
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    url = f"postgresql://wirecheck@127.0.0.1:{port}/postgres"

    def accepts() -> bool:
        import psycopg

        try:
            psycopg.connect(url, connect_timeout=2).close()
        except psycopg.OperationalError:
            return False
        return True

    argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(tmp)]
    argv += ["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=100"]
    try:
        with process(_as_owner(argv), ready=accepts, logs=tmp / "postgres"):
            yield url
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_database(server_url: str, name: str) -> str:
    """A new, empty database on the server; returns its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name
