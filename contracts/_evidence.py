"""Parser, model or engine decided from evidence, where a rule's default would guess.

A rule names the party a finding usually belongs to: arguments that are not JSON are the model's, an
error inside the stream is the engine's. The exchange often carries the evidence that settles it
otherwise, and this pass reads it after the rules ran (and before the two taps are compared):

- **the error's own text.** vLLM 0.32 turns an engine failure into ``Internal server error``
  (``GenerationError``) or ``EngineCore encountered an issue`` (``EngineDeadError``); any other
  exception raised while the API server parses the output reaches the caller as its Python text
  (``create_error_response(e)``: ``str(e)``), in an error frame (chat streams), as a 400/500 body, or,
  on ``/v1/responses``, as a connection cut mid-stream (only ``GenerationError`` becomes an ``error``
  event there). Texts that vLLM's tool and reasoning parsers raise, and Python's own texts for a
  parser tripping over the model's output (``pop from empty list``, ``Expecting value``), are the
  parser's;
- **the twin.** The same request streamed and not, with evidence of one output (the same text,
  reasoning or calls, and as many completion tokens: greedy decoding alone is not, vLLM's batching
  changes tokens, and a sample that diverges after the reasoning writes another answer): a fault one
  side shows and the other does not is that side's parser's. vLLM
  0.32 coerces non-streamed arguments to the schema's types (``42`` to ``"42"``) and not streamed
  ones, so a schema finding that coercion explains stays the model's;
- **token accounting.** ``usage`` counts the tokens the model wrote; what reached the wire holds at
  most one token per byte of text (byte-level vocabularies: a token is at least one byte; special
  tokens the parser removes are allowed for by markup allowances). The served tokenizer is not
  available here, so these are bounds, and the message says so. Tokens past the bound were written
  and dropped: the parser's;
- **markup in a value.** A tool name carrying a template or channel token (``<|channel|>``) is text
  the parser failed to cut, not a tool the model invented; call markup in reasoning beside the same
  call parsed out is a leak, not a call written while thinking; tool calls parsed out although
  ``tool_choice`` is ``none`` were parsed by a parser that should not have run.

The known-bug catalogue (``_bugs``) is read after this pass: a finding it names keeps the party its
entry gives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ._pairs import TwinPair
from ._registry import ALL_ENDPOINTS, CheckConfig, Fault, Finding, Hit, hit, rule
from ._translate import args_value, same_or_coerced, same_output, uncounted_reasoning, usage_meaning
from ._view import ExchangeView

__all__ = ["WireTokens", "decide", "error_origin", "wire_tokens"]

# --- the error's text ----------------------------------------------------------------------------------

#: what vLLM 0.32 says when the engine itself failed (exceptions.py, v1/engine/exceptions.py)
_ENGINE = re.compile(
    r"EngineCore encountered an issue|^Internal server error$|Request failed; please retry|"
    r"engine (?:loop|core) (?:is )?(?:not running|dead)|out of memory|EngineDeadError",
    re.I,
)
#: texts vLLM 0.32's tool and reasoning parsers raise (tool_parsers/, reasoning/, parser/), and the
#: parser constructors' "could not locate" (the served tokenizer lacks the parser's tokens)
_PARSER = re.compile(
    r"could not locate|tool ?parser|reasoning ?parser|Malformed IFM XML|No valid tool calls extracted|"
    r"Invalid tool call name|has not been passed in `tools`|Tool call arguments must be literals|"
    r"Tool output must be a list of function calls|Error in extracting tool call",
    re.I,
)
#: Python's own texts for code that trips over a string it parses: json's decoder, indexing and
#: unpacking, ast.literal_eval (pythonic parsers), a None where a match was expected
_PYTHON = re.compile(
    r"^(?:Expecting (?:value|property name|',' delimiter|':' delimiter)|Unterminated string|"
    r"Extra data|Invalid control character|Invalid \\\\?(?:escape|u)|"
    r"(?:list|string|tuple) index out of range|pop from (?:an )?empty|substring not found|"
    r"(?:not enough|too many) values to unpack|'NoneType' object|.* object has no attribute|"
    r".* object is not (?:subscriptable|iterable)|malformed node or string|invalid syntax|"
    r"unexpected EOF|dictionary changed size during iteration|can only concatenate)",
    re.I,
)


def error_origin(message: str, *, parsing: bool) -> str | None:
    """``parser`` | ``engine`` | None (not known) for an error text from vLLM's API server.
    ``parsing``: the request gave the parsers work (tools declared, or reasoning in the answer)."""
    text = message.strip()
    if _ENGINE.search(text):
        return "engine"
    if _PARSER.search(text):
        return "parser"
    if parsing and _PYTHON.match(text):
        return "parser"
    return None


def _parsing(view: ExchangeView) -> bool:
    return bool(view.tools) or any(ch.reasoning for ch in view.choices)


def _error_text(view: ExchangeView) -> str | None:
    """The error's message: the in-band frame's, or the error body's (JSON or Starlette's bare text)."""
    if view.stream is not None and view.stream.error_frames:
        err = view.stream.error_frames[0][1]
        msg = err.get("message") if isinstance(err, dict) else err
        return msg if isinstance(msg, str) else None
    body = view.body
    if isinstance(body, dict):
        err = body.get("error")
        msg = err.get("message") if isinstance(err, dict) else err
        return msg if isinstance(msg, str) else None
    resp = view.ex.response
    if resp is not None and (view.status or 0) >= 400 and len(resp.content) < 200:
        return resp.content.decode("utf-8", "replace").strip()
    return None


#: Starlette's answer to an exception no handler took: vLLM 0.32 handles VLLMError, ValueError,
#: TypeError and OverflowError (serve/exception_handling/register.py); an IndexError or KeyError
#: from a parser escapes to this
_UNHANDLED = "Internal Server Error"


def _error_decision(view: ExchangeView, f: Finding) -> tuple[Fault, str] | None:
    if f.rule in ("stream-error-frame", "http-server-error", "http-client-error"):
        if f.rule == "http-client-error" and view.endpoint == "messages":
            return None  # Messages' own json.loads of the model's arguments: the model's (its rule says)
        text = _error_text(view)
        if text is None:
            return None
        if text == _UNHANDLED and f.rule == "http-server-error" and _parsing(view) and view.tap != "caller":
            return Fault.PARSER, (
                "a bare 500 is an exception vLLM's handlers do not take (an IndexError or KeyError), "
                "and with tools declared it comes from the tool or reasoning parser"
            )
        if error_origin(text, parsing=_parsing(view)) == "parser":
            return Fault.PARSER, f"the error's text ({text[:80]!r}) is raised while the output is parsed"
    if f.rule == "transport-error" and view.endpoint == "responses" and _open_call(view):
        return Fault.PARSER, (
            "the stream was cut inside a function call: on /v1/responses vLLM sends an engine failure "
            "as an error event, while an exception in the parser ends the connection"
        )
    return None


def _open_call(view: ExchangeView) -> bool:
    """A function call item had begun (its arguments streaming) when the stream ended."""
    st = view.stream
    return st is not None and not st.done and not st.error_frames and any(ch.calls for ch in view.choices)


# --- token accounting --------------------------------------------------------------------------------

#: tokens a parser removes from the wire by design: a think close, the channel and section tokens of
#: the families' templates, end of sequence (K3 and harmony write about a dozen around one answer)
_BASE = 24
#: per call: the section and call tokens and the name's own header (K3 writes ``<|open|>call
#: tool="NAME" index="1"<|sep|>``), and per argument key (K3, qwen3_coder, glm45 write one tag each)
_PER_CALL = 32
_PER_KEY = 16


@dataclass(frozen=True, slots=True)
class WireTokens:
    #: completion tokens usage counts
    used: int
    #: the most tokens the wire can account for: UTF-8 bytes of the text, plus the allowances
    most: int
    #: reasoning tokens usage counts apart, and the most the answer outside reasoning can hold
    reasoning: int | None
    most_outside: int

    @property
    def vanished(self) -> int:
        """Tokens written that the wire cannot hold, by either reckoning (0: none shown)."""
        outside = self.used - self.reasoning - self.most_outside if self.reasoning is not None else 0
        return max(self.used - self.most, outside, 0)


def wire_tokens(view: ExchangeView) -> WireTokens | None:
    """What usage counts against what reached the wire, for an answer that ended by itself and shows
    all it wrote (not cut by the token limit, reasoning not hidden by the request)."""
    if not view.ok or not view.choices or view.req.get("include_reasoning") is False:
        return None
    usage = usage_meaning(view)
    if usage is None or usage.completion is None:
        return None
    if any(ch.finish_reason in (None, "length") for ch in view.choices):
        return None
    outside_bytes = reasoning_bytes = uncounted = 0
    allowance = _BASE * len(view.choices)
    for ch in view.choices:
        reasoning_bytes += len((ch.reasoning or "").encode())
        outside_bytes += len((ch.content or "").encode())
        for call in ch.calls:
            outside_bytes += len(call.name.encode()) + len(call.arguments.encode())
            value = args_value(call.arguments)[1]
            allowance += _PER_CALL + _PER_KEY * (len(value) if isinstance(value, dict) else 1)
        if isinstance(ch.stop_reason, str):
            allowance += len(ch.stop_reason.encode())  # a stop string is generated, then cut
        # reasoning the stream's count may have left out is counted outside it (rule reasoning-unclosed)
        uncounted += uncounted_reasoning(view, usage, ch)
    return WireTokens(
        usage.completion,
        outside_bytes + reasoning_bytes + allowance,
        usage.reasoning,
        outside_bytes + allowance + uncounted,
    )


def _bounds(t: WireTokens) -> str:
    return (
        f"usage counts {t.used} completion tokens; the text that reached the wire holds at most "
        f"{t.most} (a token is at least one byte, plus allowances for markup and end of sequence; the "
        "family's tokenizer is not available here, so these are bounds)"
    )


@rule("output-tokens-vanished", fault=Fault.PARSER, area="tokens", endpoints=ALL_ENDPOINTS)
def _vanished(view: ExchangeView, ctx: CheckConfig) -> Iterator[Hit]:
    """Usage counts more completion tokens than what reached the wire can hold: the parser dropped output.

    Token accounting: every byte-level vocabulary spends at least one byte of text per token, so an
    answer of B bytes holds at most B tokens plus the markup its parser removes by design (think and
    channel tokens, call sections, end of sequence). More completion tokens than that were written
    and never reached the caller: a call dropped silently (Kimi K2 drops a header without ``:N``),
    content cut (vllm PR #38579), reasoning lost when streaming. A turn whose tokens all went to
    reasoning is the model's instead (``reasoning-unclosed``). Not judged for answers cut by the
    token limit, nor where the request hides reasoning."""
    t = wire_tokens(view)
    if t is not None and t.vanished > 0:
        yield hit(f"{_bounds(t)}: at least {t.vanished} tokens written never reached the wire", "/usage")


# --- the pass -------------------------------------------------------------------------------------------

#: message findings whose party the twin decides: the model's by default, or the parser's
_TWIN_RULES = frozenset(
    {
        "answer-empty",
        "finish-reason-mismatch",
        "reasoning-markup-in-content",
        "reasoning-missing",
        "reasoning-unclosed",
        "special-token-leak",
        "tool-call-args-invalid-json",
        "tool-call-args-not-object",
        "tool-call-args-schema",
        "tool-call-id-format",
        "tool-call-in-reasoning",
        "tool-call-undeclared",
        "tool-markup-in-content",
    }
)
_CALL_RULES = frozenset(
    {
        "tool-call-args-invalid-json",
        "tool-call-args-not-object",
        "tool-call-args-schema",
        "tool-call-id-format",
        "tool-call-undeclared",
    }
)
#: findings on the output that tokens written and dropped explain: put on the parser, and the
#: accounting said once, as their reason
_VANISHED_RULES = frozenset(
    {"answer-empty", "finish-reason-mismatch", "tool-call-args-invalid-json", "tool-call-args-not-object"}
)
_SPECIAL = re.compile(r"<\|[A-Za-z_]+\|>")
_VANISHED = "output-tokens-vanished"


def decide(
    views: Iterable[ExchangeView], per_view: Mapping[int, list[Finding]], twins: Iterable[TwinPair]
) -> None:
    """Settle each finding's party from the evidence its exchange (and its twin) carries."""
    for v in views:
        found = per_view[id(v)]
        tokens = next((f for f in found if f.rule == _VANISHED), None)
        merged = False
        for f in found:
            decision = _error_decision(v, f) or _value_decision(v, f)
            if decision is None and tokens is not None and f.rule in _VANISHED_RULES:
                decision = Fault.PARSER, tokens.message
                merged = True
            if decision is not None:
                _settle(f, *decision)
        if merged and tokens is not None:
            found.remove(tokens)  # said once, as the reason on the finding it settled
    for tw in twins:
        _twin_decisions(tw, per_view[id(tw.streamed)], per_view[id(tw.plain)])


def _settle(f: Finding, fault: Fault, why: str) -> None:
    if f.fault == fault:
        return
    f.evidence["decided_by"] = {"was": str(f.fault), "why": why}
    f.fault = fault
    f.message += f" ({why}: the {fault}'s)"


def _value_decision(view: ExchangeView, f: Finding) -> tuple[Fault, str] | None:
    if f.rule == "tool-call-undeclared" and _SPECIAL.search(str(f.evidence.get("excerpt", ""))):
        return Fault.PARSER, "the name carries a template token the parser should have cut"
    if f.rule == "tool-call-in-reasoning" and any(ch.calls and ch.reasoning for ch in view.choices):
        # vllm PR #28543: the section token streamed into reasoning while the call parsed fine
        return Fault.PARSER, "the call was parsed out as well, so the markup in reasoning is a leak"
    none = view.req.get("tool_choice") == "none"
    if f.rule == "tool-choice-violated" and none and any(ch.calls for ch in view.choices):
        return Fault.PARSER, "calls were parsed out although tool_choice none leaves the parser idle"
    return None


def _twin_decisions(tw: TwinPair, streamed: list[Finding], plain: list[Finding]) -> None:
    """One output, two parses: what one side shows and the other does not is that side's parser's."""
    s, p = tw.streamed, tw.plain
    if not (same_output(s, p) and _same_length(s, p)):
        return
    names = [[c.name for c in ch.calls] for ch in s.choices] == [
        [c.name for c in ch.calls] for ch in p.choices
    ]
    # a call rule's silence means something only where the other side has the same calls to judge
    judged = _TWIN_RULES if names else _TWIN_RULES - _CALL_RULES
    rules_s = {f.rule for f in streamed if f.rule in judged}
    rules_p = {f.rule for f in plain if f.rule in judged}
    for mine, other, side, found in (
        (rules_s, rules_p, "streaming", streamed),
        (rules_p, rules_s, "non-streaming", plain),
    ):
        for f in found:
            if f.rule not in mine - other or (f.rule == "tool-call-args-schema" and _coerced(tw)):
                continue
            if side == "streaming" and f.rule in _CONTENT_RULES and names and _tail_dropped(s, p):
                continue
            twin = "non-streamed" if side == "streaming" else "streamed"
            _settle(
                f, Fault.PARSER, f"the {twin} twin of the same output does not show it: the {side} parser"
            )


#: findings on text in the answer's content, which a twin that dropped that text cannot judge
_CONTENT_RULES = frozenset({"reasoning-markup-in-content", "tool-markup-in-content", "special-token-leak"})


def _tail_dropped(streamed: ExchangeView, plain: ExchangeView) -> bool:
    """The non-streamed answer's content is the streamed one's cut short, beside the same calls:
    vLLM's non-streamed tool parsers keep only the text before the calls (deepseek_v31, hermes), the
    streamed ones send what the model wrote after them too; the text only the stream shows is the
    model's, and its absence from the twin is no evidence against the streaming parser."""
    pairs = list(zip(streamed.choices, plain.choices, strict=False))
    return bool(pairs) and all(
        (cs.content or "") != (cp.content or "") and (cs.content or "").startswith(cp.content or "")
        for cs, cp in pairs
    )


def _same_length(a: ExchangeView, b: ExchangeView) -> bool:
    """Both sides count the same completion tokens: with the same text before it, the part that
    differs was written alike too (sampling that diverged after the reasoning writes other tokens,
    and rarely as many). A stream without usage leaves nothing to tell."""
    ua, ub = usage_meaning(a), usage_meaning(b)
    return ua is not None and ub is not None and ua.completion is not None and ua.completion == ub.completion


def _coerced(tw: TwinPair) -> bool:
    """The two sides' arguments differ only as vLLM's coercion of non-streamed values to the schema's
    types makes them differ (real-vllm-cpu.md): the model wrote the streamed ones."""
    for cs, cp in zip(tw.streamed.choices, tw.plain.choices, strict=False):
        for a, b in zip(cs.calls, cp.calls, strict=False):
            if args_value(a.arguments) != args_value(b.arguments) and same_or_coerced(
                args_value(a.arguments), args_value(b.arguments)
            ):
                return True
    return False
