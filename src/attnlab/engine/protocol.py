"""The claim protocol: what a claim is, as the engine runs it.

A claim is data plus two functions. Each claim lives in its own file,
``attnlab/claims/<area>/<name>.py``, and declares

* ``Params``: a frozen dataclass with typed, commented fields whose defaults are the quick setting;
  grids are grids over its fields, and ``--set`` overrides are checked against it (name and type);
* ``run(point) -> Result``: what one point computes (``point.p`` is the ``Params`` instance);
* ``verdict(rows, pred) -> Verdict``: status and numbers over the rows of the test setting. Every
  theory-side number the verdict holds the data against (a threshold, an exponent, a critical β) is
  passed through ``pred(name, value)``, so ``attnlab claims power`` can re-decide stored rows with each
  prediction scaled by ``1 ± ε`` without recomputing anything;
* ``predictions`` (name -> what it is), or ``controls``: planted settings that differ from the test in
  one named knob, on which the claim's own verdict must come out "fails" (negative) or "holds"
  (positive);
* ``regime``: where the statement is meant to apply; outside it, or when the deciding quantity lands on
  the edge of the grid, the verdict is "inconclusive" with the reason (``Verdict.outside``);
* ``explain``: one template per status; the verdict's prose is rendered from its numbers.

Writing a claim::

    @dataclass(frozen=True)
    class Params:
        n: int = 10        # sample size
        beta: float = 1.0  # inverse temperature

    def run(point: Point) -> Result:
        g = point.generator()                      # seeded from the root seed and the params
        err = ...                                  # compute with point.p.n, point.p.beta, point.device
        return Result(metrics={"rel_err": err}, arrays={"curve": np.array(...)})

    def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
        worst = max(r.metrics["rel_err"] for r in rows)
        return Verdict("holds" if worst < pred("tol", 1e-12) else "fails", {"max_rel_err": worst}, "1e-12")

    CLAIM = Claim(id="paper.name", kind="theorem", paper="A", statement="...", version=1, params=Params,
                  grids={"quick": Grid({"n": [10, 100]}), "full": Grid({"n": [10, 100, 1000]}, seeds=8)},
                  run=run, verdict=verdict, predictions={"tol": "..."},
                  explain={"holds": "worst relative error {max_rel_err:.1e}", ...})

``run`` must be a module-level function (it is sent to worker processes by reference).

What a verdict is worth. Each claim declares its **grade** — ``identity`` (holds by algebra: it checks
the code), ``numerics`` (two computations of the same theory: a closed form against a solver, a
quadrature against particles of the same ODE; it checks the numerics) or ``evidence`` (a theory held
against an independent simulation of the system the statement is about, published data or a real
model). Only ``evidence`` is a verdict on a paper. A claim whose check has parts of other grades lists
them in ``parts`` (name -> :class:`Part`) and may report their outcomes in ``Verdict.parts``; it decides
on its own grade's part.

A statement often leaves knobs open (a kernel scale, how heads are weighted, a time window, the target,
the optimiser). ``knobs`` (Params field -> :class:`Knob`) names them with values to map: every value is
a *cell*, run on the test grid with that one field changed and decided by the same rule. The claim
holds where every cell holds, fails where every cell fails, and otherwise *depends* (a map, not a word;
see :func:`combine_cells`). The verdict function sees one cell's rows at a time, as with controls.

A verdict says which branch of its rule decided (``Verdict.branch``: "exponent", "size-0",
"pooled CI", ...) so that a control counts only when the branch that decides the test decides it too,
and states its tolerance as a fraction of the prediction (``Verdict.band``) so that a flip can be read
against the verdict's own resolution.

Seeds. A point's seed derives from the root seed, the claim id and the parameters the grid (or an
override) states explicitly; defaults filled in from ``Params`` do not enter the seed, so adding a field
with a default never reshuffles the random draws of existing points. The point id hashes the full
parameters (defaults included), the seed and the claim's version, so changing a default recomputes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from attnlab.core.seeding import canonical_json, derive_seed, generator
from attnlab.engine.grid import CELL_KEY, CONTROL_KEY, REP_KEY, Grid, jsonable, parse_override, variant_name
from attnlab.engine.params import axis_values as _axis_values
from attnlab.engine.params import check_costs, check_params, check_value
from attnlab.engine.params import field_types as _hints

__all__ = [
    "CELL_KEY",
    "CONTROL_KEY",
    "GRADES",
    "KINDS",
    "STATUSES",
    "NO_PERTURBATION",
    "PROFILES",
    "REP_KEY",
    "VERDICTS",
    "Claim",
    "Cell",
    "Control",
    "Grid",
    "Knob",
    "Part",
    "Point",
    "Predict",
    "Result",
    "Row",
    "Verdict",
    "check_params",
    "combine_cells",
    "jsonable",
    "parse_override",
    "render",
    "variant_name",
]

KINDS = ("identity", "theorem", "finding")
PROFILES = ("quick", "full")
#: What a claim's verdict function returns.
VERDICTS = ("holds", "fails", "inconclusive")
#: What the engine shows: a verdict, or ``depends`` when the cells of an open knob disagree.
STATUSES = (*VERDICTS, "depends")
#: The kind of evidence a check is: the code, the numerics of one theory, or a paper's statement.
GRADES = ("identity", "numerics", "evidence")

Kind = Literal["identity", "theorem", "finding"]
Status = Literal["holds", "fails", "inconclusive", "depends"]
Grade = Literal["identity", "numerics", "evidence"]


# ------------------------------------------------------------------------------------- points
@dataclass(frozen=True)
class Point:
    """One unit of work: a claim's parameters, its derived seed and where to run it."""

    claim_id: str
    profile: str
    params: Mapping[str, Any]
    seed: int
    version: int
    device: str = "cpu"
    params_cls: type | None = None

    @property
    def point_id(self) -> str:
        """sha256 of (claim id, canonical params, seed, version): the store's key."""
        payload = canonical_json([self.claim_id, jsonable(dict(self.params)), self.seed, self.version])
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def p(self) -> Any:
        """The parameters as the claim's ``Params`` instance (without ``rep`` and ``control``)."""
        if self.params_cls is None:
            raise AttributeError(f"{self.claim_id} declares no Params dataclass")
        names = {f.name for f in dataclasses.fields(self.params_cls)}
        return self.params_cls(**{k: v for k, v in self.params.items() if k in names})

    @property
    def control(self) -> str:
        """The control this point belongs to ('' for the test setting)."""
        return str(self.params.get(CONTROL_KEY, ""))

    @property
    def cell(self) -> str:
        """The cell of an open knob's map this point belongs to ('' for the test setting)."""
        return str(self.params.get(CELL_KEY, ""))

    def generator(self, offset: int = 0) -> torch.Generator:
        """A torch generator seeded from this point's seed (``offset`` gives independent streams)."""
        return generator(derive_seed(self.seed, offset) if offset else self.seed, "cpu")

    def generator_on(self, device: str | None = None, offset: int = 0) -> torch.Generator:
        """As :meth:`generator`, on ``device`` (default: the point's device)."""
        seed = derive_seed(self.seed, offset) if offset else self.seed
        return generator(seed, device or self.device)

    def __getitem__(self, key: str) -> Any:
        return self.params[key]


