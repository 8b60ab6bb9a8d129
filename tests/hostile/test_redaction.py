"""A canary credential, sent in every way wirecheck supports, reaches no byte of
anything wirecheck writes: the proxy's stores (SQLite and PostgreSQL), exports (JSONL, HAR), reports
(text, JSON, JUnit, HTML), replay's answer store, the accept report folder, and the processes' logs.

The simulator runs with ``--api-key CANARY``: every answer that is a 200 proves the credential was
forwarded (and that replay's ``--header`` took the place of the redacted one), while no file may hold it.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import httpx

from tests.support import wire
from tests.support.cli_batch import wirecheck_batch
from tests.support.servers import dual_tap, port_open, running, stop, wait_up
from wirecheck.contracts import Exchange
from wirecheck.proxy import ProxyApp, TapConfig, serve_listener
from wirecheck.record import Store, free_port, open_store, serve
from wirecheck.sim import SimConfig, create_app

CANARY = f"wcCANARY{uuid.uuid4().hex[:12]}"
REDACTED = "[redacted]"
#: header names and query keys that --redact adds (not on the default list)
EXTRA_HEADER, EXTRA_QUERY = "x-tenant-credential", "tenant_sig"
# Written out here rather than read from the policy, so that dropping a name from the default list
# fails this test (docs/proxy.md lists the same names).
DEFAULT_HEADERS = [
    "anthropic-api-key",
    "api-key",
    "authorization",
    "cf-access-client-secret",
    "cookie",
    "ocp-apim-subscription-key",
    "openai-api-key",
    "proxy-authorization",
    "set-cookie",
    "x-access-token",
    "x-amz-security-token",
    "x-api-key",
    "x-auth-token",
    "x-functions-key",
    "x-goog-api-key",
    "x-litellm-api-key",
    "x-portkey-api-key",
]
DEFAULT_QUERY = [
    "access_token",
    "api-key",
    "api_key",
    "apikey",
    "auth",
    "auth_token",
    "client_secret",
    "code",
    "id_token",
    "key",
    "password",
    "refresh_token",
    "secret",
    "sig",
    "signature",
    "token",
    "x-amz-security-token",
    "x-amz-signature",
    "x-goog-signature",
]


def _canary_headers() -> dict[str, str]:
    headers = {name: f"v-{CANARY}" for name in DEFAULT_HEADERS}
    headers["authorization"] = f"Bearer {CANARY}"  # the simulator checks this one
    headers["cookie"] = f"session={CANARY}; theme=dark"
    headers["x-vendor-api-key"] = CANARY  # caught by its ending, not by name
    headers["x-acme-token"] = CANARY
    headers[EXTRA_HEADER] = CANARY
    return headers


def _canary_query() -> str:
    keys = [*DEFAULT_QUERY, EXTRA_QUERY]
    return "trace=t1&" + "&".join(f"{k}={CANARY}" for k in keys)


def _files_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes hold ``needle`` (in any letter case)."""
    low = needle.lower().encode()
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and low in p.read_bytes().lower()
    )


