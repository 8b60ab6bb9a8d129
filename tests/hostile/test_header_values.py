"""Operator header values (``--header``: credentials, as a rule) are never printed: the
``reproduce:`` lines of ``scenarios`` read them from shell variables; a value HTTP refuses (a raw CR)
is refused before anything is sent or printed; and a request that a recording client cannot write
as HTTP is the caller's fault, not the engine's transport."""

from __future__ import annotations

import httpx

from tests.support.servers import run_wirecheck, running, wait_up
from wirecheck.contracts import CheckConfig, Exchange, HttpRequest, check_exchanges
from wirecheck.record import free_port, record_sync, serve

SECRET = "Bearer sk-live-d0nt-print-me"


def test_the_reproduce_lines_never_show_a_header_value() -> None:
    port = free_port()
    with running("sim", "--port", str(port), "--time-scale", "0.001", "--faults", "model.invalid_json=1"):
        wait_up(f"http://127.0.0.1:{port}/health")
        run = run_wirecheck(
            *("scenarios", "--target", f"http://127.0.0.1:{port}", "--examples", "5", "--seed", "7"),
            *("--header", f"Authorization: {SECRET}", "--header", "X-Team-Key: k3y-d0nt-print", "--quiet"),
            timeout=300,
        )
    assert run.returncode == 1, run.stdout + run.stderr  # the simulated model breaks a contract
    out = run.stdout + run.stderr
    assert SECRET not in out and "sk-live" not in out and "k3y-d0nt-print" not in out, out
    curl = next(line for line in run.stdout.splitlines() if line.strip().startswith("curl "))
    assert "'Authorization: '\"${WIRECHECK_HEADER_AUTHORIZATION}\"" in curl, curl
    assert "'X-Team-Key: '\"${WIRECHECK_HEADER_X_TEAM_KEY}\"" in curl, curl
    assert "WIRECHECK_HEADER_AUTHORIZATION, WIRECHECK_HEADER_X_TEAM_KEY" in run.stdout  # said what to set
    rerun = next(line for line in run.stdout.splitlines() if "wirecheck scenarios" in line)
    assert "--header 'Authorization: '\"${WIRECHECK_HEADER_AUTHORIZATION}\"" in rerun, rerun


def test_a_header_value_http_refuses_is_refused_before_anything_is_sent() -> None:
    for header in (
        f"Authorization: {SECRET}\r\nX-Injected: 1",
        f"Authorization: a\x7f{SECRET}",
        "Bad Name: v",
    ):
        run = run_wirecheck("scenarios", "--target", "http://127.0.0.1:9", "--header", header, timeout=60)
        assert run.returncode == 2 and "--header" in run.stderr, run.stderr
        assert SECRET not in run.stderr and "\r" not in run.stderr and "Traceback" not in run.stderr


async def _ok(scope: dict[str, object], receive: object, send: object) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]


def test_a_request_the_client_cannot_write_is_the_callers_fault() -> None:
    """h11 refuses to write a header value with a CR: nothing reached the upstream, so the engine's
    transport is not to blame (it was: ``upstream_reset``, fault engine)."""
    with serve(_ok) as url, httpx.Client() as client:
        ex = Exchange(id="x", tap="caller", request=HttpRequest("POST", "/v1/chat/completions", [], b"{}"))
        record_sync(client, ex, url + "/v1/chat/completions", headers={"x-key": "a\rb"})
    assert ex.error is not None and ex.error.kind == "request_invalid", ex.error
    transport = [
        f for f in check_exchanges([ex], CheckConfig(direct=True)).findings if f.rule == "transport-error"
    ]
    assert [str(f.fault) for f in transport] == ["caller"], transport
