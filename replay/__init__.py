"""wirecheck.replay: loaders for captured traffic (JSONL, HAR, mitmproxy flows), re-sending to a
target or two side by side, and the comparison of their answers."""

from ._loaders import (
    CaptureLimits,
    detect_format,
    load_capture,
    load_har,
    load_jsonl,
    load_mitm,
    read_capture,
)
from ._replay import ReplayDiff, ReplayResult, compare_answers, origin_form_problem, replay, target_url
from ._sort import in_time_order

__all__ = [
    "CaptureLimits",
    "ReplayDiff",
    "ReplayResult",
    "compare_answers",
    "detect_format",
    "in_time_order",
    "load_capture",
    "load_har",
    "load_jsonl",
    "load_mitm",
    "origin_form_problem",
    "read_capture",
    "replay",
    "target_url",
]
