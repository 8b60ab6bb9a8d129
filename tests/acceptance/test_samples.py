"""``accept --samples FILE``: the capacity phase's long-input and ramp stages send the team's
own chat requests, read from JSONL bodies or a capture, and every report format says where the load
came from and how large it was."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from tests.acceptance.runs import DEAD, FAST, ROOT, accept_argv, checks, run_accept, small_plan
from tests.support.servers import run_wirecheck
from wirecheck.acceptance import AcceptanceResult, CapacityPlan, Limits
from wirecheck.acceptance.load import (
    Sample,
    capacity_body,
    load_workload,
    measure,
    spec,
    workload_data,
    workload_line,
)
from wirecheck.contracts import Exchange, HttpRequest, HttpResponse, InputError, write_exchanges
from wirecheck.generators import agent_sample_set
from wirecheck.proxy import write_har
from wirecheck.record import Store, serve
from wirecheck.sim import SimConfig, create_app

#: the team's requests: agent conversations of very different lengths, the longest far beyond the
#: synthetic ramp's prompts, each with its own tools and a model name the target does not serve
TURNS = (1, 2, 3, 5, 8, 30, 60)


def team_bodies() -> list[dict[str, Any]]:
    out = []
    for i, turns in enumerate(TURNS):
        s = agent_sample_set(turns=turns, tools=2 + i)
        out.append(
            {
                "model": "team-alias-for-k3",
                "messages": s["messages"],
                "tools": s["tools"],
                "max_completion_tokens": 4000,
                "temperature": 0.3,
            }
        )
    return out


def write_bodies(path: Path, bodies: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies), encoding="utf-8")
    return path


def plan() -> CapacityPlan:
    return small_plan(long_input_turns=[12, 48], soak_requests=4)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> tuple[AcceptanceResult, Path]:
    tmp = tmp_path_factory.mktemp("samples")
    samples = write_bodies(tmp / "team.jsonl", team_bodies())
    res = run_accept(
        tmp,
        SimConfig(**FAST),  # type: ignore[arg-type]
        phases=("capacity",),
        plan=plan(),
        samples=str(samples),
        limits=Limits(owner="ci"),
    )
    return res, samples


def direct(body: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The team's body as a test sends it straight to the simulator: no model alias, a short answer."""
    out = {k: v for k, v in body.items() if k not in ("model", "max_completion_tokens")}
    return {**out, "max_tokens": 8, **kw}


def prompt_tokens(url: str, body: dict[str, Any]) -> int:
    r = httpx.post(url + "/v1/chat/completions", json=direct(body, stream=False), timeout=30)
    r.raise_for_status()
    return int(r.json()["usage"]["prompt_tokens"])


def test_the_ramp_and_long_input_send_the_teams_requests_and_the_report_says_so(
    team: tuple[AcceptanceResult, Path],
) -> None:
    res, samples = team
    cap = res.phases[0]
    # the catalogue's title is the check's one title: the detail says whose requests were sent
    assert (
        checks(res)["capacity.long-input"].status == "pass"
        and "--samples" in checks(res)["capacity.long-input"].detail
    )
    # long input: the team's two longest requests, shortest first, as many as the profile's lengths
    rows = cap.data["long_input"]
    assert [r["sample"] for r in rows] == [6, 7] and rows[0]["chars"] < rows[1]["chars"]
    # their messages and tools reached the engine unchanged: the engine counts the very prompt a
    # direct request with the team's body gets (the model name aside, which the target sets)
    with serve(create_app(SimConfig(**FAST))) as url:  # type: ignore[arg-type]
        tokens = [prompt_tokens(url, b) for b in team_bodies()]
    assert [r["prompt_tokens"] for r in rows] == tokens[5:]
    w = cap.data["workload"]
    assert (w["source"], w["format"], w["requests"]) == (str(samples), "chat-jsonl", len(TURNS))
    # the ramp cycled through the file: 2 + 4 + 4 requests over 7 bodies, after the two long ones
    ramp_sent = sum(r["requests"] for r in cap.data["ramp"])
    assert w["sent"] == ramp_sent + 2 and w["distinct_sent"] == len(TURNS) and w["cycled"] is True
    size = w["input_size"]
    assert (size["unit"], size["from"]) == ("prompt tokens", "engine usage")
    assert size["n"] == ramp_sent + 2 and size["max"] == max(tokens)
    assert min(tokens) <= size["p50"] <= size["p95"] and size["p95"] > 2 * min(tokens)
    # every long-input and ramp request was one of the team's (samples.jsonl keeps the run's order:
    # the load stage's first request, then long input and the ramp, then the soak)
    lines = [json.loads(x) for x in Path(res.files["samples"]).read_text().splitlines()]
    assert {x["prompt_tokens"] for x in lines[1 : 3 + ramp_sent]} <= set(tokens)
    # the same in report.json, report.md and report.html
    report = json.loads(Path(res.files["json"]).read_text())
    assert report["evidence"]["workload"] == w
    schema = json.loads((ROOT / "docs" / "acceptance-report.schema.json").read_text())
    errors = list(Draft202012Validator(schema).iter_errors(report))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    line = f"--samples {samples} (chat-jsonl): {len(TURNS)} chat requests"
    for fmt in ("markdown", "html"):
        text = Path(res.files[fmt]).read_text()
        assert line in text and f"/{size['max']} prompt tokens (engine usage" in text, fmt


