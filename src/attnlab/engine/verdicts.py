"""Verdicts: what a claim's rule decides, the predictions it holds the data against, its planted
controls, the open knobs it maps and how a map's cells combine (see :mod:`attnlab.engine.protocol`)."""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from attnlab.engine.grid import jsonable
from attnlab.engine.points import Row

__all__ = [
    "GRADES",
    "NO_PERTURBATION",
    "STATUSES",
    "VERDICTS",
    "Cell",
    "Control",
    "Grade",
    "Knob",
    "Part",
    "Predict",
    "Status",
    "Verdict",
    "VerdictFn",
    "cell_name",
    "combine_cells",
    "render",
    "render_or_say_why",
]

#: What a claim's verdict function returns.
VERDICTS = ("holds", "fails", "inconclusive")
#: What the engine shows: a verdict, or ``depends`` when the cells of an open knob disagree.
STATUSES = (*VERDICTS, "depends")
#: The kind of evidence a check is: the code, the numerics of one theory, or a paper's statement.
GRADES = ("identity", "numerics", "evidence")

Status = Literal["holds", "fails", "inconclusive", "depends"]
Grade = Literal["identity", "numerics", "evidence"]


# ------------------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class Verdict:
    """holds / fails / inconclusive, the numbers that decided it, the tolerance used.

    ``regime`` is empty when the statement's regime applies, else the reason the verdict is
    inconclusive (outside the regime, or the deciding quantity on the edge of the grid).
    ``note`` holds short extra facts; the prose comes from the claim's ``explain`` template.
    ``branch`` names the branch of the rule that decided ("exponent", "size-0", "pooled CI", ...);
    ``band`` is the verdict's tolerance as a fraction of its prediction (0.03 for ±3%), where the rule
    has one; ``parts`` gives the outcome of each declared :class:`Part` of another grade.
    A verdict function returns holds, fails or inconclusive; ``depends`` is the engine's, for a map.
    """

    status: Status
    numbers: Mapping[str, Any]
    tolerance: str
    note: str = ""
    regime: str = ""
    branch: str = ""
    band: float | None = None
    parts: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status: expected one of {', '.join(STATUSES)}, got {self.status!r}")
        if self.band is not None and not (self.band >= 0 and self.band == self.band):
            raise ValueError(f"band: expected a non-negative fraction of the prediction, got {self.band!r}")
        bad = [k for k, v in self.parts.items() if v not in VERDICTS]
        if bad:
            raise ValueError(f"parts: expected outcomes among {', '.join(VERDICTS)}, got {bad[0]!r}")
        if self.regime and self.status != "inconclusive":
            raise ValueError(f"regime: a verdict outside its regime must be inconclusive, got {self.status}")

    @classmethod
    def outside(cls, reason: str, numbers: Mapping[str, Any], tolerance: str = "-") -> Verdict:
        """Inconclusive because the setting is outside the statement's regime (``reason`` says how)."""
        return cls("inconclusive", numbers, tolerance, "", reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "numbers": jsonable(dict(self.numbers)),
            "tolerance": self.tolerance,
            "note": self.note,
            "regime": self.regime,
            "branch": self.branch,
            "band": self.band,
            "parts": dict(self.parts),
        }


class Predict:
    """Passes each named theory-side prediction through, scaled by ``scale[name]`` (default 1).

    A verdict calls ``pred("beta_star", value)`` for every prediction it holds the data against;
    ``attnlab claims power`` calls the verdict again with one prediction scaled by ``1 ± ε``.
    Arrays are scaled elementwise.
    """

    def __init__(self, scale: Mapping[str, float] | None = None):
        self.scale = dict(scale or {})

    def __call__(self, name: str, value: Any) -> Any:
        s = self.scale.get(name)
        if s is None:
            return value
        if isinstance(value, (list, tuple)):
            return type(value)(v * s for v in value)
        return value * s

    def __repr__(self) -> str:
        return f"Predict({self.scale})"


#: The identity: every prediction as computed.
NO_PERTURBATION = Predict()


@dataclass(frozen=True)
class Control:
    """A planted variant of the test setting that differs in one named knob.

    ``expect`` is "fails" for a negative control (the statement is false there by construction) and
    "holds" for a positive one (true by construction). ``set`` holds the parameter values that make
    the variant; ``why`` says why its outcome is known in advance.
    """

    expect: Literal["holds", "fails"]
    set: Mapping[str, Any]
    why: str

    @property
    def knob(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.set.items())

    @property
    def kind(self) -> str:
        return "negative" if self.expect == "fails" else "positive"


