"""The real tier's family facts (scripts/realvllm/families.json) are the simulator table's.

The 3.11 scripts that build and script the real vLLM's tiny model cannot import wirecheck, so they
read a JSON copy of the table; these tests keep the copy equal to the table and the table true to
the family rows it serves.
"""

from __future__ import annotations

import json
from pathlib import Path

from wirecheck.contracts import FAMILIES
from wirecheck.sim import DEFAULT_FAMILY, SIM_FAMILIES
from wirecheck.sim._families import tiny_model_facts

FACTS = Path(__file__).parents[2] / "scripts" / "realvllm" / "families.json"


def test_families_json_is_the_tables_facts() -> None:
    assert json.loads(FACTS.read_text(encoding="utf-8")) == tiny_model_facts(), (
        "scripts/realvllm/families.json is stale: run .venv/bin/python scripts/realvllm/write_families.py"
    )


def test_the_real_tier_serves_the_simulators_default_family_by_default() -> None:
    facts = tiny_model_facts()
    assert facts["default"] == DEFAULT_FAMILY
    assert DEFAULT_FAMILY in facts["families"]


def test_each_tiny_model_has_the_family_tables_special_tokens_and_parsers() -> None:
    facts = tiny_model_facts()["families"]
    assert set(facts) == {name for name, row in SIM_FAMILIES.items() if row.tiny_model is not None}
    for name, tiny in facts.items():
        family = FAMILIES[name]
        # the chat-template tokens a leak rule looks for are real special tokens of the tokenizer
        assert set(family.special_tokens) <= set(tiny["special_tokens"]), name
        assert tiny["special_tokens"][0] in family.special_tokens, f"{name}: EOS first"
        assert (tiny["tool_call_parser"], tiny["reasoning_parser"]) == (
            family.tool_parser,
            family.reasoning_parser,
        )
        assert tiny["served_model"] == family.example_model
