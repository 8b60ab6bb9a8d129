"""wirecheck.contracts: the exchange model, SSE decoding, stream assembly, rules, attribution, findings.

Pure: bytes and JSON in, findings out. Imports no other wirecheck package (DESIGN.md).
"""

from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, assemble_stream
from ._check import CheckResult, check_exchanges, check_view
from ._errors import ConfigError, InputError, TransportError, UsageError, WirecheckError
from ._exchange import (
    FORMAT_VERSION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    dump_exchange,
    load_exchange,
    read_exchanges,
    write_exchanges,
)
from ._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP
from ._pairs import TapPair, TapSet, TwinPair, pair_taps, pair_twins, request_fingerprint
from ._registry import REGISTRY, CheckConfig, Fault, Finding, Hit, Rule, Severity, hit, rule, rules
from ._report import render_json, render_junit, render_rules_markdown, render_text
from ._report_html import render_html
from ._sse import SSEAnomaly, SSEDecoder, SSEEvent, decode_sse
from ._view import ExchangeView, build_view
from ._wire import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatMessage,
    ChatRequest,
    Choice,
    ChunkChoice,
    Delta,
    FunctionCall,
    FunctionDefinition,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)

__all__ = [
    "FORMAT_VERSION",
    "REASONING_MARKUP",
    "REGISTRY",
    "SPECIAL_TOKENS",
    "TOOL_MARKUP",
    "AssembledCall",
    "AssembledChoice",
    "AssembledStream",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatMessage",
    "ChatRequest",
    "CheckConfig",
    "CheckResult",
    "Choice",
    "Chunk",
    "ChunkChoice",
    "ConfigError",
    "Delta",
    "Exchange",
    "ExchangeError",
    "ExchangeView",
    "Fault",
    "Finding",
    "FunctionCall",
    "FunctionDefinition",
    "Hit",
    "HttpRequest",
    "HttpResponse",
    "InputError",
    "Rule",
    "SSEAnomaly",
    "SSEDecoder",
    "SSEEvent",
    "Severity",
    "StreamAnomaly",
    "TapPair",
    "TapSet",
    "ToolCall",
    "ToolCallDelta",
    "ToolDefinition",
    "TransportError",
    "TwinPair",
    "Usage",
    "UsageError",
    "WirecheckError",
    "assemble_stream",
    "build_view",
    "check_exchanges",
    "check_view",
    "decode_sse",
    "dump_exchange",
    "hit",
    "load_exchange",
    "pair_taps",
    "pair_twins",
    "read_exchanges",
    "render_html",
    "render_json",
    "render_junit",
    "render_rules_markdown",
    "render_text",
    "request_fingerprint",
    "rule",
    "rules",
    "write_exchanges",
]
