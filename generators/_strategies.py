"""Hypothesis strategies for agent traffic, and the versioned sample sets.

Noun-named factories (STYLE.md): :func:`json_schemas` for tool parameters, :func:`tool_definitions`
and :func:`tool_lists`, :func:`conversations` with valid ``tool_call_id`` chains,
:func:`structured_output_schemas`, and the sample sets for long agent inputs and cache probes.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "CITIES",
    "SAMPLE_SET_VERSION",
    "agent_sample_set",
    "cache_probe_set",
    "conversations",
    "json_schemas",
    "structured_output_schemas",
    "tool_definitions",
    "tool_lists",
]

#: bump when a sample set changes: acceptance evidence names the version it ran
SAMPLE_SET_VERSION = "2026.12-1"
CITIES = ("Tokyo", "Osaka", "Kyoto", "Sapporo", "Nagoya", "Fukuoka", "Kobe", "Sendai")
_WORDS = (
    "get",
    "list",
    "search",
    "weather",
    "order",
    "orders",
    "city",
    "ship",
    "refund",
    "status",
    "user",
    "invoice",
    "stock",
    "route",
    "alert",
    "ticket",
)
# built from words, not from a regex: generation stays cheap (from_regex cost ~40 ms an example)
_NAMES = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map("_".join)
_FORMATS = st.sampled_from([None, "date", "date-time", "email", "uri", "uuid"])


@st.composite
def _scalar(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum"]))
    if kind == "string":
        s: dict[str, Any] = {"type": "string"}
        fmt = draw(_FORMATS)
        if fmt:
            s["format"] = fmt
        elif draw(st.booleans()):
            s["minLength"] = draw(st.integers(0, 3))
            s["maxLength"] = s["minLength"] + draw(st.integers(5, 40))
        return s
    if kind in ("integer", "number"):
        lo = draw(st.integers(-100, 100))
        s = {"type": kind}
        if draw(st.booleans()):
            s["minimum"] = lo
        if draw(st.booleans()):
            s["maximum"] = lo + draw(st.integers(1, 1000))
        return s
    if kind == "boolean":
        return {"type": "boolean"}
    return {
        "type": "string",
        "enum": draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5, unique=True)),
    }


def json_schemas(max_depth: int = 2) -> st.SearchStrategy[dict[str, Any]]:
    """Object schemas for tool parameters: nested objects, arrays, enums, required and optional
    properties, numeric bounds, formats."""

    def obj(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        @st.composite
        def make(draw: st.DrawFn) -> dict[str, Any]:
            names = draw(st.lists(_NAMES, min_size=1, max_size=5, unique=True))
            props = {n: draw(children) for n in names}
            required = [n for n in names if draw(st.booleans())]
            schema: dict[str, Any] = {"type": "object", "properties": props}
            if required:
                schema["required"] = required
            if draw(st.booleans()):
                schema["additionalProperties"] = False
            return schema

        return make()

    leaf = _scalar()
    arrays = st.builds(
        lambda items, lo: {"type": "array", "items": items, "minItems": lo, "maxItems": lo + 3},
        leaf,
        st.integers(0, 2),
    )
    inner = (
        st.recursive(st.one_of(leaf, arrays), obj, max_leaves=6) if max_depth > 1 else st.one_of(leaf, arrays)
    )
    return obj(inner)


def function_tool(
    name: str,
    description: str | None,
    properties: dict[str, Any],
    required: list[str],
    **schema: Any,
) -> dict[str, Any]:
    """One entry of a request's ``tools``: a function whose parameters are an object with these
    ``properties`` (``required`` of them), and any other JSON Schema keyword in ``schema``."""
    parameters = {"type": "object", "properties": properties, "required": required, **schema}
    function = {
        "name": name,
        **({"description": description} if description else {}),
        "parameters": parameters,
    }
    return {"type": "function", "function": function}


@st.composite
def tool_definitions(draw: st.DrawFn) -> dict[str, Any]:
    name = draw(_NAMES)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Tool {name.replace('_', ' ')}",
            "parameters": draw(json_schemas()),
        },
    }


def tool_lists(min_size: int = 1, max_size: int = 4) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(
        tool_definitions(), min_size=min_size, max_size=max_size, unique_by=lambda t: t["function"]["name"]
    )


@st.composite
def conversations(draw: st.DrawFn, tools: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Histories that end on a user turn or a tool result, with every tool message answering a call
    an earlier assistant turn made."""
    tools = tools if tools is not None else draw(tool_lists())
    names = [t["function"]["name"] for t in tools]
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are an operations agent."}]
    n_calls = 0
    for _ in range(draw(st.integers(1, 3))):
        city = draw(st.sampled_from(CITIES))
        name = draw(st.sampled_from(names))
        msgs.append({"role": "user", "content": f"Use {name} for {city}."})
        if draw(st.booleans()):
            cid = f"functions.{name}:{n_calls}"
            n_calls += 1
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps({"q": city})},
                        }
                    ],
                }
            )
            ok = draw(st.booleans())
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": cid,
                    "content": json.dumps({"ok": True, "city": city}) if ok else "error: upstream timeout",
                }
            )
            if draw(st.booleans()):
                msgs.append({"role": "assistant", "content": f"Done for {city}."})
    return msgs


def structured_output_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """``response_format`` values: json_object, or json_schema with a generated object schema."""
    return st.one_of(
        st.just({"type": "json_object"}),
        json_schemas(max_depth=1).map(
            lambda s: {"type": "json_schema", "json_schema": {"name": "answer", "schema": s, "strict": True}}
        ),
    )


def agent_sample_set(*, turns: int = 12, tools: int = 24) -> dict[str, Any]:
    """A long agent input (system prompt, tool definitions, history), deterministic, versioned."""
    order = {"order_id": {"type": "string"}, "priority": {"type": "integer", "minimum": 1, "maximum": 5}}
    defs = [
        function_tool(f"op_{i:02d}", f"Operation {i} of the logistics back office. " * 3, order, ["order_id"])
        for i in range(tools)
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You run the logistics back office. Follow the runbook. " * 40}
    ]
    for t in range(turns):
        history.append(
            {"role": "user", "content": f"Order {1000 + t} for {CITIES[t % len(CITIES)]}: status?"}
        )
        history.append({"role": "assistant", "content": f"Order {1000 + t} is in transit."})
    history.append({"role": "user", "content": "Use op_03 for order 2001 with priority 2."})
    return {"version": SAMPLE_SET_VERSION, "messages": history, "tools": defs}


def cache_probe_set() -> dict[str, Any]:
    """Cold, warm A (same system and tools), warm B (same prefix, new business data), control (one
    changed field early in the prompt): the cache phase's four requests."""
    base = agent_sample_set(turns=4)
    system = base["messages"][0]

    def probe(question: str, sys_msg: dict[str, Any] = system) -> dict[str, Any]:
        return {"messages": [sys_msg, {"role": "user", "content": question}], "tools": base["tools"]}

    changed = {"role": "system", "content": system["content"].replace("logistics", "insurance", 1)}
    return {
        "version": SAMPLE_SET_VERSION,
        "cold": probe("Order 3001 for Tokyo: status?"),
        "warm_a": probe("Order 3001 for Tokyo: status?"),
        "warm_b": probe("Order 3002 for Osaka: where is it now?"),
        "control": probe("Order 3001 for Tokyo: status?", changed),
    }