@dataclass(frozen=True)
class Knob:
    """A knob the statement leaves open, mapped over ``values`` (a list, or one list per profile).

    The knob's name is a ``Params`` field. Each value is a cell: the test grid with that field set to
    the value, decided by the claim's own rule. The test setting's value is a cell too (its rows are
    the test's, not run twice). ``why`` says what the statement leaves open.
    """

    values: Sequence[Any] | Mapping[str, Sequence[Any]]
    why: str

    def values_for(self, profile: str) -> list[Any]:
        if isinstance(self.values, Mapping):
            return list(self.values.get(profile, ()))
        return list(self.values)


@dataclass(frozen=True)
class Part:
    """A part of a claim's check of another grade than the claim's (a closed form against the solver
    beside the simulations that decide). ``what`` says what it checks."""

    grade: Grade
    what: str


@dataclass(frozen=True)
class Cell:
    """One cell of a knob's map: the knob, its value, and the verdict there."""

    knob: str
    value: Any
    verdict: Verdict
    test: bool = False  # the test setting's own value

    @property
    def name(self) -> str:
        return cell_name(self.knob, self.value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "knob": self.knob,
            "value": jsonable(self.value),
            "status": self.verdict.status,
            "branch": self.verdict.branch,
            "test": self.test,
            "note": self.verdict.regime or "",
            "numbers": jsonable(dict(self.verdict.numbers)),
        }


def cell_name(knob: str, value: Any) -> str:
    import json

    v = value if isinstance(value, str) else json.dumps(jsonable(value), separators=(",", ":"))
    return f"{knob}={v}"


def _where(cells: Sequence[Cell], status: str) -> str:
    by_knob: dict[str, list[str]] = {}
    for c in cells:
        if c.verdict.status == status:
            by_knob.setdefault(c.knob, []).append(c.name.split("=", 1)[1])
    return "; ".join(f"{k} = {', '.join(v)}" for k, v in by_knob.items())


def combine_cells(test: Verdict, cells: Sequence[Cell]) -> Verdict:
    """The claim's verdict over its map: holds where every cell holds, fails where every cell fails.

    A map with cells that hold and cells that fail *depends*, and its note says where each; a map
    whose cells agree except for inconclusive ones is inconclusive (the map says which cells could
    not decide). With no knobs the test verdict stands. The test's numbers, branch and band are kept.
    """
    if not cells:
        return test
    statuses = {c.verdict.status for c in cells}
    where = {s: _where(cells, s) for s in VERDICTS}
    parts = [f"{s} for {where[s]}" for s in VERDICTS if where[s]]
    text = "; ".join(parts)
    if statuses == {test.status} and test.status in ("holds", "fails"):
        return dataclasses.replace(test, note=f"{test.note} Map: {text}.".strip())
    if {"holds", "fails"} <= statuses:
        note = f"depends: {text}. {test.note}".strip()
        return dataclasses.replace(test, status="depends", note=note, regime="")
    if test.status == "inconclusive":
        return dataclasses.replace(test, note=f"{test.note} Map: {text}.".strip())
    return dataclasses.replace(
        test,
        status="inconclusive",
        regime=f"not every cell of the map decides ({text})",
        note=f"{test.note} Map: {text}.".strip(),
    )


VerdictFn = Callable[..., Verdict]


class _Fmt(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return "n/a"
        try:
            return super().format_field(value, format_spec)
        except (ValueError, TypeError):
            return str(value)

    def get_value(self, key, args, kwargs):  # noqa: ANN001 - string.Formatter's signature
        if isinstance(key, str) and key not in kwargs:
            return "{" + key + "}"
        return super().get_value(key, args, kwargs)


def render(template: str, numbers: Mapping[str, Any]) -> str:
    """Fill ``template`` from ``numbers`` (``{name:.3f}``; a missing name stays as written)."""
    if not template:
        return ""
    return _Fmt().vformat(template, (), jsonable(dict(numbers)))


def render_or_say_why(template: str, numbers: Mapping[str, Any], rows: Sequence[Row], note: str) -> str:
    """The reading ``template`` filled from ``numbers``; when the numbers lack a name it needs (every
    point failed, say), no half-filled text: what happened instead, unless the verdict's note says it."""
    names = {f[1].split(".")[0].split("[")[0] for f in string.Formatter().parse(template or "") if f[1]}
    missing = sorted(names - set(numbers))
    if not missing:
        return render(template, numbers)
    if note:
        return ""
    failed = sum(not r.ok for r in rows)
    if failed:
        return f"{failed} of {len(rows)} points failed; the rest cannot give the reading."
    return f"The rows do not give the reading (no {', '.join(missing[:3])})."