@dataclass
class Result:
    """What ``run(point)`` returns: numbers (JSON-able scalars, lists, strings) and named arrays."""

    metrics: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Row:
    """A stored point as a verdict or a figure sees it."""

    point_id: str
    params: Mapping[str, Any]
    status: str  # "ok" or "failed"
    metrics: Mapping[str, Any]
    error: str | None = None
    runtime_s: float = 0.0
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def control(self) -> str:
        return str(self.params.get(CONTROL_KEY, ""))

    @property
    def cell(self) -> str:
        """The knob cell (``"c=1"``) this row belongs to; '' for the test setting and controls."""
        return str(self.params.get(CELL_KEY, ""))


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


# ------------------------------------------------------------------------------------- claims
@dataclass(frozen=True)
class Claim:
    """A statement of a paper and how it is checked (see the module docstring)."""

    id: str
    kind: Kind
    paper: str
    statement: str
    version: int
    grids: Mapping[str, Grid]
    run: Callable[[Point], Result]
    verdict: VerdictFn
    params: type | None = None
    description: str = ""
    predictions: Mapping[str, str] = field(default_factory=dict)
    controls: Mapping[str, Control] = field(default_factory=dict)
    regime: str = ""
    explain: Mapping[str, str] = field(default_factory=dict)
    grade: Grade | str = ""
    parts: Mapping[str, Part] = field(default_factory=dict)
    knobs: Mapping[str, Knob] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.kind == "identity" and self.grade in ("", "identity"):
            object.__setattr__(self, "grade", "identity")
        # '' is undeclared: never decisive (every shipped claim declares its grade)
        if self.grade not in (*GRADES, ""):
            raise ValueError(
                f"grade: expected one of {', '.join(GRADES)} for {self.id} (what kind of evidence its "
                f"verdict is), got {self.grade!r}"
            )
        if self.kind == "identity" and self.grade != "identity":
            raise ValueError(f"grade: an identity claim ({self.id}) has grade 'identity', got {self.grade!r}")
        for name, part in self.parts.items():
            if part.grade not in GRADES:
                raise ValueError(
                    f"parts {name}: expected a grade among {', '.join(GRADES)}, got {part.grade!r}"
                )
        missing = [p for p in PROFILES if p not in self.grids]
        if missing:
            raise ValueError(f"grids: expected the profiles {', '.join(PROFILES)}, missing {missing}")
        if self.params is not None:
            if not (dataclasses.is_dataclass(self.params) and self.params.__dataclass_params__.frozen):
                raise ValueError(f"params: expected a frozen dataclass for {self.id}, got {self.params!r}")
            for prof, g in self.grids.items():
                for p in g.expand():
                    check_params(self.params, p, where=f"{self.id} grid {prof!r}")
            for name, c in self.controls.items():
                check_params(self.params, dict(c.set), where=f"{self.id} control {name!r}")
            for name, k in self.knobs.items():
                for prof in PROFILES:
                    for v in k.values_for(prof):
                        check_params(self.params, {name: v}, where=f"{self.id} knob {name!r}")
                    axis = self.grids[prof].axes.get(name)
                    if axis is not None and len(axis) > 1:
                        raise ValueError(
                            f"knobs {name}: expected a field the test grid holds at one value, got an axis "
                            f"{list(axis)} in the {prof!r} grid of {self.id}"
                        )
        elif self.knobs:
            raise ValueError(f"knobs: expected a Params dataclass for {self.id} (knobs are its fields)")
        bad = [s for s in self.explain if s not in VERDICTS]
        if bad:
            raise ValueError(f"explain: expected keys among {', '.join(VERDICTS)}, got {bad}")

    @property
    def module(self) -> str:
        return self.run.__module__

    def check_overrides(self, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate ``--set`` overrides (names and types against ``Params``); one clear line if wrong."""
        overrides = dict(overrides or {})
        if REP_KEY in overrides:
            r = overrides[REP_KEY]
            if not isinstance(r, int) or isinstance(r, bool) or r < 1:
                raise ValueError(f"--set {REP_KEY}: expected an integer >= 1 (seed replicates), got {r!r}")
        if CONTROL_KEY in overrides:
            raise ValueError(f"--set {CONTROL_KEY}: expected a claim parameter, got the reserved name")
        if self.params is None:
            known = set()
            for g in self.grids.values():
                known |= g.names()
            unknown = sorted(set(overrides) - known - {REP_KEY})
            if unknown:
                raise ValueError(
                    f"--set: expected a parameter of {self.id} ({', '.join(sorted(known | {REP_KEY}))}), "
                    f"got {unknown[0]!r}"
                )
            for k, v in overrides.items():  # no Params: the generic checks (finite, non-empty) alone
                if k != REP_KEY:
                    for x in v if isinstance(v, list) else [v]:
                        check_value(k, x, None)
            return overrides
        hints = _hints(self.params)
        out = {}
        for k, v in overrides.items():
            if k == REP_KEY:
                out[k] = v
                continue
            axis = _axis_values(v, hints.get(k, Any)) if k in hints else None
            if (
                axis is None
                and k in hints
                and isinstance(v, list)
                and v
                and all(isinstance(x, list) for x in v)
            ):
                if _axis_values([0], hints[k]) is None:  # a list-typed field: a list of lists is an axis
                    axis = v
            if axis is not None:
                out[k] = [check_params(self.params, {k: a})[k] for a in axis]
                if not axis:
                    raise ValueError(f"--set {k}: expected at least one value, got an empty list")
            else:
                out[k] = check_params(self.params, {k: v})[k]
        return out

    def _list_valued(self, overrides: Mapping[str, Any]) -> frozenset[str]:
        """Typed list fields given one flat list (one value); a list of lists stays an axis."""
        if self.params is None:
            return frozenset()
        hints = _hints(self.params)
        out = set()
        for k, v in overrides.items():
            tp = hints.get(k)
            if tp is None or not isinstance(v, list):
                continue
            if _axis_values(v, tp) is None and not (v and all(isinstance(x, list) for x in v)):
                out.add(k)
        return frozenset(out)

    def _full(self, explicit: Mapping[str, Any]) -> dict[str, Any]:
        if self.params is None:
            return dict(explicit)
        names = {f.name for f in dataclasses.fields(self.params)}
        inst = self.params(**{k: v for k, v in explicit.items() if k in names})
        full = {f.name: getattr(inst, f.name) for f in dataclasses.fields(self.params)}
        full.update({k: v for k, v in explicit.items() if k in names})  # as written (3 stays 3)
        for k in (REP_KEY, CONTROL_KEY, CELL_KEY):
            if k in explicit:
                full[k] = explicit[k]
        return full

    def points(
        self,
        profile: str,
        root_seed: int = 0,
        overrides: Mapping[str, Any] | None = None,
        device: str = "cpu",
        controls: bool = True,
    ) -> list[Point]:
        """Expand the profile's grid (and each control) into points with derived seeds."""
        if profile not in self.grids:
            raise ValueError(f"profile: expected one of {', '.join(self.grids)}, got {profile!r}")
        grid = self.grids[profile]
        overrides = self.check_overrides(overrides)
        lv = self._list_valued(overrides)
        explicit = [dict(p) for p in grid.expand(overrides, lv)]
        if controls:
            for name, c in self.controls.items():
                for p in grid.expand(overrides | dict(c.set), lv | self._list_valued(c.set)):
                    explicit.append(p | {CONTROL_KEY: name})
            for knob, value in self.map_cells(profile, overrides):
                kset = {knob: value}
                for p in grid.expand(overrides | kset, lv | self._list_valued(kset)):
                    explicit.append(p | {CELL_KEY: cell_name(knob, value)})
        out, seen = [], set()
        for params in explicit:
            params = jsonable(params)
            seed = derive_seed(root_seed, self.id, canonical_json(params))
            full = jsonable(self._full(params))
            if self.params is not None:
                check_costs(self.params, full)  # work capped on the full point (engine/params.py COSTS)
            pt = Point(self.id, profile, full, seed, self.version, device, self.params)
            if pt.point_id not in seen:
                seen.add(pt.point_id)
                out.append(pt)
        return out

    def test_value(self, knob: str, profile: str, overrides: Mapping[str, Any] | None = None) -> Any:
        """The value the test setting gives ``knob`` (the grid's, an override's or the default)."""
        over = dict(overrides or {})
        if knob in over:
            return over[knob]
        g = self.grids[profile]
        if knob in g.fixed:
            return g.fixed[knob]
        if knob in g.axes and len(g.axes[knob]) == 1:
            return list(g.axes[knob])[0]
        f = {f.name: f for f in dataclasses.fields(self.params)}[knob]  # type: ignore[arg-type]
        if f.default is not dataclasses.MISSING:
            return f.default
        return f.default_factory()  # type: ignore[misc]

    def map_cells(self, profile: str, overrides: Mapping[str, Any] | None = None) -> list[tuple[str, Any]]:
        """(knob, value) of every cell to run at ``profile``: the knobs' values other than the test's."""
        out = []
        for name, k in self.knobs.items():
            tv = jsonable(self.test_value(name, profile, overrides))
            for v in k.values_for(profile):
                if jsonable(v) != tv:
                    out.append((name, v))
        return out

    def decide(self, rows: Sequence[Row], pred: Predict | None = None) -> Verdict:
        """The verdict on the test setting's rows (controls and map cells excluded), with its prose."""
        test = [r for r in rows if not r.control and not r.cell]
        return self._decide(test, pred)

    def decide_cells(self, rows: Sequence[Row], profile: str, test: Verdict | None = None,
                     overrides: Mapping[str, Any] | None = None) -> list[Cell]:  # fmt: skip
        """The verdict on every cell of every knob's map (the test setting's cell included)."""
        if not self.knobs:
            return []
        test = test or self.decide(rows)
        cells = []
        for name, k in self.knobs.items():
            tv = jsonable(self.test_value(name, profile, overrides))
            for v in k.values_for(profile):
                if jsonable(v) == tv:
                    cells.append(Cell(name, v, test, test=True))
                else:
                    mine = [r for r in rows if r.cell == cell_name(name, v)]
                    cells.append(Cell(name, v, self._decide(mine, None)))
            if not any(c.test for c in cells if c.knob == name):
                cells.insert(
                    next(i for i, c in enumerate(cells) if c.knob == name), Cell(name, tv, test, test=True)
                )
        return cells

    def decide_map(
        self, rows: Sequence[Row], profile: str, overrides: Mapping[str, Any] | None = None
    ) -> tuple[Verdict, Verdict, list[Cell]]:
        """(the claim's verdict over its map, the test setting's verdict, the cells)."""
        test = self.decide(rows)
        cells = self.decide_cells(rows, profile, test, overrides)
        return combine_cells(test, cells), test, cells

    def _decide(self, rows: Sequence[Row], pred: Predict | None) -> Verdict:
        if not rows:
            return Verdict("inconclusive", {"points": 0}, "-", "no stored rows")
        if _arity(self.verdict) >= 2:
            v = self.verdict(rows, pred if pred is not None else Predict())
        else:  # a verdict with no predictions to perturb
            v = self.verdict(rows)
        prose = render_or_say_why(self.explain.get(v.status, ""), v.numbers, rows, v.note)
        note = " ".join(s for s in (prose, v.note) if s)
        return dataclasses.replace(v, note=note)

    def decide_control(self, name: str, rows: Sequence[Row]) -> Verdict:
        """The claim's own verdict on the rows of control ``name``."""
        return self._decide([r for r in rows if r.control == name], None)


def _arity(fn: Callable[..., Any]) -> int:
    import inspect

    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 1
