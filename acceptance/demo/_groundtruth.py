"""Scoring wirecheck's findings against the demo's ground truth.

The simulator and the simulated gateway write every fault they put on the wire (``wirecheck.sim``'s
``GroundTruth``). Here each finding is matched to the injected faults of its exchange, and precision
and recall are computed per fault class, over exchanges (one caller/engine pair is one exchange: a
fault the caller tap and the engine tap both show counts once).

- A finding is *explained* when its exchange (or, for a stream/non-stream twin rule, its twin) carries
  an injected fault that blames the same side and whose class lists the finding's rule
  (:data:`RULES`), or when the rule compares two exchanges (:data:`CONSEQUENCES`) and any fault of
  that side is on either. Only error and warning findings count; info is not a claim of a fault.
- Per class: *flagged* exchanges have a finding of the class's rules blamed on its side; precision
  is the share of them where the class was injected. *Recall* is the share of exchanges with the
  class injected and observable on the wire where an explained finding names it.
- A finding no injected fault explains is a false alarm: it lowers its class's precision, or, when its
  rule belongs to no class of that side, is listed as unexplained (and lowers that side's precision).

The mapping from a fault class to the rules that report it is the test's knowledge of the catalogue,
written once here; the truth file and the findings are never edited to agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from wirecheck.contracts import Exchange, Finding, build_view, pair_twins

__all__ = ["CONSEQUENCES", "RULES", "ClassScore", "TruthScore", "score_truth"]

#: fault class (the simulator's or gateway's fault name) -> rules that report it
RULES: dict[str, frozenset[str]] = {
    name: frozenset(rules)
    for name, rules in {
        "model.invalid_json": {"tool-call-args-invalid-json"},
        "model.schema_violation": {"tool-call-args-schema", "tool-call-args-not-object"},
        "model.undeclared_tool": {"tool-call-undeclared"},
        "model.bad_id": {"tool-call-id-format"},
        # the call written inside the thinking: the thinking never closes before the answer
        "model.call_in_think": {"tool-call-in-reasoning", "reasoning-unclosed", "tool-choice-violated"},
        "model.ignore_tool_choice": {"tool-choice-violated"},
        "model.bad_json_output": {"json-output-invalid"},
        # Kimi K3's parser failing returns the whole model output as content: think and tool markup
        "parser.markup_in_content": {
            "tool-markup-in-content",
            "reasoning-markup-in-content",
            "special-token-leak",
            "tool-choice-violated",  # tool_choice required, and the call never reached tool_calls
        },
        "parser.call_dropped": {"finish-reason-mismatch", "tool-choice-violated"},
        "parser.reasoning_in_content": {"reasoning-markup-in-content", "reasoning-missing"},
        "parser.truncated_args": {"tool-call-args-invalid-json"},
        "engine.queue_full": {"http-server-error"},
        "engine.error_500": {"http-server-error"},
        "engine.error_mid_stream": {"stream-error-frame"},
        "engine.reset_mid_stream": {"transport-error"},
        # the caller asked for JSON and the engine was never told: the caller's answer is not JSON
        "response_format_stripped": {"gateway-request-changed", "json-output-invalid"},
        "history_merged": {"gateway-request-changed"},
        # the engine sees the history's calls without their results
        "tool_messages_dropped": {"gateway-request-changed", "request-tool-call-unanswered"},
        "reasoning_dropped": {"gateway-reasoning-dropped"},
        "reasoning_renamed": {"gateway-reasoning-renamed"},
        "reasoning_reshaped": {"gateway-reasoning-reshaped"},
        "reasoning_merged": {"gateway-reasoning-merged", "gateway-content-changed", "json-output-invalid"},
        "tool_index_zero": {"gateway-tool-calls-changed", "stream-tool-index-reuse", "stream-tool-index-gap"},
        "tool_index_from_one": {"gateway-tool-calls-changed", "stream-tool-index-gap"},
        "id_every_delta": {"gateway-tool-calls-changed", "stream-tool-id-repeated"},
        # a K2 id (functions.NAME:IDX) replaced by call_...: also another id shape at the caller
        "ids_rewritten": {"gateway-tool-calls-changed", "tool-call-id-format"},
        "args_double_encoded": {"gateway-tool-calls-changed", "tool-call-args-not-object"},
        "stream_buffered": {"gateway-stream-buffered"},
        # a frame a client cannot read loses what it carried: the usage chunk, the [DONE]
        "sse_split_frames": {"stream-malformed-frame", "gateway-usage-changed", "stream-usage-missing"},
        "sse_no_data_prefix": {
            "stream-malformed-frame",
            "gateway-usage-changed",
            "stream-usage-missing",
            "stream-done-missing",
        },
        "done_missing": {"stream-done-missing"},
        "done_doubled": {"stream-done-repeated"},
        "error_hidden": {"gateway-error-hidden"},
        # at the caller tap, a tool call answer ending in stop is also finish-reason-mismatch, which
        # attribution puts on the gateway when the engine tap was right
        "finish_reason_changed": {"gateway-finish-reason-changed", "finish-reason-mismatch"},
        "usage_dropped": {"gateway-usage-changed", "stream-usage-missing"},
        "usage_recomputed": {"gateway-usage-changed"},
        "retry_duplicates": {"gateway-content-changed", "json-output-invalid"},
    }.items()
}

#: the party the catalogue blames for a simulator fault, where the simulator's name says another: a
#: call left in reasoning is the parser's, because vLLM 0.32's parsers end the reasoning where a call
#: opens (vllm/parser/kimi_k2.py, qwen3.py); JSON output that breaks the requested format is the
#: engine's, because vLLM decodes under it (structured outputs)
BLAME: dict[str, str] = {"model.call_in_think": "parser", "model.bad_json_output": "engine"}

#: rules that compare two exchanges (a streamed and a non-streamed twin): any fault of the blamed
#: side on either twin explains them, since either twin's fault makes the two answers differ
CONSEQUENCES = frozenset({"stream-nonstream-mismatch"})

_ID = re.compile(rb'"id"\s*:\s*"(chatcmpl-[^"]+)"')


@dataclass(slots=True)
class ClassScore:
    fault: str
    blame: str
    injected: int = 0  # exchanges where it changed the wire and the wire shows it
    hidden: int = 0  # exchanges where it changed the bytes but no reader can tell
    found: int = 0  # of the injected: named by an explained finding
    flagged: int = 0  # exchanges with a finding of this class's rules on this side
    correct: int = 0  # of the flagged: the class was injected there
    hidden_why: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.correct / self.flagged if self.flagged else None

    @property
    def recall(self) -> float | None:
        return self.found / self.injected if self.injected else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fault": self.fault,
            "blame": self.blame,
            "injected": self.injected,
            "not_observable": self.hidden,
            "found": self.found,
            "flagged": self.flagged,
            "correct": self.correct,
            "precision": self.precision,
            "recall": self.recall,
            "not_observable_why": sorted(set(self.hidden_why)),
        }


@dataclass(slots=True)
class TruthScore:
    classes: list[ClassScore]
    #: findings no injected fault explains and whose rule belongs to no class of their side
    unexplained: list[dict[str, Any]]
    #: truth lines whose exchange the capture does not have
    unmatched_truth: int = 0

    @property
    def perfect(self) -> bool:
        return not self.unexplained and all(
            c.precision in (None, 1.0) and c.recall in (None, 1.0) for c in self.classes
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "classes": [c.to_dict() for c in self.classes],
            "unexplained": self.unexplained,
            "unmatched_truth": self.unmatched_truth,
            "perfect": self.perfect,
        }

    def table(self) -> list[str]:
        """The per-class table as Markdown lines."""
        out = [
            "| fault class | blame | injected | found | flagged | correct | precision | recall | not observable |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.classes:
            out.append(
                f"| `{c.fault}` | {c.blame} | {c.injected} | {c.found} | {c.flagged} | {c.correct} | "
                f"{_num(c.precision)} | {_num(c.recall)} | {c.hidden} |"
            )
        for u in self.unexplained:
            out.append(
                f"| unexplained `{u['rule']}` | {u['fault']} | 0 | 0 | {u['exchanges']} | 0 | 0.00 | - | 0 |"
            )
        return out


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _completion_id(ex: Exchange) -> str | None:
    if ex.response is None:
        return None
    m = _ID.search(ex.response.content[:65536])
    return m.group(1).decode("utf-8", "replace") if m else None


def _keys(exchanges: list[Exchange]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """exchange id -> pair key; and the indexes a truth line joins by (correlation, completion id).
    The key is the correlation id where a tap has one, else the completion id (a gateway that drops
    the header still forwards vLLM's id)."""
    by_corr: dict[str, str] = {}
    by_cid: dict[str, str] = {}
    key: dict[str, str] = {}
    for ex in sorted(exchanges, key=lambda e: e.correlation is None):
        cid = _completion_id(ex)
        if ex.correlation:
            k = by_corr.setdefault(ex.correlation, "corr:" + ex.correlation)
        elif cid is not None:
            k = by_cid.get(cid, "cid:" + cid)
        else:
            k = "ex:" + ex.id
        key[ex.id] = k
        if cid is not None:
            by_cid.setdefault(cid, k)
    return key, by_corr, by_cid


def score_truth(
    exchanges: Iterable[Exchange], findings: Iterable[Finding], truth: Iterable[dict[str, Any]]
) -> TruthScore:
    exs = list(exchanges)
    key, by_corr, by_cid = _keys(exs)
    twin: dict[str, str] = {}
    for tw in pair_twins([build_view(e) for e in exs]):
        a, b = key[tw.streamed.id], key[tw.plain.id]
        twin[a], twin[b] = b, a

    # key -> {(fault, blame): observable}
    injected: dict[str, dict[tuple[str, str], bool]] = {}
    classes: dict[tuple[str, str], ClassScore] = {}
    unmatched = 0
    for line in truth:
        corr, cid = line.get("correlation"), line.get("completion_id")
        k = (by_corr.get(corr) if corr else None) or (by_cid.get(cid) if cid else None)
        if k is None:
            unmatched += 1
            k = "truth:" + json.dumps([corr, cid])
        for f in line.get("faults") or []:
            ident = (str(f["fault"]), BLAME.get(str(f["fault"]), str(f["blame"])))
            c = classes.setdefault(ident, ClassScore(*ident))
            seen = injected.setdefault(k, {})
            seen[ident] = seen.get(ident, False) or bool(f.get("observable", True))
            if not f.get("observable", True):
                c.hidden_why.append(str(f.get("why", "")))

    for faults in injected.values():
        for ident, observable in faults.items():
            if observable:
                classes[ident].injected += 1
            else:
                classes[ident].hidden += 1

    found: dict[tuple[str, str], set[str]] = {}
    flagged: dict[tuple[str, str], set[str]] = {}
    unexplained: dict[tuple[str, str], set[str]] = {}
    for f in findings:
        if str(f.severity) not in ("error", "warning") or not f.exchange_id or f.exchange_id not in key:
            continue
        k, blame = key[f.exchange_id], str(f.fault)
        near = [k] + ([twin[k]] if f.rule in CONSEQUENCES and k in twin else [])
        explained = False
        for at in near:
            for ident in injected.get(at, {}):
                fault, side = ident
                direct = at == k and f.rule in RULES.get(fault, ())
                if side == blame and (direct or f.rule in CONSEQUENCES):
                    explained = True
                    flagged.setdefault(ident, set()).add(k)
                    if direct:  # recall counts the class's own rules only, not a twin's echo
                        found.setdefault(ident, set()).add(at)
        if explained:
            continue
        # a false alarm: charged to every class of this side whose rules include it
        charged = [
            ident for ident, c in classes.items() if c.blame == blame and f.rule in RULES.get(c.fault, ())
        ]
        for ident in charged:
            flagged.setdefault(ident, set()).add(k)
        if not charged:
            unexplained.setdefault((f.rule, blame), set()).add(k)

    for ident, c in classes.items():
        hit = flagged.get(ident, set())
        c.flagged = len(hit)
        c.correct = sum(
            1 for k in hit if ident in injected.get(k, {}) or ident in injected.get(twin.get(k, ""), {})
        )
        c.found = sum(1 for k in found.get(ident, set()) if injected.get(k, {}).get(ident))
    order = {"model": 0, "parser": 1, "engine": 2, "gateway": 3}
    return TruthScore(
        classes=sorted(classes.values(), key=lambda c: (order.get(c.blame, 9), c.fault)),
        unexplained=[
            {"rule": r, "fault": b, "exchanges": len(ks)} for (r, b), ks in sorted(unexplained.items())
        ],
        unmatched_truth=unmatched,
    )
