"""wirecheck.contracts: the exchange model, SSE decoding, stream assembly, the family table, rules,
attribution, findings.

Pure: bytes and JSON in, findings out. Imports no other wirecheck package (DESIGN.md).
"""

from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, assemble_stream
from ._bugs import KnownBug, server_version
from ._check import CheckResult, check_exchanges, check_view
from ._errors import ConfigError, InputError
from ._exchange import (
    FORMAT_VERSION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    JoinedResponse,
    dump_exchange,
    load_exchange,
    read_exchanges,
    write_exchanges,
)
from ._families import (
    FAMILIES,
    FAMILY_CHOICES,
    FAMILY_NAMES,
    GENERIC,
    Family,
    detect_family,
    unknown_family_note,
)
from ._json import JsonLimitError, json_loads
from ._json import loads as bounded_loads
from ._known_bugs import KNOWN_BUGS
from ._markup import REASONING_MARKUP, SPECIAL_TOKENS, TOOL_MARKUP
from ._native import native, native_status, native_summary
from ._pairs import (
    CALLER,
    ENGINE,
    TapPair,
    TapSet,
    TwinPair,
    kin_keys,
    may_pair,
    pair_taps,
    pair_twins,
    request_fingerprint,
    twin_key,
)
from ._redact import DEFAULT_REDACTION, REDACTED, Redaction
from ._registry import REGISTRY, CheckConfig, Fault, Finding, Hit, Rule, Severity, hit, rule, rules
from ._report import render_json, render_junit, render_rules_markdown, render_text
from ._report_html import render_html
from ._sse import SSEAnomaly, SSEDecoder, SSEEvent, decode_sse
from ._stream_check import WINDOW, check_stream, exchange_bytes
from ._text import printable
from ._view import ExchangeView, build_view, build_views
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
    "CALLER",
    "DEFAULT_REDACTION",
    "ENGINE",
    "FAMILIES",
    "FAMILY_CHOICES",
    "FAMILY_NAMES",
    "FORMAT_VERSION",
    "GENERIC",
    "KNOWN_BUGS",
    "REASONING_MARKUP",
    "REDACTED",
    "REGISTRY",
    "SPECIAL_TOKENS",
    "TOOL_MARKUP",
    "WINDOW",
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
    "Family",
    "Fault",
    "Finding",
    "FunctionCall",
    "FunctionDefinition",
    "Hit",
    "HttpRequest",
    "HttpResponse",
    "InputError",
    "JoinedResponse",
    "JsonLimitError",
    "KnownBug",
    "Redaction",
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
    "TwinPair",
    "Usage",
    "assemble_stream",
    "bounded_loads",
    "build_view",
    "build_views",
    "check_exchanges",
    "check_stream",
    "check_view",
    "decode_sse",
    "detect_family",
    "dump_exchange",
    "exchange_bytes",
    "hit",
    "json_loads",
    "kin_keys",
    "load_exchange",
    "may_pair",
    "native",
    "native_status",
    "native_summary",
    "pair_taps",
    "pair_twins",
    "printable",
    "read_exchanges",
    "render_html",
    "render_json",
    "render_junit",
    "render_rules_markdown",
    "render_text",
    "request_fingerprint",
    "rule",
    "rules",
    "server_version",
    "twin_key",
    "unknown_family_note",
    "write_exchanges",
]
