"""Wire models for OpenAI-style chat completions as vLLM serves them (vllm-wire.md sections 1-2).

Lenient on purpose: every model keeps unknown fields (``extra="allow"``), and fields that servers and
gateways differ on are typed loosely, so that a rule can *report* a wrong shape instead of the model
refusing to load it. Both reasoning dialects are modelled: ``reasoning`` (vLLM 0.16+) and
``reasoning_content`` (vLLM 0.11-0.15, many gateways and other servers).

The checker's hot path (stream chunks) works on plain dicts for speed; these models are the typed
surface for requests, whole responses and users of the library.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatMessage",
    "ChatRequest",
    "Choice",
    "ChunkChoice",
    "Delta",
    "FunctionCall",
    "FunctionDefinition",
    "ToolCall",
    "ToolCallDelta",
    "ToolDefinition",
    "Usage",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class FunctionDefinition(_Open):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class ToolDefinition(_Open):
    type: str = "function"
    function: FunctionDefinition


class FunctionCall(_Open):
    name: str | None = None
    arguments: Any = None  # a JSON *string* on the wire; anything else is a finding


class ToolCall(_Open):
    id: str | None = None
    type: str | None = "function"
    function: FunctionCall | None = None


class ChatMessage(_Open):
    role: str
    content: Any = None  # str, list of parts, or null
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning: Any = None
    reasoning_content: Any = None


class ChatRequest(_Open):
    model: str | None = None
    messages: list[ChatMessage]
    tools: list[ToolDefinition] | None = None
    tool_choice: Any = None  # "auto" | "none" | "required" | {"type": "function", "function": {"name"}}
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    chat_template_kwargs: dict[str, Any] | None = None


class Usage(_Open):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    prompt_tokens_details: dict[str, Any] | None = None
    completion_tokens_details: dict[str, Any] | None = None


class Choice(_Open):
    index: int = 0
    message: ChatMessage
    finish_reason: str | None = None
    stop_reason: Any = None


class ChatCompletion(_Open):
    id: str
    object: Literal["chat.completion"] | str = "chat.completion"
    created: int | None = None
    model: str | None = None
    choices: list[Choice]
    usage: Usage | None = None
    system_fingerprint: str | None = None


class ToolCallDelta(_Open):
    index: Any = None
    id: str | None = None
    type: str | None = None
    function: dict[str, Any] | None = None


class Delta(_Open):
    role: str | None = None
    content: str | None = None
    reasoning: Any = None
    reasoning_content: Any = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(_Open):
    index: int = 0
    delta: Delta
    finish_reason: str | None = None


class ChatCompletionChunk(_Open):
    id: str
    object: str = "chat.completion.chunk"
    created: int | None = None
    model: str | None = None
    choices: list[ChunkChoice]
    usage: Usage | None = None
