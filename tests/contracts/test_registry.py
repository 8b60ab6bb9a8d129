"""The rule registry reads a rule's catalogue text from its docstring: the first paragraph
is the summary, the rest the why."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support.wire import completion, exchange, req
from wirecheck.contracts import Fault, check_exchanges, hit, rules
from wirecheck.contracts._registry import ALL_ENDPOINTS, CHAT, REGISTRY, Hit, rule


@pytest.fixture
def scratch() -> Iterator[str]:
    """A rule id that the test may register; it leaves the registry as it found it."""
    rule_id = "scratch-rule-for-the-registry-test"
    yield rule_id
    REGISTRY.pop(rule_id, None)


def test_the_docstring_gives_the_summary_and_the_why(scratch: str) -> None:
    @rule(scratch, fault=Fault.MODEL, area="tools")
    def _check(view: Any, ctx: Any) -> Iterator[Hit]:
        """A tool call that breaks
        the contract.

        Why it matters, with
        an issue number (vllm #1).

        A second paragraph."""
        yield from ()

    got = REGISTRY[scratch]
    assert got.summary == "A tool call that breaks the contract."
    assert got.doc == "Why it matters, with an issue number (vllm #1). A second paragraph."
    assert (got.fault, got.area, got.func) == (Fault.MODEL, "tools", _check)


def test_a_rule_with_no_summary_is_refused_with_its_id(scratch: str) -> None:
    with pytest.raises(ValueError, match=f"rule '{scratch}' has no summary"):

        @rule(scratch, fault=Fault.MODEL)
        def _check(view: Any, ctx: Any) -> Iterator[Hit]:
            yield from ()

    assert scratch not in REGISTRY


def test_a_given_summary_keeps_the_docstring_as_the_why(scratch: str) -> None:
    @rule(scratch, fault=Fault.ENGINE, summary="Given here.")
    def _check(view: Any, ctx: Any) -> Iterator[Hit]:
        """Read as the why."""
        yield from ()

    assert (REGISTRY[scratch].summary, REGISTRY[scratch].doc) == ("Given here.", "Read as the why.")


def test_every_rule_has_a_one_sentence_summary_and_a_why() -> None:
    for r in rules():
        assert r.summary and "\n" not in r.summary and r.summary.endswith("."), r.id
        assert r.doc and not r.doc.startswith(r.summary), r.id


def test_without_docstrings_the_catalogue_falls_back_to_the_ids() -> None:
    # python -OO drops every docstring: the rules still load and check, the catalogue shows ids
    listed = subprocess.run(
        [sys.executable, "-OO", "-m", "wirecheck", "rules"], capture_output=True, text=True, check=False
    )
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("tool-call-args-schema "))
    assert line.rstrip().endswith("tool-call-args-schema")
    checked = subprocess.run(
        [sys.executable, "-OO", "-m", "wirecheck", "check", "--example"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 1 and "tool-call-args-invalid-json [model]" in checked.stdout, checked.stderr


def test_every_rule_declares_the_endpoints_it_judges() -> None:
    for r in rules():
        assert r.endpoints, f"{r.id} declares no endpoints: give rule(..., endpoints=...)"
        assert set(r.endpoints) <= set(ALL_ENDPOINTS), r.id


def test_an_unknown_endpoint_is_refused(scratch: str) -> None:
    with pytest.raises(ValueError, match="unknown endpoint"):
        rule(scratch, fault=Fault.MODEL, summary="S.", endpoints=("completions",))
    assert scratch not in REGISTRY


def test_a_rule_stays_silent_on_the_endpoints_it_does_not_judge(scratch: str) -> None:
    """A rule that would fire on anything fires only on the endpoints it declared."""

    @rule(scratch, fault=Fault.ENGINE, summary="Fires everywhere.", doc="Test.", endpoints=(CHAT,))
    def _check(view: Any, ctx: Any) -> Iterator[Hit]:
        yield hit("here")

    chat = exchange(req(), completion())
    resp = aw.api_exchange("/v1/responses", aw.responses_req(), aw.responses_body())
    msg = aw.api_exchange("/v1/messages", aw.messages_req(), aw.messages_body())
    fired = {f.exchange_id for f in check_exchanges([chat, resp, msg]).findings if f.rule == scratch}
    assert fired == {chat.id}


def test_the_rules_listed_follow_every_change_of_the_registry(scratch: str) -> None:
    """``rules()`` keeps its sorted lists between calls: a rule registered or removed shows at once."""
    before = [r.id for r in rules("exchange")]
    assert scratch not in before

    @rule(scratch, fault=Fault.MODEL, summary="Registered late.")
    def _check(view: Any, ctx: Any) -> Iterator[Hit]:
        yield from ()

    assert [r.id for r in rules("exchange")] == sorted([*before, scratch])
    assert scratch in [r.id for r in rules()]
    rules("exchange").clear()  # what a caller does with its list leaves the registry's alone
    REGISTRY.pop(scratch)
    assert [r.id for r in rules("exchange")] == before
