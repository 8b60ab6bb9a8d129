"""The compiled twin of contracts/_json.py's depth bound (contracts/_json_c.c)."""

def deeper(text: object, bound: int, /) -> bool | None:
    """Whether the text's brackets outside its strings nest deeper than ``bound``; None where the
    text cannot tell (bytes with a NUL, another type)."""