def test_a_canary_credential_sent_every_way_reaches_no_byte_of_any_artefact(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    sp, gp, cp, ep, gp2, ep2, ap = (free_port() for _ in range(7))
    sim = f"http://127.0.0.1:{sp}"
    db = tmp_path / "proxy.db"
    redact = ["--redact", EXTRA_HEADER, "--redact", EXTRA_QUERY]
    headers, query = _canary_headers(), _canary_query()
    statuses: list[int] = []
    with (
        running("sim", "--port", str(sp), "--time-scale", "0.001", "--api-key", CANARY, logs=logs / "sim"),
        running(
            "sim-gateway", "--upstream", f"http://127.0.0.1:{ep}", "--port", str(gp), logs=logs / "gateway"
        ),
        running(
            "sim-gateway", "--upstream", f"http://127.0.0.1:{ep2}", "--port", str(gp2), logs=logs / "gateway2"
        ),
    ):
        wait_up(f"{sim}/health")
        wait_up(f"http://127.0.0.1:{gp}/health")
        wait_up(f"http://127.0.0.1:{gp2}/health")
        # 1. the dual-tap proxy records what callers send with every credential header and query key
        taps = dual_tap(gp, cp, engine_upstream=sim, engine=ep, store=str(db), admin=ap)
        with running(*taps, *redact, logs=logs / "proxy", ready=port_open(cp, ep, ap)) as proxy:
            with httpx.Client(base_url=f"http://127.0.0.1:{cp}", timeout=20) as client:
                for stream in (False, True):
                    r = client.post(
                        f"/v1/chat/completions?{query}",
                        json=wire.tool_req(stream=stream),
                        headers=headers,
                    )
                    statuses.append(r.status_code)
                r = client.get(f"/v1/models?{query}", headers=headers)
                statuses.append(r.status_code)
            stop(proxy)
        proxy_rc = proxy.returncode
        # 2. every reader and writer of that store
        jobs: dict[str, list[str]] = {
            "export-jsonl": ["export", str(db), "-o", str(tmp_path / "exp.jsonl")],
            "export-har": ["export", str(db), "--format", "har", "-o", str(tmp_path / "exp.har")],
            "export-stdout": ["export", str(db)],
        }
        for fmt in ("text", "json", "junit", "html"):
            jobs[f"check-{fmt}"] = ["check", str(db), "--format", fmt, "-o", str(tmp_path / f"report.{fmt}")]
            jobs[f"check-{fmt}-stdout"] = ["check", str(db), "--format", fmt]
        # 3. replay with the operator's credential, answers stored, and exported in turn
        replay_args = ["replay", str(db), "--target", sim, "--header", f"authorization: Bearer {CANARY}"]
        replay_args += ["--header", f"x-odd-name: {CANARY}", "--store", str(tmp_path / "replay.db")]
        jobs["replay"] = [*replay_args, "--format", "json"]
        jobs["replay-text"] = replay_args[:-2]
        jobs["replay-dry"] = [*replay_args[:-2], "--dry-run"]
        jobs["replay-export"] = ["export", str(tmp_path / "replay.db"), "-o", str(tmp_path / "replay.jsonl")]
        # 4. accept through its own taps, with the credential and an oddly named one as --header
        jobs["accept"] = [
            "accept",
            "--target",
            f"http://127.0.0.1:{gp2}",
            "--engine-url",
            sim,
            "--via-proxy",
            "--engine-listen",
            f"127.0.0.1:{ep2}",
            "--reviewer",
            "ci",
            "--official-image",
            "--phases",
            "interface",
            "--interface-requests",
            "2",
            "--scenario-examples",
            "0",
            "--out",
            str(tmp_path / "accept"),
            "--header",
            f"authorization: Bearer {CANARY}",
            "--header",
            f"x-odd-name: {CANARY}",
            "--quiet",
        ]
        rcs = wirecheck_batch(logs, jobs, timeout=420)
    # the key assertion: not one byte of any file holds the canary
    assert _files_holding(tmp_path, CANARY) == []
    # ... and that is because the credentials were redacted, not because nothing happened
    assert statuses == [200, 200, 200], statuses
    assert proxy_rc == 0 and all(rc in (0, 1) for rc in rcs.values()), (proxy_rc, rcs)
    store = open_store(db)
    try:
        recorded = list(store.exchanges())
    finally:
        store.close()
    # 2 chats and 1 model list, each seen by both taps: 6 sent through, 6 recorded, none lost
    assert len(recorded) == 6, [(e.tap, e.request.path) for e in recorded]
    for ex in recorded:
        assert ex.request.header(EXTRA_HEADER) == REDACTED and ex.request.header("x-goog-api-key") == REDACTED
        assert ex.request.path.endswith(f"?{query}".replace(CANARY, REDACTED)), ex.request.path
    answers = list(open_store(tmp_path / "replay.db").exchanges())
    # the --header credential took the redacted one's place: the simulator (api key = canary) said 200
    assert [a.response.status if a.response else None for a in answers] == [200, 200]
    assert all(a.request.header("authorization") == REDACTED for a in answers)
    assert all(a.request.header("x-odd-name") == REDACTED for a in answers)
    accepted = (tmp_path / "accept" / "interface.jsonl").read_text().splitlines()
    assert accepted and all(json.loads(line)["response"]["status"] == 200 for line in accepted)
    assert open_store(tmp_path / "accept" / "wirecheck.db").count() >= 2 * len(accepted)


def test_the_policy_keeps_every_other_byte_and_extends_by_name() -> None:
    from wirecheck.contracts import DEFAULT_REDACTION, Redaction

    assert sorted(DEFAULT_REDACTION.headers) == DEFAULT_HEADERS
    assert sorted(DEFAULT_REDACTION.query_keys) == DEFAULT_QUERY
    docs = (Path(__file__).parents[2] / "docs" / "proxy.md").read_text()
    credentials = docs.split("## Credentials", 1)[1].split("\n## ", 1)[0]
    undocumented = [n for n in (*DEFAULT_HEADERS, *DEFAULT_QUERY) if f"`{n}`" not in credentials]
    assert undocumented == [], "docs/proxy.md, Credentials, lacks these default names"
    r = Redaction()
    assert r.target("/v1/chat/completions?a=1&Key=s3&b=%20x&api%5Fkey=s4&flag") == (
        "/v1/chat/completions?a=1&Key=[redacted]&b=%20x&api%5Fkey=[redacted]&flag"
    )
    assert r.target("/v1/models") == "/v1/models"
    assert r.url("http://user:pw@127.0.0.1:9/x?token=t&q=1") == "http://127.0.0.1:9/x?token=[redacted]&q=1"
    got = r.header_list([("Set-Cookie", "s"), ("X-Foo-Api-Key", "k"), ("content-type", "json")])
    assert got == [("Set-Cookie", REDACTED), ("X-Foo-Api-Key", REDACTED), ("content-type", "json")]
    wider = r.extended(["x-tenant,tenant_sig", " Other "])
    assert wider.is_secret_header("X-Tenant") and wider.is_secret_query_key("tenant_sig")
    assert wider.is_secret_header("other") and not r.is_secret_header("x-tenant")
    # the original exchange is left alone: only what is written is redacted
    ex = Exchange(id="e1")
    ex.request.headers = [("authorization", "Bearer s")]
    assert r.exchange(ex).request.headers == [("authorization", REDACTED)]
    assert ex.request.headers == [("authorization", "Bearer s")]


def test_the_postgres_store_holds_no_canary(pg_url: str) -> None:
    import psycopg

    from wirecheck.contracts import DEFAULT_REDACTION

    sim = create_app(SimConfig(time_scale=0.001, api_key=CANARY))
    store = Store(pg_url, writer=True)
    try:
        with serve(sim) as sim_url:
            policy = DEFAULT_REDACTION.extended([EXTRA_HEADER, EXTRA_QUERY])
            app = ProxyApp(TapConfig(upstream=sim_url, redact=policy), store)
            with serve_listener(app) as tap:
                r = httpx.post(
                    f"{tap}/v1/chat/completions?{_canary_query()}",
                    json=wire.tool_req(),
                    headers=_canary_headers(),
                    timeout=20,
                )
                assert r.status_code == 200
        # a library caller writing an exchange it never redacted: the store's own writer redacts it
        raw = Exchange(id="lib-1")
        raw.request.path = f"/v1/chat/completions?key={CANARY}"
        raw.request.headers = [("x-goog-api-key", CANARY), ("cookie", f"a={CANARY}")]
        store.write_now([raw])
        deadline = time.monotonic() + 20
        store.flush()
        while store.count() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            store.flush()
    finally:
        store.close()
    with psycopg.connect(pg_url) as conn:
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
            )
        ]
        dump = "\n".join(
            str(row) for t in tables for row in conn.execute(f'SELECT row_to_json(x)::text FROM "{t}" x')
        )
    assert "exchanges" in tables and REDACTED in dump and "trace=t1" in dump
    at = dump.lower().find(CANARY.lower())
    assert at < 0, dump[max(0, at - 300) : at + 100]


