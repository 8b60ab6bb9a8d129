"""Secrets stay out of what others can read. A PostgreSQL store's password (``user:PW@``, ``:PW@``
or ``?password=PW``) is in no message, health answer or view state; the store, the admin token and
the correlation key can come from a file or the environment, so that none needs the command line,
and the proxy's helper processes get none on theirs (``ps`` shows every local user each argv)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.proctree import spawned, wait_guarded
from tests.support.servers import port_open, run_wirecheck, running, stop
from tests.support.wire import tool_req
from wirecheck.record import Store, free_port, serve
from wirecheck.sim import SimConfig, create_app

PW = "pw-S3CRET-d0nt-show"
TOKEN = "admin-T0KEN-d0nt-show"
KEY = "corr-K3Y-d0nt-show"


def _forms(url: str) -> list[str]:
    """The three ways a URL carries the password, on the server of ``url``."""
    rest = url.removeprefix("postgresql://").split("@", 1)[1]
    return [
        f"postgresql://wirecheck:{PW}@{rest}",
        f"postgresql://:{PW}@{rest}",
        f"postgresql://wirecheck@{rest}?password={PW}",
    ]


@pytest.mark.parametrize("command", ["check", "export", "replay"])
def test_no_cli_error_shows_a_store_password(command: str) -> None:
    closed = f"postgresql://wirecheck@127.0.0.1:{free_port()}/wc"  # nothing listens: the connection fails
    for url in _forms(closed):
        extra = ["--target", "http://127.0.0.1:9", "--dry-run"] if command == "replay" else []
        run = run_wirecheck(command, url, *extra, timeout=60)
        assert run.returncode == 2, (url, run.stderr)
        assert "cannot connect to the PostgreSQL store" in run.stderr, run.stderr
        assert PW not in run.stderr + run.stdout and "Traceback" not in run.stderr, run.stderr


def test_an_empty_store_named_by_url_is_reported_without_its_password(pg_url: str) -> None:
    Store(pg_url).close()  # the schema, no exchanges
    for url in _forms(pg_url)[::2]:  # the forms with a user name (the cluster has no role "root")
        run = run_wirecheck("check", url, timeout=60)
        assert run.returncode == 2 and "an empty capture is not a pass" in run.stderr, run.stderr
        assert PW not in run.stderr, run.stderr


def test_secrets_from_files_and_the_environment_reach_no_argv_health_or_view(
    pg_url: str, tmp_path: Path
) -> None:
    token_file, store_file = tmp_path / "token", tmp_path / "store"
    token_file.write_text(TOKEN + "\n")
    url = f"{pg_url}?password={PW}"
    store_file.write_text(url + "\n")
    port, admin = free_port(), free_port()
    sim = create_app(SimConfig(time_scale=0.001))
    with serve(sim) as up:
        argv = ["proxy", "--upstream", up, "--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{admin}"]
        argv += ["--store-file", str(store_file), "--admin-token-file", str(token_file), "--workers", "2"]
        env = {"WIRECHECK_CORRELATION_SECRET": KEY}
        with running(*argv, env=env, ready=port_open(port, admin)) as proc:
            try:
                auth = {"authorization": f"Bearer {TOKEN}"}
                r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=tool_req(), timeout=30)
                assert r.status_code == 200
                health = httpx.get(f"http://127.0.0.1:{admin}/wirecheck/health", headers=auth, timeout=10)
                assert health.status_code == 200 and "[redacted]" in health.json()["store"]["path"]
                state = httpx.get(f"http://127.0.0.1:{admin}/wirecheck/state", headers=auth, timeout=10)
                assert state.status_code == 200
                for text in (health.text, state.text):
                    assert PW not in text and TOKEN not in text and KEY not in text
                # the proxy and every helper it spawned: the two workers and the live checker (with
                # --workers the supervisor serves the view itself; the view process, spawned alike,
                # is held to the same in test_viewers.py)
                deadline = time.monotonic() + 30
                while len(helpers := spawned(proc.pid)) < 3 and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert len(helpers) == 3, helpers
                wait_guarded(helpers)
                for pid in [proc.pid, *helpers]:
                    argv_seen = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                    for secret in (PW, TOKEN, KEY):
                        assert secret not in argv_seen, (pid, argv_seen)
            finally:
                _out, err = stop(proc, timeout=60)
    assert proc.returncode == 0, err
    assert PW not in err and TOKEN not in err and KEY not in err, err


def test_check_and_export_read_the_store_from_the_environment_or_a_file(pg_url: str, tmp_path: Path) -> None:
    """No FILE: the store comes from WIRECHECK_STORE or --store-file, so that its password need not
    stand on the command line; it is in no message either way."""
    Store(pg_url).close()  # the schema, no exchanges
    url = f"{pg_url}?password={PW}"
    env = {**os.environ, "WIRECHECK_STORE": url}
    for args in (["check"], ["export"]):
        run = subprocess.run(
            [sys.executable, "-m", "wirecheck", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if args == ["check"]:
            assert run.returncode == 2 and "an empty capture is not a pass" in run.stderr, run.stderr
        else:
            assert run.returncode == 0 and "0 exchange(s)" in run.stderr, run.stderr
        assert PW not in run.stderr + run.stdout
    store_file = tmp_path / "store"
    store_file.write_text(url + "\n")
    run = run_wirecheck("check", "--store-file", str(store_file), timeout=120)
    assert run.returncode == 2 and "an empty capture is not a pass" in run.stderr and PW not in run.stderr
