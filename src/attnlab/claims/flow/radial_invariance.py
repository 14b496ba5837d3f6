"""``flow.radial-invariance`` (finding): is radial dominance preserved along trajectories?

The seed's open problem: do trajectories stay inside the region where radial dominance holds (where
per-head energy is monotone) long enough to cluster? Heads on mutually orthogonal subspaces
(random symmetric within blocks, usa kind, ``V = M``), uniform tokens on the sphere, RK4; at every
recorded state the three forms are evaluated for every head
(:func:`attnlab.dynamics.radial_invariance`). Reported per form: how many trajectories start inside,
how many of those leave it at some later record, and how many enter it from outside.

Verdict rule (stated before the numbers): on form 1 (the exact condition for dE_h/dt ≥ 0), holds
(invariant) when no trajectory that starts inside it ever leaves; fails when some leave;
inconclusive when fewer than 10 trajectories start inside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, init, radial_invariance
from attnlab.engine.params import Cost, In
from attnlab.engine.protocol import NO_PERTURBATION, Claim, Grid, Point, Predict, Result, Row, Verdict

__all__ = ["CLAIM", "Params", "run", "verdict"]


@dataclass(frozen=True)
class Params:
    heads: int = 2  # number of heads H (mutually orthogonal subspaces of dimension d/H)
    n: int = 16  # tokens
    d: int = 8  # dimension
    beta: float = 1.0  # inverse temperature
    batch: int = 128  # trajectories (uniform starts) per head draw
    head_draws: int = 2  # head draws per point
    t1: float = 10.0  # trajectory length
    every: float = 0.25  # time between recorded states
    dt: float = 0.05  # RK4 step

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "heads": In("[1, inf)", cap=256),
        "n": In("[2, inf)", cap=100_000),
        "d": In("[1, inf)", cap=100_000),
        "beta": In("(0, inf)"),
        "batch": In("[1, inf)", cap=100_000),
        "head_draws": In("[1, inf)", cap=10_000),
        "t1": In("(0, inf)", cap=1_000),
        "every": In("(0, inf)"),
        "dt": In("[0.0001, 1]", why="RK4 step; smaller steps cost more than one point may"),
    }
    COSTS = (Cost("head_draws * batch * heads * n * n * d * t1 / dt", 1e12, "scores computed"),)


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    started, left, entered, total = [0, 0, 0], [0, 0, 0], [0, 0, 0], 0
    for _ in range(p.head_draws):
        spec = Heads.orthogonal_subspaces(p.heads, p.d, generator=g, random_within=True, kind="usa")
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=g, device=point.device)
        ri = radial_invariance(spec.to(point.device), x0, p.beta, p.t1, p.every, p.dt)
        for k in range(3):
            started[k] += ri.started[k]
            left[k] += ri.left[k]
            entered[k] += ri.entered[k]
        total += ri.trajectories
    return Result(
        metrics={
            "started": started,
            "left": left,
            "entered": entered,
            "trajectories": total,
            "device": device_name(point.device),
        }  # fmt: skip
    )


TOLERANCE = "form 1: no trajectory starting inside leaves it (invariant); ≥ 10 starting inside"


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, TOLERANCE, "no rows." + note)
    tot = {k: [sum(r.metrics[k][i] for r in good) for i in range(3)] for k in ("started", "left", "entered")}
    nums = {
        "trajectories": sum(r.metrics["trajectories"] for r in good),
        "started_in_form_1_2_3": tot["started"],
        "left_form_1_2_3": tot["left"],
        "entered_form_1_2_3": tot["entered"],
        "leave_fraction_form_1_2_3": [
            l / s if s else None for l, s in zip(tot["left"], tot["started"], strict=True)
        ],
        "left_form1_by_beta": {
            f"beta={r.params['beta']:g}": [r.metrics["left"][0], r.metrics["started"][0]] for r in good
        },
    }
    if tot["started"][0] < 10:
        return Verdict.outside("fewer than 10 trajectories start inside form 1", nums, TOLERANCE)
    return Verdict("fails" if tot["left"][0] else "holds", nums, TOLERANCE, note.strip())


_EXPLAIN = (
    "of {trajectories} trajectories, {started_in_form_1_2_3} start inside forms 1, 2, 3 of radial "
    "dominance; "
    "{left_form_1_2_3} of those leave it at a later record (fractions {leave_fraction_form_1_2_3}); "
    "{entered_form_1_2_3} enter from outside. Form 1 by β [left, started]: {left_form1_by_beta}."
)
CLAIM = Claim(
    id="flow.radial-invariance",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="Open problem of the seed: radial dominance is invariant along trajectories (a state "
    "satisfying it keeps satisfying it), for heads on mutually orthogonal subspaces.",
    version=1,
    params=Params,
    grids={
        "quick": Grid({"beta": [1.0, 4.0]}),
        "full": Grid(
            {"beta": [0.5, 1.0, 2.0, 4.0, 8.0], "n": [16, 32], "heads": [2, 4]},
            fixed={"d": 16, "batch": 512, "head_draws": 4, "t1": 20.0},
        ),  # fmt: skip
    },
    run=run,
    verdict=verdict,
    regime="orthogonal-subspace heads, usa kind, V = M, uniform starts on the sphere, within t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN},
)
