"""Typed parameters: ``--set`` values checked against a claim's frozen ``Params`` dataclass.

Every value given for a field (by ``--set``, by a profile's grid, a control or a knob) is checked twice
before anything runs or is stored: its type against the annotation, then its value against the field's
domain. A field declares its domain with ``typing.Annotated``, or the class lists them in a ``DOMAINS``
mapping (read along the class's bases, so a subclass that changes defaults keeps them)::

    from typing import Annotated
    from attnlab.engine.params import In, Items, OneOf

    @dataclass(frozen=True)
    class Params:
        n: Annotated[int, In("[2, inf)", cap=4096)] = 16        # tokens
        dt: Annotated[float, In("(0, 1]")] = 0.05                # RK4 step
        strengths: Annotated[list[float], In("(0, inf)", length="[1, 16]")] = ...
        target: Annotated[str, OneOf("sine", "radial")] = "sine"
        setting: Annotated[tuple[Any, ...], Items(In("[1, inf)"), OneOf("a", "b"))] = (8, "a")
        beta: float = 1.0                                        # inverse temperature

        DOMAINS = {"beta": In("(0, inf)")}  # the same, listed after the fields

* ``In(interval, cap=None, length=None, why="")``: a number in ``interval``, written as in mathematics
  with open ``(`` / ``)`` or closed ``[`` / ``]`` ends and ``inf`` for no bound. On a list field it
  applies to every element, and ``length`` (an interval of integers) bounds the list's length.
  ``cap`` bounds a cost-bearing field (tokens, batch, time, steps) far above any setting the claim
  uses but below absurd work: a value above it is refused as "at most CAP (a cap on one point's
  work)", so ``batch=1e10`` or ``t1=1e12`` never starts a run that would not end.
* ``OneOf(*choices)``: the allowed strings of a plain ``str`` field (a ``Literal`` annotation says
  the same by itself); on a list of strings, of every element.
* ``Items(*domains)``: a tuple whose positions have their own domains (``None``: only the generic
  checks).
* ``COSTS = (Cost("batch * n * n * t1 / dt", 1e12, "score entries over a trajectory"),)``: caps on work
  that grows with several fields together, checked on every point of a run (defaults included)
  before the store is opened.

Generic checks hold for every field, declared or not: a float (alone or in a list) is finite unless
its interval is closed at an infinite end (``"[0, inf]"``); an integer lies in the store's signed
64-bit range; a string and a list are non-empty unless ``length`` admits 0. A refusal is one line
naming the field, the domain and the value: ``--set dt: expected a number in (0, 1], got 0``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from attnlab.engine.grid import CELL_KEY, CONTROL_KEY, REP_KEY

__all__ = [
    "Cost",
    "In",
    "Items",
    "OneOf",
    "axis_values",
    "check_costs",
    "check_params",
    "check_value",
    "domain_of",
    "field_types",
    "type_name",
]

_INT64 = (-(2**63), 2**63 - 1)
#: Longest string a field takes (a name, a choice), so that no refusal or store row carries pages of text.
MAX_STRING = 200
_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])\s*$")


def _bound(text: str) -> float:
    t = text.strip().lower().replace("∞", "inf")
    if t in ("inf", "+inf"):
        return math.inf
    if t == "-inf":
        return -math.inf
    return float(t)


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


@dataclasses.dataclass(frozen=True)
class Interval:
    """``[lo, hi]`` with open or closed ends, parsed from its mathematical notation."""

    lo: float
    hi: float
    lo_open: bool
    hi_open: bool

    @classmethod
    def parse(cls, text: str) -> Interval:
        m = _INTERVAL.match(text)
        if m is None:
            raise ValueError(f"domain: expected an interval such as '[0, inf)' or '(0, 1]', got {text!r}")
        try:
            lo, hi = _bound(m[2]), _bound(m[3])
        except ValueError:
            raise ValueError(
                f"domain: expected an interval of numbers such as '[0, 1)', got {text!r}"
            ) from None
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ValueError(f"domain: expected an interval with lo <= hi, got {text!r}")
        return cls(lo, hi, m[1] == "(", m[4] == ")")

    def __contains__(self, x: float) -> bool:
        if math.isnan(x):
            return False
        above = x > self.lo if self.lo_open else x >= self.lo
        below = x < self.hi if self.hi_open else x <= self.hi
        return above and below

    @property
    def allows_inf(self) -> bool:
        return (math.isinf(self.lo) and not self.lo_open) or (math.isinf(self.hi) and not self.hi_open)

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{_fmt(self.lo)}, {_fmt(self.hi)}{')' if self.hi_open else ']'}"


@dataclasses.dataclass(frozen=True)
class In:
    """A number's domain (of a list field: each element's), with an optional cap and list length."""

    interval: str = "(-inf, inf)"
    cap: float | None = None
    length: str | None = None
    why: str = ""

    def __post_init__(self) -> None:
        Interval.parse(self.interval)  # a malformed declaration fails when the claim module is imported
        if self.length is not None:
            Interval.parse(self.length)
        if self.cap is not None and not (isinstance(self.cap, (int, float)) and self.cap > 0):
            raise ValueError(f"domain: expected a positive cap, got {self.cap!r}")

    @property
    def span(self) -> Interval:
        return Interval.parse(self.interval)


@dataclasses.dataclass(frozen=True, init=False)
class OneOf:
    """The allowed strings of a ``str`` field (or of each element of a list of strings)."""

    choices: tuple[str, ...]
    length: str | None = None

    def __init__(self, *choices: str, length: str | None = None):
        if not choices or not all(isinstance(c, str) for c in choices):
            raise ValueError(f"domain: expected one or more strings, got {choices!r}")
        object.__setattr__(self, "choices", tuple(choices))
        object.__setattr__(self, "length", length)


@dataclasses.dataclass(frozen=True, init=False)
class Items:
    """Positional domains of a tuple field (``None`` at a position: generic checks only)."""

    domains: tuple[In | OneOf | None, ...]

    def __init__(self, *domains: In | OneOf | None):
        object.__setattr__(self, "domains", tuple(domains))


Domain = In | OneOf | Items


@dataclasses.dataclass(frozen=True)
class Cost:
    """A cap on work that grows with several fields: the arithmetic expression ``expr`` of field names
    (``"batch * n * n * t1 / dt"``) at most ``cap`` for every point; ``what`` says what it counts."""

    expr: str
    cap: float
    what: str = ""

    def __post_init__(self) -> None:
        import ast

        tree = ast.parse(self.expr, mode="eval")  # a malformed declaration fails at import
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.Constant, ast.operator,
                   ast.unaryop)  # fmt: skip
        bad = [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, allowed)]
        if bad:
            raise ValueError(f"cost: expected an arithmetic expression of field names, got {self.expr!r}")
        object.__setattr__(self, "_names", sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}))
        object.__setattr__(self, "_code", compile(tree, "<cost>", "eval"))

    @property
    def names(self) -> list[str]:
        return list(self._names)  # type: ignore[attr-defined]

    def value(self, values: Mapping[str, Any]) -> float | None:
        """The expression at ``values`` (None when a name is missing or not a number)."""
        env = {k: values.get(k) for k in self.names}
        if not all(_is_num(v) for v in env.values()):
            return None
        try:
            return float(eval(self._code, {"__builtins__": {}}, env))  # type: ignore[attr-defined]  # noqa: S307
        except (ZeroDivisionError, OverflowError):
            return math.inf


def check_costs(params_cls: type, values: Mapping[str, Any], where: str = "--set") -> None:
    """Refuse a point whose work exceeds one of the class's ``COSTS`` (read along its bases)."""
    for klass in params_cls.__mro__:
        for cost in vars(klass).get("COSTS", ()):
            v = cost.value(values)
            if v is not None and not (v <= cost.cap):
                given = ", ".join(f"{k}={values[k]!r}" for k in cost.names)
                what = f"{cost.what}, " if cost.what else ""
                expected = f"{cost.expr} <= {_fmt(cost.cap)} ({what}a cap on one point's work)"
                raise ValueError(
                    f"{where} {', '.join(cost.names)}: expected {expected}, got {v:.3g} at {given}"
                )


