from typing import Any

def keep(
    rows: list[tuple[int, str, Any, str, int]], pairs: list[tuple[str, Any]], a: str, b: str, /
) -> tuple[list[tuple[int, str, Any, str, int]], list[tuple[str, Any]], int]: ...
