"""Real agent frameworks as callers: one agent loop per (framework, API, streamed) case.

Each case is the code a user of that framework writes (an agent with a weather tool, a structured
answer), pointed at a base URL: the simulator or a real vLLM, straight or through wirecheck's proxy.
It returns what its caller would see: whether the loop completed, how many requests it sent, the
arguments each tool was called with, and the final output. The frameworks reach the server only
through the openai and anthropic SDK clients built here, whose HTTP clients count the requests.

Nothing leaves loopback: openai-agents' tracing exporter is switched off (it posts spans to the
OpenAI platform otherwise), LangSmith tracing is off unless its environment asks for it (the
tests clear those variables), and pydantic-ai only logs through logfire-api's no-op shim.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx2
import openai
from pydantic import BaseModel

__all__ = ["CASES", "WARNINGS", "Case", "Outcome", "Target", "Weather", "run_case"]

#: warnings of the frameworks themselves that the tests let pass (pytest filterwarnings marks: a
#: ``warnings.catch_warnings`` inside a run would race the other run's thread): LangGraph 1.0's
#: deprecation of create_react_agent, and langchain-openai's streamed json_schema path, which
#: serialises the parsed model into a field typed None (a pydantic UserWarning; the result is right)
WARNINGS = [
    "ignore::langgraph.warnings.LangGraphDeprecatedSinceV10",
    "ignore:Pydantic serializer warnings:UserWarning",
]

TOOL_DOC = "Get the current weather for a city."
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["city", "summary"],
    "additionalProperties": False,
}
#: the prompt names the tool: the simulator's agent and the tiny real model's both call a declared
#: tool that the user's turn names
ASK = "Call get_weather for Osaka and tell me the weather there."
ASK_JSON = "Describe the weather in Osaka."


class Weather(BaseModel):
    city: str
    summary: str


@dataclass(frozen=True, slots=True)
class Target:
    """Where a case sends its requests: ``url`` without ``/v1``, the served model, and extra body
    fields for every request (a real vLLM's ``vllm_xargs`` script)."""

    url: str
    model: str
    extra_body: dict[str, Any] | None = None


@dataclass(slots=True)
class Outcome:
    """What the caller saw."""

    completed: bool
    error: str | None
    requests: int
    tool_args: list[tuple[str, dict[str, Any]]]
    final: Any

    def same_as(self, other: Outcome) -> list[str]:
        """The fields in which two runs of one case differ (empty: the caller saw the same)."""
        return [
            name
            for name in ("completed", "error", "requests", "tool_args", "final")
            if getattr(self, name) != getattr(other, name)
        ]


@dataclass(slots=True)
class _Run:
    target: Target
    requests: int = 0
    tool_args: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failures_left: int = 0
    clients: list[httpx2.AsyncClient] = field(default_factory=list)

    async def _count(self, request: httpx2.Request) -> None:
        if request.method == "POST":
            self.requests += 1

    def http(self) -> httpx2.AsyncClient:
        client = httpx2.AsyncClient(event_hooks={"request": [self._count]}, timeout=120)
        self.clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()

    def openai(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=f"{self.target.url}/v1", api_key="sk-test", max_retries=0, http_client=self.http()
        )

    def anthropic(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            base_url=self.target.url, api_key="sk-test", max_retries=0, http_client=self.http()
        )

    def weather(self, city: str) -> str:
        """The tool body every framework wraps: fails ``failures_left`` times, then answers."""
        self.tool_args.append(("get_weather", {"city": city}))
        if self.failures_left > 0:
            self.failures_left -= 1
            raise RuntimeError("weather service timeout: try again")
        return f"Sunny in {city}, 21 C"

    @property
    def extra(self) -> dict[str, Any]:
        return dict(self.target.extra_body or {})


CaseFn = Callable[[_Run], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Case:
    """One agent loop: ``client`` (framework), ``api`` (chat, responses, messages), ``streamed``."""

    id: str
    client: str
    api: str
    streamed: bool
    what: str
    fn: CaseFn
    fail_once: bool = False


def _dump(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    return value


def run_case(case: Case, target: Target) -> Outcome:
    """Run one case to its end, in a fresh event loop, and say what its caller saw."""
    run = _Run(target, failures_left=1 if case.fail_once else 0)

    async def main() -> Any:
        try:
            return await case.fn(run)
        finally:
            await run.aclose()

    try:
        final = asyncio.run(main())
    except Exception as exc:  # the framework's own verdict on the answers: part of what is compared
        return Outcome(False, type(exc).__name__, run.requests, run.tool_args, None)
    return Outcome(True, None, run.requests, run.tool_args, _dump(final))


# --- openai-agents -------------------------------------------------------------------------------


def _agents_model(run: _Run, api: str) -> Any:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel, set_tracing_disabled

    set_tracing_disabled(True)  # the default exporter posts every span to api.openai.com
    cls = OpenAIChatCompletionsModel if api == "chat" else OpenAIResponsesModel
    return cls(model=run.target.model, openai_client=run.openai())


def _agents(api: str, *, streamed: bool, output: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        from agents import Agent, ModelSettings, Runner, function_tool

        @function_tool
        def get_weather(city: str) -> str:
            """Get the current weather for a city."""
            return run.weather(city)

        agent: Agent[Any] = Agent(
            name="weather",
            instructions="You answer questions about the weather.",
            tools=[get_weather],
            model=_agents_model(run, api),
            model_settings=ModelSettings(extra_body=run.extra or None),
            output_type=Weather if output else None,
        )
        if streamed:
            result = Runner.run_streamed(agent, ASK, max_turns=6)
            async for _ in result.stream_events():
                pass
            return result.final_output
        return (await Runner.run(agent, ASK, max_turns=6)).final_output

    return fn


def _agents_plain(api: str) -> CaseFn:
    """An agent without tools: openai-agents still sends ``"tools": []`` on /v1/responses, which vLLM
    serves (only chat completions refuses an empty list)."""

    async def fn(run: _Run) -> Any:
        from agents import Agent, ModelSettings, Runner

        agent: Agent[Any] = Agent(
            name="greeter",
            instructions="You answer briefly.",
            model=_agents_model(run, api),
            model_settings=ModelSettings(extra_body=run.extra or None),
        )
        return (await Runner.run(agent, "Say hello to Osaka.", max_turns=2)).final_output

    return fn


# --- LangGraph over langchain-openai -------------------------------------------------------------


def _chat_openai(run: _Run, *, streamed: bool) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=run.target.model,
        base_url=f"{run.target.url}/v1",
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
        streaming=streamed,
        http_async_client=run.http(),
        extra_body=run.extra or None,
    )


def _langgraph(*, streamed: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        from langchain_core.tools import tool
        from langgraph.prebuilt import create_react_agent

        @tool
        def get_weather(city: str) -> str:
            """Get the current weather for a city."""
            return run.weather(city)

        # LangGraph 1.0 moved it to langchain.agents.create_agent and warns (the tests let that
        # warning pass: WARNINGS below); it is still what most LangGraph code calls
        agent = create_react_agent(_chat_openai(run, streamed=streamed), [get_weather])
        out = await agent.ainvoke({"messages": [("user", ASK)]}, {"recursion_limit": 12})
        return out["messages"][-1].content

    return fn


def _langchain_structured(*, streamed: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        llm = _chat_openai(run, streamed=streamed).with_structured_output(Weather)
        return await llm.ainvoke(ASK_JSON)

    return fn


# --- pydantic-ai ---------------------------------------------------------------------------------


def _pydantic_ai(api: str, *, streamed: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
        from pydantic_ai.providers.openai import OpenAIProvider
        from pydantic_ai.settings import ModelSettings
        from pydantic_ai.usage import UsageLimits

        provider = OpenAIProvider(openai_client=run.openai())
        cls = OpenAIChatModel if api == "chat" else OpenAIResponsesModel
        agent = Agent(
            cls(run.target.model, provider=provider),
            output_type=Weather,
            instructions="You answer questions about the weather.",
            model_settings=ModelSettings(extra_body=run.extra) if run.extra else None,
        )

        @agent.tool_plain
        def get_weather(city: str) -> str:
            """Get the current weather for a city."""
            return run.weather(city)

        # bounded: a model that never calls the output tool ends the run at 8 requests, not 50
        limits = UsageLimits(request_limit=8)
        if streamed:
            async with agent.run_stream(ASK, usage_limits=limits) as result:
                return await result.get_output()
        return (await agent.run(ASK, usage_limits=limits)).output

    return fn


# --- the anthropic SDK ---------------------------------------------------------------------------

ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": TOOL_DOC,
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _anthropic_loop(*, streamed: bool) -> CaseFn:
    """messages.create (or messages.stream) until the model stops calling tools: tool_use blocks
    answered by tool_result blocks, the assistant turn sent back as it came."""

    async def fn(run: _Run) -> Any:
        client = run.anthropic()
        messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        for _ in range(6):
            kw: dict[str, Any] = {
                "model": run.target.model,
                "max_tokens": 1024,
                "messages": messages,
                "tools": [ANTHROPIC_TOOL],
                "extra_body": run.extra or None,
            }
            if streamed:
                async with client.messages.stream(**kw) as s:
                    msg = await s.get_final_message()
            else:
                msg = await client.messages.create(**kw)
            uses = [b for b in msg.content if b.type == "tool_use"]
            if msg.stop_reason != "tool_use" or not uses:
                return "".join(b.text for b in msg.content if b.type == "text")
            results = []
            for use in uses:
                args = dict(use.input) if isinstance(use.input, dict) else {}
                out = run.weather(str(args.get("city")))
                results.append({"type": "tool_result", "tool_use_id": use.id, "content": out})
            messages += [
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
                {"role": "user", "content": results},
            ]
        raise RuntimeError("the model kept calling tools")

    return fn


def _anthropic_output(*, streamed: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        client = run.anthropic()
        kw: dict[str, Any] = {
            "model": run.target.model,
            "max_tokens": 1024,
            "messages": [{"role": "user", "content": ASK_JSON}],
            "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
            "extra_body": run.extra or None,
        }
        if streamed:
            async with client.messages.stream(**kw) as s:
                msg = await s.get_final_message()
        else:
            msg = await client.messages.create(**kw)
        text = "".join(b.text for b in msg.content if b.type == "text")
        return Weather.model_validate(json.loads(text))

    return fn


# --- the openai SDK ------------------------------------------------------------------------------

OPENAI_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": TOOL_DOC,
        "parameters": ANTHROPIC_TOOL["input_schema"],
    },
}


def _openai_chat(*, streamed: bool) -> CaseFn:
    """The chat tool loop by hand: assistant turns sent back with their tool_calls, each answered."""

    async def fn(run: _Run) -> Any:
        client = run.openai()
        messages: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        for _ in range(6):
            kw: dict[str, Any] = {
                "model": run.target.model,
                "messages": messages,
                "tools": [OPENAI_TOOL],
                "extra_body": run.extra or None,
            }
            if streamed:
                async with client.chat.completions.stream(**kw) as s:
                    done = await s.get_final_completion()
                msg = done.choices[0].message
            else:
                msg = (await client.chat.completions.create(**kw)).choices[0].message
            if not msg.tool_calls:
                return msg.content
            messages.append(msg.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
            for tc in msg.tool_calls:
                args = json.loads(tc.function.arguments)  # type: ignore[union-attr]
                out = run.weather(str(args.get("city")))
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": out})
        raise RuntimeError("the model kept calling tools")

    return fn


def _openai_responses(*, streamed: bool) -> CaseFn:
    async def fn(run: _Run) -> Any:
        client = run.openai()
        items: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        tool = {"type": "function", "name": "get_weather", "description": TOOL_DOC}
        tool["parameters"] = ANTHROPIC_TOOL["input_schema"]
        for _ in range(6):
            kw: dict[str, Any] = {
                "model": run.target.model,
                "input": items,
                "tools": [tool],
                "extra_body": run.extra or None,
            }
            if streamed:
                async with client.responses.stream(**kw) as s:
                    resp = await s.get_final_response()
            else:
                resp = await client.responses.create(**kw)
            calls = [i for i in resp.output if i.type == "function_call"]
            if not calls:
                return resp.output_text
            for c in calls:
                items.append(
                    {"type": "function_call", "call_id": c.call_id, "name": c.name, "arguments": c.arguments}
                )
                out = run.weather(str(json.loads(c.arguments).get("city")))
                items.append({"type": "function_call_output", "call_id": c.call_id, "output": out})
        raise RuntimeError("the model kept calling tools")

    return fn


def _cases() -> list[Case]:
    out: list[Case] = []
    for api in ("chat", "responses"):
        for streamed in (False, True):
            how = "Runner.run_streamed" if streamed else "Runner.run"
            out.append(
                Case(
                    f"openai-agents-{api}-{'stream' if streamed else 'run'}",
                    "openai-agents",
                    api,
                    streamed,
                    f"{how}, a tool that fails once and is retried",
                    _agents(api, streamed=streamed, output=False),
                    fail_once=True,
                )
            )
        out.append(
            Case(
                f"openai-agents-{api}-notools",
                "openai-agents",
                api,
                False,
                "Runner.run, an agent without tools",
                _agents_plain(api),
            )
        )
        out.append(
            Case(
                f"openai-agents-{api}-output",
                "openai-agents",
                api,
                False,
                "Runner.run, a tool and a structured output_type",
                _agents(api, streamed=False, output=True),
            )
        )
    for streamed in (False, True):
        s = "stream" if streamed else "invoke"
        out += [
            Case(
                f"langgraph-react-{s}",
                "LangGraph",
                "chat",
                streamed,
                "create_react_agent over ChatOpenAI",
                _langgraph(streamed=streamed),
            ),
            Case(
                f"langchain-structured-{s}",
                "LangGraph",
                "chat",
                streamed,
                "ChatOpenAI.with_structured_output",
                _langchain_structured(streamed=streamed),
            ),
        ]
    for api in ("chat", "responses"):
        for streamed in (False, True):
            out.append(
                Case(
                    f"pydantic-ai-{api}-{'stream' if streamed else 'run'}",
                    "pydantic-ai",
                    api,
                    streamed,
                    "a tool and an output_type" + (" (run_stream)" if streamed else ""),
                    _pydantic_ai(api, streamed=streamed),
                )
            )
    for streamed in (False, True):
        s = "stream" if streamed else "create"
        out += [
            Case(
                f"anthropic-tools-{s}",
                "anthropic SDK",
                "messages",
                streamed,
                f"messages.{s}, tool_use answered by tool_result",
                _anthropic_loop(streamed=streamed),
            ),
            Case(
                f"anthropic-output-{s}",
                "anthropic SDK",
                "messages",
                streamed,
                f"messages.{s} with output_config.format",
                _anthropic_output(streamed=streamed),
            ),
        ]
    for streamed in (False, True):
        s = "stream" if streamed else "create"
        out += [
            Case(
                f"openai-chat-{s}",
                "openai SDK",
                "chat",
                streamed,
                f"chat.completions.{s}, a tool loop",
                _openai_chat(streamed=streamed),
            ),
            Case(
                f"openai-responses-{s}",
                "openai SDK",
                "responses",
                streamed,
                f"responses.{s}, a tool loop",
                _openai_responses(streamed=streamed),
            ),
        ]
    return out


#: every case, by id
CASES: dict[str, Case] = {c.id: c for c in _cases()}