def test_header_verdicts_kept_by_a_policy_are_its_own_and_bounded() -> None:
    from wirecheck.contracts import Redaction
    from wirecheck.contracts._redact import _NAMES_KEPT

    r = Redaction()
    # a caller that sends a new header name on every request: the policy keeps at most so many
    # verdicts, and the names past them are still judged
    names = [f"x-custom-{n}" for n in range(_NAMES_KEPT + 50)]
    got = r.header_list([(n, "v") for n in names] + [("X-Late-Api-Key", "k"), (" Authorization ", "b")])
    assert got[: len(names)] == [(n, "v") for n in names]
    assert got[len(names) :] == [("X-Late-Api-Key", REDACTED), (" Authorization ", REDACTED)]
    assert len(r._verdicts) == _NAMES_KEPT
    # a wider policy does not answer from the verdicts of the one it extends, nor they from it
    assert r.header_list([("x-tenant", "t")]) == [("x-tenant", "t")]
    wider = r.extended(["x-tenant"])
    assert wider.header_list([("x-tenant", "t")]) == [("x-tenant", REDACTED)]
    assert r.header_list([("x-tenant", "t")]) == [("x-tenant", "t")]
    # the verdicts are no part of the policy: equal policies stay equal whatever each has seen
    assert r == Redaction() and hash(r) == hash(Redaction()) and "_verdicts" not in repr(r)
