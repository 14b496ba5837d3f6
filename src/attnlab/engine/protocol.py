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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from attnlab.core.seeding import canonical_json, derive_seed
from attnlab.engine.grid import CELL_KEY, CONTROL_KEY, REP_KEY, Grid, jsonable, parse_override, variant_name
from attnlab.engine.params import axis_values as _axis_values
from attnlab.engine.params import check_costs, check_params, check_value
from attnlab.engine.params import field_types as _hints
from attnlab.engine.points import Point, Result, Row
from attnlab.engine.verdicts import (
    GRADES,
    NO_PERTURBATION,
    STATUSES,
    VERDICTS,
    Cell,
    Control,
    Grade,
    Knob,
    Part,
    Predict,
    Verdict,
    VerdictFn,
    cell_name,
    combine_cells,
    render,
    render_or_say_why,
)

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
    "cell_name",
    "check_params",
    "combine_cells",
    "jsonable",
    "parse_override",
    "render",
    "render_or_say_why",
    "variant_name",
]

KINDS = ("identity", "theorem", "finding")
PROFILES = ("quick", "full")
Kind = Literal["identity", "theorem", "finding"]


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
            values = k.values_for(profile)
            if not values:  # a knob mapped at other profiles only
                continue
            tv = jsonable(self.test_value(name, profile, overrides))
            for v in values:
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