def field_types(params_cls: type) -> dict[str, Any]:
    """The fields' types, without their ``Annotated`` domains."""
    return typing.get_type_hints(params_cls)


def domain_of(params_cls: type) -> dict[str, Domain]:
    """The declared domain of each field that has one (``DOMAINS`` of the class and its bases, then
    ``Annotated`` metadata); a ``DOMAINS`` key that names no field is refused."""
    out: dict[str, Domain] = {}
    fields = {f.name for f in dataclasses.fields(params_cls)}
    for klass in reversed(params_cls.__mro__):
        table = vars(klass).get("DOMAINS")
        if not table:
            continue
        for name, dom in dict(table).items():
            if name not in fields or not isinstance(dom, (In, OneOf, Items)):
                raise ValueError(
                    f"DOMAINS of {klass.__module__}.{klass.__qualname__}: expected a field name and an "
                    f"In, OneOf or Items, got {name!r}: {dom!r}"
                )
            out[name] = dom
    for name, tp in typing.get_type_hints(params_cls, include_extras=True).items():
        if typing.get_origin(tp) is typing.Annotated:
            for meta in tp.__metadata__:
                if isinstance(meta, (In, OneOf, Items)):
                    out[name] = meta
    return out


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


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, shortened in the middle when long (a refusal stays one readable line)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}…{text[-12:]} ({len(text)} characters)"


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _phrase(integer: bool, plural: bool, finite: bool = False, extra: str = "") -> str:
    """``an integer in [2, inf)``, ``a finite number``, ``finite numbers in (0, 1]``."""
    noun = ("integers" if plural else "integer") if integer else ("numbers" if plural else "number")
    text = ("finite " if finite else "") + noun + extra
    if plural:
        return text
    return ("an " if text[0] in "aeiou" else "a ") + text


