"""A capture's paths cannot send replay (and the operator's ``--header`` credentials)
to any host but the one named by ``--target``. A path that is not origin-form is bad input: exit 2,
a message naming the file, line and exchange, and not one request sent, not even the good ones."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support import wire
from wirecheck.contracts import Exchange, InputError, write_exchanges
from wirecheck.record import serve

SECRET = "Bearer op-secret-9f2c"
REPLAY = [sys.executable, "-m", "wirecheck", "replay"]


@contextmanager
def counting_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server that notes every request it gets (path and authorization)."""
    seen: list[str] = []

    async def any_path(request: Request) -> JSONResponse:
        query = f"?{request.url.query}" if request.url.query else ""
        seen.append(f"{request.method} {request.url.path}{query} {request.headers.get('authorization')}")
        return JSONResponse(wire.completion())

    app = Starlette(routes=[Route("/{p:path}", any_path, methods=["GET", "POST"])])
    with serve(app) as url:
        yield url, seen


def _capture(path: Path, paths: list[str]) -> None:
    exchanges = []
    for i, p in enumerate(paths):
        ex = Exchange(id=f"cap-{i}")
        ex.request.path = p
        ex.request.body = b'{"messages": [{"role": "user", "content": "hi"}]}'
        exchanges.append(ex)
    with path.open("w", encoding="utf-8") as fh:
        write_exchanges(exchanges, fh)


HOSTILE = [
    "@{decoy}/v1/chat/completions",  # target + path would read as userinfo@decoy
    "//{decoy}/v1/chat/completions",  # a network-path reference
    "http://{decoy}/v1/chat/completions",  # absolute form
    "/v1/x HTTP/1.1\r\nHost: {decoy}\r\n\r\nPOST /v1/chat/completions",  # request smuggling
    "/v1/../../chat/completions",  # climbs out of the target's path
]


@pytest.mark.parametrize("bad", HOSTILE)
def test_a_hostile_capture_path_is_exit_2_and_nothing_is_sent(tmp_path: Path, bad: str) -> None:
    with counting_server() as (target, at_target), counting_server() as (decoy_url, at_decoy):
        decoy = decoy_url.removeprefix("http://")
        cap = tmp_path / "cap.jsonl"
        # a good request first: validation covers the whole source before anything is sent
        _capture(cap, ["/v1/chat/completions", bad.format(decoy=decoy)])
        done = subprocess.run(
            [*REPLAY, str(cap), "--target", target, "--header", f"authorization: {SECRET}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert (at_decoy, at_target) == ([], []), "a request left although the capture was refused"
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    # names the file and line (2: the second exchange) and the exchange
    assert f"{cap}:2: exchange cap-1: request path" in done.stderr, done.stderr
    assert "nothing was sent" in done.stderr


def test_good_paths_reach_the_target_only_with_their_query(tmp_path: Path) -> None:
    with counting_server() as (target, at_target), counting_server() as (_decoy, at_decoy):
        cap = tmp_path / "cap.jsonl"
        _capture(cap, ["/v1/chat/completions?trace=1&api_key=[redacted]", "/v1/chat/completions/"])
        done = subprocess.run(
            [*REPLAY, str(cap), "--target", target + "/", "--header", f"authorization: {SECRET}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode in (0, 1), done.stderr
    assert sorted(at_target) == [
        f"POST /v1/chat/completions/ {SECRET}",
        # the redacted query credential is dropped, like a redacted header; the rest is kept
        f"POST /v1/chat/completions?trace=1 {SECRET}",
    ]
    assert at_decoy == []


def test_the_url_keeps_the_targets_scheme_host_and_port() -> None:
    from wirecheck.replay import origin_form_problem, target_url

    base = "http://127.0.0.1:8000/base/"
    assert (
        str(target_url(base, "/v1/chat/completions?a=1"))
        == "http://127.0.0.1:8000/base/v1/chat/completions?a=1"
    )
    # what joining would have done: httpx's URL.join follows a network-path reference elsewhere
    assert httpx.URL(base).join("//evil:81/x").host == "evil"
    for bad in ("@evil:81/x", "//evil:81/x", "http://evil/x", "/a\\b", "/a b", "/é", "/x#frag", "/./x", ""):
        assert origin_form_problem(bad) is not None, bad
        with pytest.raises(InputError):
            target_url(base, bad)
    for good in ("/", "/v1/chat/completions", "/v1/x?a=b&c=%2F%2F&u=@h", "/v1/@h:1/x"):
        assert origin_form_problem(good) is None, good
        assert (target_url(base, good).host, target_url(base, good).port) == ("127.0.0.1", 8000)