def test_the_spec_carries_the_team_body_and_the_phase_sets_only_what_it_needs() -> None:
    body = team_bodies()[2]
    sp = spec("sample", 5, model="served-model", max_tokens=64, body=body)
    # a spec travels as JSON to Locust workers: the body goes with it
    sent = capacity_body(json.loads(json.dumps(sp)))
    assert sent["messages"] == body["messages"] and sent["tools"] == body["tools"]
    assert sent["temperature"] == 0.3 and "max_completion_tokens" not in sent
    assert (sent["stream"], sent["stream_options"], sent["max_tokens"], sent["model"]) == (
        True,
        {"include_usage": True},
        64,
        "served-model",
    )


def _capture(tmp: Path) -> list[Exchange]:
    """Exchanges as a capture holds them: the team's requests with the engine's answers (usage
    included), and a request that is not a chat completion."""

    async def run(url: str) -> list[Exchange]:
        async with httpx.AsyncClient() as client:
            got = []
            for i, b in enumerate(team_bodies()[:3]):
                s = await measure(
                    client,
                    url + "/v1/chat/completions",
                    # streamed with usage, not streamed, streamed without usage (none captured)
                    direct(
                        b, stream=i != 1, **({"stream_options": {"include_usage": True}} if i == 0 else {})
                    ),
                    keep=True,
                    exchange_id=f"cap-{i}",
                )
                assert s.exchange is not None
                got.append(s.exchange)
            return got

    with serve(create_app(SimConfig(**FAST))) as url:  # type: ignore[arg-type]
        exchanges = asyncio.run(run(url))
    models = Exchange(
        id="cap-models",
        tap="caller",
        request=HttpRequest("GET", "/v1/models", [], b""),
        response=HttpResponse(200, [("content-type", "application/json")], b'{"data": []}'),
    )
    return [*exchanges, models]


def test_captures_are_read_with_replays_loaders_and_keep_the_captured_usage(tmp_path: Path) -> None:
    exchanges = _capture(tmp_path)
    jsonl, har = tmp_path / "capture.jsonl", tmp_path / "capture.har"
    with jsonl.open("w") as fh:
        write_exchanges(exchanges, fh)
    with har.open("w") as fh:
        write_har(exchanges, fh)
    for path, fmt in ((jsonl, "jsonl"), (har, "har")):
        w = load_workload(str(path), "http://127.0.0.1:1")
        assert w.format == fmt and len(w.bodies) == 3, fmt
        assert [b["messages"] for b in w.bodies] == [b["messages"] for b in team_bodies()[:3]]
        t0, t1, t2 = w.captured_tokens
        assert isinstance(t0, int) and isinstance(t1, int) and 0 < t0 < t1 and t2 is None, w.captured_tokens
        assert w.skipped == {"not a chat request (or the engine side of a caller's request)": 1}
        d = w.describe()
        assert d["captured_prompt_tokens"] == {
            "n": 2,
            "p50": round((t0 + t1) / 2),
            "p95": d["captured_prompt_tokens"]["p95"],
            "max": t1,
        }
        # the long-input stage picks by captured tokens where there are some, then by characters
        assert w.longest(1) == [1]
        assert d["sha256"] and len(d["sha256"]) == 64


