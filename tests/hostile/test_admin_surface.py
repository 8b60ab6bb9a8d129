"""Findings (excerpts of every caller's prompts and answers) are not served where
callers connect. The admin endpoints answer on their own listener, validate their parameters (400,
never a 500), ask for a token when one is set, and refuse to listen beyond loopback without one; the
forwarding listener forwards /wirecheck/ upstream like any other path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.support.proxy_process import proxy_process, recorded
from tests.support.servers import raw_server, read_request, run_wirecheck

TOKEN = "admin-token-for-the-test"


async def echo_path(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request with the path it asked for, so a forwarded request is plain to see."""
    while True:
        head, _ = await read_request(reader)
        path = head.split(b" ", 2)[1]
        body = b"upstream saw " + path
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()


def test_admin_endpoints_live_on_their_own_listener_and_validate(tmp_path: Path) -> None:
    bad = {
        "limit=abc": "limit must be a whole number",
        "limit=0": "limit must be a whole number",
        "fault=nope": "fault must be one of",
        "bogus=1": "unknown parameter 'bogus'",
        "limit=1&limit=2": "given twice",
    }
    with raw_server(echo_path) as upstream:
        with proxy_process(upstream, tmp_path, "--no-live-checks") as px:
            # callers reach the upstream, never the proxy's findings
            for path in ("/wirecheck/findings", "/wirecheck/health", "/wirecheck/metrics"):
                r = httpx.get(px.url + path, timeout=10)
                assert r.status_code == 200 and r.text == f"upstream saw {path}", r.text[:200]
            assert httpx.get(px.admin + "/wirecheck/health", timeout=10).json()["status"] == "ok"
            assert httpx.get(px.admin + "/wirecheck/findings?limit=5&fault=gateway", timeout=10).json() == []
            assert "wirecheck_exchanges_total" in httpx.get(px.admin + "/wirecheck/metrics", timeout=10).text
            for query, message in bad.items():
                r = httpx.get(f"{px.admin}/wirecheck/findings?{query}", timeout=10)
                assert r.status_code == 400 and message in r.json()["error"]["message"], (query, r.text)
            assert httpx.get(px.admin + "/v1/chat/completions", timeout=10).status_code == 404
            assert httpx.post(px.admin + "/wirecheck/health", timeout=10).status_code == 405
        forwarded = [ex.request.path for ex in recorded(px.store)]
        assert sorted(forwarded) == ["/wirecheck/findings", "/wirecheck/health", "/wirecheck/metrics"]

        # with a token: nothing without it, everything with it
        env = {"WIRECHECK_ADMIN_TOKEN": TOKEN}
        with proxy_process(upstream, tmp_path / "token", "--no-live-checks", env=env) as px:
            assert httpx.get(px.admin + "/wirecheck/findings", timeout=10).status_code == 401
            wrong = {"authorization": "Bearer nope"}
            assert httpx.get(px.admin + "/wirecheck/findings", headers=wrong, timeout=10).status_code == 401
            right = {"authorization": f"Bearer {TOKEN}"}
            assert httpx.get(px.admin + "/wirecheck/findings", headers=right, timeout=10).json() == []

    # beyond loopback only with a token: a clear refusal, exit 2, nothing listens
    out = run_wirecheck("proxy", "--upstream", "http://127.0.0.1:1", "--admin", "0.0.0.0:1", timeout=60)
    assert out.returncode == 2 and "--admin-token" in out.stderr, out.stderr


def _get(url: str, host: str | None = None, **kw: object) -> httpx.Response:
    headers = dict(kw.pop("headers", {}) or {})  # type: ignore[call-overload]
    if host is not None:
        headers["host"] = host
    return httpx.get(url, headers=headers, timeout=10, **kw)  # type: ignore[arg-type]


def test_without_a_token_only_loopback_host_names_are_answered(tmp_path: Path) -> None:
    """DNS rebinding: a page the operator opens points a name of its own at 127.0.0.1 and reads the
    listener as same-origin; its requests carry that name in Host, and get a 403."""
    with (
        raw_server(echo_path) as upstream,
        proxy_process(upstream, tmp_path, "--no-live-checks", "--admin-host", "wirecheck.internal") as px,
    ):
        port = px.admin.rsplit(":", 1)[1]
        for host in (
            "localhost",
            f"localhost:{port}",
            "127.0.0.1",
            f"127.0.0.1:{port}",
            "[::1]",
            f"[::1]:{port}",
            "LOCALHOST",
            "wirecheck.internal",
            f"wirecheck.internal:{port}",
        ):
            r = _get(px.admin + "/wirecheck/health", host)
            assert r.status_code == 200, (host, r.text)
        for host in (
            "evil.example",
            f"evil.example:{port}",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
        ):
            for path in (
                "/wirecheck/health",
                "/wirecheck/findings",
                "/wirecheck/state",
                "/wirecheck/events",
            ):
                r = _get(px.admin + path, host)
                assert r.status_code == 403, (host, path, r.status_code)
                assert "loopback names only" in r.json()["error"]["message"]


def test_a_token_from_a_browser_bearer_in_any_case_or_a_query_exchanged_for_a_cookie(tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(TOKEN + "\n")
    with (
        raw_server(echo_path) as upstream,
        proxy_process(upstream, tmp_path, "--no-live-checks", "--admin-token-file", str(token_file)) as px,
    ):
        for scheme in ("Bearer", "bearer", "BEARER"):
            r = _get(px.admin + "/wirecheck/health", headers={"authorization": f"{scheme} {TOKEN}"})
            assert r.status_code == 200, (scheme, r.text)
        assert (
            _get(px.admin + "/wirecheck/health", headers={"authorization": "Basic " + TOKEN}).status_code
            == 401
        )
        # EventSource sends no header: ?token= once, a cookie in its place, the token gone from the URL
        r = _get(px.admin + f"/wirecheck/?token={TOKEN}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/wirecheck/", r.headers
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert TOKEN not in r.text and TOKEN not in str(r.headers)
        jar = {"cookie": cookie.split(";", 1)[0]}
        with httpx.stream("GET", px.admin + "/wirecheck/events", headers=jar, timeout=10) as events:
            assert events.status_code == 200 and events.headers["content-type"].startswith(
                "text/event-stream"
            )
        assert _get(px.admin + "/wirecheck/state", headers=jar).status_code == 200
        # a wrong token in the query is a 401, and sets nothing
        r = _get(px.admin + "/wirecheck/?token=nope", follow_redirects=False)
        assert r.status_code == 401 and "set-cookie" not in r.headers
        assert (
            _get(px.admin + "/wirecheck/state", headers={"cookie": "wirecheck_admin=nope"}).status_code == 401
        )
    assert TOKEN not in px.stderr
    cmdline = " ".join(str(a) for a in px.proc.args)
    assert TOKEN not in cmdline  # the token came from a file: not in the process list
