"""Command-line options derived from the config dataclasses they fill.

A field named in a command's table becomes ``--field-name`` (or the flag the table gives), with the
field's type and default; a field without a default is a required option. ``build`` then fills the
dataclass from the parsed options by name, so an option and its field cannot drift apart: no
hand-written ``Config(x=args.x, y=args.y, ...)`` mapping, and no second default to keep in step.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Opt", "add_fields", "build"]


@dataclass(frozen=True)
class Opt:
    """How one field shows on the command line: its help, and a flag when not ``--field-name``.

    A bool field that defaults to True needs a ``--no-...`` flag (it is stored as False)."""

    help: str | None = None
    flag: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def _scalar(hint: Any) -> Any:
    """``int | None`` -> int; other unions of one type and None likewise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def add_fields(parser: argparse._ActionsContainer, cls: type, table: dict[str, Opt]) -> None:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, opt in table.items():
        f = fields[name]  # a KeyError here is a typo in a command's table
        kind = _scalar(hints[name])
        flag = opt.flag or "--" + name.replace("_", "-")
        kw: dict[str, Any] = {"dest": name, "help": opt.help}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kw["default"] = f.default_factory()
        else:
            kw["required"] = True
        if kind is bool:
            if kw.get("default") is True and not flag.startswith("--no-"):
                raise TypeError(f"{cls.__name__}.{name} defaults to True: give it a --no-... flag")
            kw["action"] = "store_false" if kw.get("default") is True else "store_true"
        elif typing.get_origin(kind) is list:
            # repeatable, and several values at once: --host-info a.xml b.xml --host-info c.xml
            (item,) = typing.get_args(kind)
            kw = {"action": "extend", "nargs": "+", "type": item, **kw}
        elif kind in (int, float, str):
            kw["type"] = kind
            if kind is not str:
                kw["metavar"] = "N" if kind is int else "NUM"
            if kw.get("default") not in (None, ""):
                kw["help"] = f"{opt.help} (default %(default)s)" if opt.help else "default %(default)s"
        else:
            raise TypeError(f"{cls.__name__}.{name}: no command-line form for {kind!r}")
        parser.add_argument(flag, **{**kw, **opt.kwargs})


def build[T](cls: type[T], args: argparse.Namespace, table: dict[str, Opt], **rest: Any) -> T:
    """``cls`` from the parsed options of ``table``, and ``rest`` for the fields built by hand."""
    return cls(**{name: getattr(args, name) for name in table}, **rest)
