"""A call's arguments are read once a view: the rules that judge them (their JSON, their bounds,
their shape, the tool's schema, a cut) share one reading, and find what each found reading them
itself."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import CheckConfig, _rules_message, build_view, check_exchanges
from wirecheck.contracts._json import MAX_DEPTH


def _checked(args: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The rules that fired on a call with these arguments, and the texts bounded loads read for
    the rules' reading of a call's arguments."""
    read: list[str] = []
    loads = _rules_message.bounded_loads

    def counted(text: Any, *a: Any, **k: Any) -> Any:
        read.append(text)
        return loads(text, *a, **k)

    monkeypatch.setattr(_rules_message, "bounded_loads", counted)
    ex = exchange(tool_req(), completion(message(None, tool_calls=[call(args=args)]), "tool_calls"))
    found = [f.rule for f in check_exchanges([ex], CheckConfig(direct=True)).findings]
    return found, [t for t in read if t == args]


@pytest.mark.parametrize(
    ("args", "rules"),
    [
        ('{"city": "Paris"}', []),
        ('{"city": 3}', ["tool-call-args-schema"]),
        ('"{\\"city\\": \\"Paris\\"}"', ["tool-call-args-not-object"]),
        ('{"city": "Par', ["tool-call-args-invalid-json"]),
        ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), ["json-limit"]),
    ],
)
def test_the_arguments_are_read_once_and_judged_as_before(
    args: str, rules: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    found, read = _checked(args, monkeypatch)
    assert found == rules
    assert len(read) == 1


def test_arguments_written_again_are_read_again() -> None:
    ex = exchange(
        tool_req(), completion(message(None, tool_calls=[call(args='{"city": "Paris"}')]), "tool_calls")
    )
    view = build_view(ex)
    (c,) = view.choices[0].calls
    assert _rules_message.read_arguments(view, c) == ({"city": "Paris"}, None)
    c.arguments = '{"city": '
    value, err = _rules_message.read_arguments(view, c)
    assert value is None and isinstance(err, json.JSONDecodeError) and err.__traceback__ is None