def test_a_dual_tap_store_gives_each_request_once_from_the_callers_side(tmp_path: Path) -> None:
    caller = [
        dataclasses.replace(ex, tap="caller", correlation=f"c-{i}") for i, ex in enumerate(_capture(tmp_path))
    ]
    engine = [dataclasses.replace(ex, id=ex.id + "-e", tap="engine") for ex in caller[:3]]
    store = Store(tmp_path / "wc.db", writer=True)
    store.write_now([*caller, *engine])
    store.close()
    w = load_workload(str(tmp_path / "wc.db"), "http://127.0.0.1:1")
    assert w.format == "store" and len(w.bodies) == 3 and w.sha256
    assert [b["messages"] for b in w.bodies] == [b["messages"] for b in team_bodies()[:3]]
    # the engine tap's copies and the model list are left out, and counted
    assert w.skipped == {"not a chat request (or the engine side of a caller's request)": 4}


def _bad_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    tmp.mkdir(parents=True, exist_ok=True)
    empty = tmp / "empty.jsonl"
    empty.write_text("\n  \n")
    notjson = tmp / "notjson.jsonl"
    notjson.write_text(json.dumps(team_bodies()[0]) + "\n{not json\n")
    nomsgs = tmp / "nomsgs.jsonl"
    nomsgs.write_text(json.dumps(team_bodies()[0]) + "\n" + json.dumps({"prompt": "hi"}) + "\n")
    neither = tmp / "neither.jsonl"
    neither.write_text(json.dumps({"prompt": "hi"}) + "\n")
    only_models = tmp / "models.har"
    with only_models.open("w") as fh:
        write_har(
            [
                Exchange(
                    id="m",
                    tap="caller",
                    request=HttpRequest("GET", "/v1/models", [], b""),
                    response=HttpResponse(200, [], b"{}"),
                )
            ],
            fh,
        )
    binary = tmp / "blob.jsonl"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    return {
        "empty": (empty, "empty: expected chat requests"),
        "not json": (notjson, "notjson.jsonl:2: not JSON"),
        "no messages": (nomsgs, "nomsgs.jsonl:2: not a chat-completion request body: no messages list"),
        "neither": (neither, "neither a chat-completion request body"),
        "no chat requests": (
            only_models,
            "models.har: no chat-completion requests to send (1 not a chat request",
        ),
        "binary": (binary, "not UTF-8 text"),
        "missing": (tmp / "nope.jsonl", "nope.jsonl: no such file"),
    }


@pytest.mark.parametrize(
    "case", ["empty", "not json", "no messages", "neither", "no chat requests", "binary", "missing"]
)
def test_a_bad_samples_file_is_a_clear_input_error(tmp_path: Path, case: str) -> None:
    path, message = _bad_files(tmp_path)[case]
    with pytest.raises(InputError) as info:
        load_workload(str(path), "http://127.0.0.1:1")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_cli_refuses_a_bad_samples_file_with_exit_2_before_sending_anything(tmp_path: Path) -> None:
    bad = _bad_files(tmp_path / "bad")
    # one case through the CLI (a subprocess costs seconds); the others are the loader's, above
    for case in ("no chat requests",):
        path, message = bad[case]
        # the target does not answer: the samples error comes first, so nothing was sent anywhere
        proc = run_wirecheck(
            *accept_argv(DEAD, tmp_path / case.replace(" ", "-"), "--samples", str(path)), timeout=60
        )
        assert proc.returncode == 2, (case, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("wirecheck: error: ") and message in lines[0], lines
        assert "does not answer" not in proc.stderr


def test_without_usage_in_the_answers_the_input_size_is_in_characters(tmp_path: Path) -> None:
    w = load_workload(str(write_bodies(tmp_path / "team.jsonl", team_bodies())), "http://127.0.0.1:1")
    # three requests sent (the first twice), and no answer reported usage (e.g. all failed)
    stage = [Sample(ok=False, status=503, e2e_s=0.1) for _ in range(3)]
    data = workload_data(w, stage, [0, 1, 0])
    assert data["input_size"] == {
        "unit": "characters",
        "from": "the requests (no answer reported usage)",
        "n": 3,
        "p50": w.chars[0],
        "p95": data["input_size"]["p95"],
        "max": w.chars[1],
    }
    assert (data["sent"], data["distinct_sent"], data["cycled"]) == (3, 2, True)
    line = workload_line(data)
    assert f"/{w.chars[1]} characters (the requests" in line and "cycled" in line
