"""Typed parameters: ``--set`` values checked against a claim's frozen ``Params`` dataclass."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from attnlab.engine.grid import CONTROL_KEY, REP_KEY

__all__ = ["check_params", "axis_values", "field_types", "type_name"]


def field_types(params_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(params_cls)


def type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(tp))
    if origin in (list, tuple, Sequence):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        return f"a list of {type_name(args[0])}" if args else "a list"
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any) -> tuple[bool, Any]:
    """(ok, value) with ``value`` converted where lossless (an int where a float is asked for)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return True, value
    if origin is Literal:
        return (value in typing.get_args(tp)), value
    if origin in (typing.Union, types.UnionType):
        for a in typing.get_args(tp):
            ok, v = _coerce(value, a)
            if ok:
                return True, v
        return False, value
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            return False, value
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if not args:
            return True, list(value)
        out = []
        for i, v in enumerate(value):
            ok, c = _coerce(v, args[min(i, len(args) - 1)] if origin is tuple else args[0])
            if not ok:
                return False, value
            out.append(c)
        return True, out
    if origin in (dict, Mapping):
        return isinstance(value, dict), value
    if tp is type(None):
        return value is None, value
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if isinstance(value, bool):
            return False, value
        if isinstance(value, int):
            return True, value  # kept as given: an int literal in a grid hashes as written
        return isinstance(value, float), value
    if tp is str:
        return isinstance(value, str), value
    return isinstance(value, tp), value


def check_params(params_cls: type, given: Mapping[str, Any], where: str = "--set") -> dict[str, Any]:
    """Check names and types of ``given`` against the ``Params`` dataclass; raise one clear line.

    Returns ``given`` with lossless conversions applied. ``rep`` (an int >= 1 when given as an
    override) and ``control`` are the engine's own names.
    """
    hints = field_types(params_cls)
    names = [f.name for f in dataclasses.fields(params_cls)]
    out = {}
    for k, v in given.items():
        if k in (REP_KEY, CONTROL_KEY):
            out[k] = v
            continue
        if k not in hints:
            raise ValueError(
                f"{where}: expected a parameter of {params_cls.__module__.rsplit('.', 1)[-1]} "
                f"({', '.join(names + [REP_KEY])}), got {k!r}"
            )
        ok, c = _coerce(v, hints[k])
        if not ok:
            raise ValueError(f"{where} {k}: expected {type_name(hints[k])}, got {v!r}")
        out[k] = c
    return out


def axis_values(value: Any, tp: Any) -> list[Any] | None:
    """The values of an override that is an axis (a list for a scalar field), else None."""
    origin = typing.get_origin(tp)
    if isinstance(value, list) and origin not in (list, tuple, Sequence):
        if origin in (typing.Union, types.UnionType) and any(
            typing.get_origin(a) in (list, tuple, Sequence) for a in typing.get_args(tp)
        ):
            return None
        return value
    return None