def _scalar_problem(
    x: Any, dom: In | OneOf | None, plural: bool = False, integer: bool = False
) -> str | None:
    """What ``x`` was expected to be, when it is outside ``dom`` or the generic checks; else None.

    ``integer``: the field holds integers (the refusal says "an integer", even for a value 0 given to it).
    """
    if isinstance(dom, OneOf):
        if isinstance(x, str) and x not in dom.choices:
            return "one of " + ", ".join(repr(c) for c in dom.choices)
        return None
    if isinstance(x, str):
        if not x.strip():
            return "non-empty strings" if plural else "a non-empty string"
        if len(x) > MAX_STRING:
            return ("strings" if plural else "a string") + f" of at most {MAX_STRING} characters"
        return None
    if not _is_num(x):
        return None
    if isinstance(x, int) and not _INT64[0] <= x <= _INT64[1]:
        return _phrase(True, plural, extra=" in [-2^63, 2^63 - 1] (the store's integer range)")
    if isinstance(dom, In):
        span = dom.span
        why = f" ({dom.why})" if dom.why else ""
        if math.isnan(x) or (math.isinf(x) and not span.allows_inf):
            return _phrase(integer, plural, finite=True, extra=f" in {span}{why}")
        if x not in span:
            return _phrase(integer, plural, extra=f" in {span}{why}")
        if dom.cap is not None and x > dom.cap:
            cap = f" in {span}, at most {_fmt(dom.cap)} (a cap on one point's work)"
            return _phrase(integer, plural, extra=cap)
        return None
    if isinstance(x, float) and not math.isfinite(x):
        return _phrase(integer, plural, finite=True)
    return None


def _holds_int(tp: Any) -> bool:
    """Whether a field's values (or a list field's elements) are integers."""
    if tp is int:
        return True
    args = [a for a in typing.get_args(tp) if a is not Ellipsis and a is not type(None)]
    return bool(args) and all(_holds_int(a) for a in args)


def _length_problem(value: Sequence[Any], length: str | None) -> str | None:
    span = Interval.parse(length) if length is not None else Interval(1, math.inf, False, True)
    if len(value) in span:
        return None
    if span.lo == span.hi:
        return f"a list of {_fmt(span.lo)} values"
    if span == Interval(1, math.inf, False, True):
        return "a non-empty list"
    return f"a list whose length is in {span}"


def check_value(name: str, value: Any, dom: Domain | None, where: str = "--set", tp: Any = Any) -> None:
    """Raise one line ``WHERE NAME: expected DOMAIN, got VALUE`` when ``value`` is outside ``dom``.

    ``value`` has passed the type check against ``tp``; ``dom`` is the field's declared domain or None
    (the generic checks only).
    """
    integer = _holds_int(tp)

    def fail(expected: str, detail: str = "") -> None:
        raise ValueError(f"{where} {name}: expected {expected}, got {_shown(value)}{detail}")

    if value is None:
        return
    if isinstance(value, (list, tuple)):
        if isinstance(dom, Items):
            if len(value) != len(dom.domains):
                fail(f"a list of {len(dom.domains)} values")
            for i, (x, d) in enumerate(zip(value, dom.domains)):
                why = _scalar_problem(x, d, integer=isinstance(x, int))
                if why:
                    fail(f"{why} at position {i}", f" ({_shown(x, 30)} at position {i})")
            return
        length = dom.length if isinstance(dom, (In, OneOf)) else None
        why = _length_problem(value, length)
        if why:
            fail(why)
        for i, x in enumerate(value):
            item = dom if isinstance(dom, (In, OneOf)) else None
            why = _scalar_problem(x, item, plural=True, integer=integer)
            if why:
                fail(f"a list of {why}", f" (item {i}: {_shown(x, 30)})")
        return
    if isinstance(value, str) and isinstance(dom, In):
        return
    why = _scalar_problem(value, dom if not isinstance(dom, Items) else None, integer=integer)
    if why:
        fail(why)


def check_params(params_cls: type, given: Mapping[str, Any], where: str = "--set") -> dict[str, Any]:
    """Check names, types and domains of ``given`` against the ``Params`` dataclass; raise one clear line.

    Returns ``given`` with lossless conversions applied. ``rep`` (an int >= 1 when given as an
    override) and ``control`` are the engine's own names.
    """
    hints = field_types(params_cls)
    domains = domain_of(params_cls)
    names = [f.name for f in dataclasses.fields(params_cls)]
    out = {}
    for k, v in given.items():
        if k in (REP_KEY, CONTROL_KEY, CELL_KEY):
            out[k] = v
            continue
        if k not in hints:
            raise ValueError(
                f"{where}: expected a parameter of {params_cls.__module__.rsplit('.', 1)[-1]} "
                f"({', '.join(names + [REP_KEY])}), got {_shown(k)}"
            )
        ok, c = _coerce(v, hints[k])
        if not ok:
            raise ValueError(f"{where} {k}: expected {type_name(hints[k])}, got {_shown(v)}")
        check_value(k, c, domains.get(k), where, hints[k])
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
