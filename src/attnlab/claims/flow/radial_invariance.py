"""``flow.radial-invariance`` (finding): does radial dominance last long enough for tokens to cluster?

The seed's open problem: do trajectories stay inside the region where radial dominance holds (where
per-head energy is monotone) long enough to cluster? Heads on mutually orthogonal subspaces
(random symmetric within blocks, usa kind, ``V = M``), uniform tokens on the sphere, RK4; at every
recorded state the three forms are evaluated for every head
(:func:`attnlab.dynamics.radial_invariance`). Per trajectory: the first time form 1 (the exact condition
for ``dE_h/dt ≥ 0``) breaks for some head, ``t_exit``, against the time the tokens form one cluster
(every pair above 0.999, the published statistic), ``t_cluster``. Reported beside it, per form, how many
trajectories start inside, how many of those leave it, how many enter it from outside.

Verdict rule (branch "persistence", stated before the numbers): among trajectories that start inside
form 1 and whose question is settled within ``t1`` (they cluster, or they leave form 1, before ``t1``),
the fraction ``q`` with ``t_exit ≥ t_cluster`` (form 1 held until clustering). The reading "form 1 lasts
long enough to cluster" predicts ``q ≥ 0.95``: holds when the 95% Wilson interval of ``q`` lies at or
above 0.95's side (its upper end ≥ 0.95 and its lower end ≥ 0.9), fails when its upper end is below 0.95,
inconclusive otherwise or with fewer than 10 settled trajectories. Positive control through the same
branch: one head, where form 1 has no cross term and holds at every state, so every trajectory keeps it
until it clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnlab.claims.flow._common import device_name, ok_rows
from attnlab.dynamics import Heads, init, radial_invariance, wilson_interval
from attnlab.engine.params import Cost, In
from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)

__all__ = ["CLAIM", "Params", "run", "verdict"]

#: The reading's prediction: at least this fraction of trajectories keep form 1 until they cluster.
PERSIST = 0.95
#: Fewest settled trajectories (start in form 1, cluster or leave within t1) to decide.
MIN_SETTLED = 10


@dataclass(frozen=True)
class Params:
    heads: int = 2  # number of heads H (mutually orthogonal subspaces of dimension d/H)
    n: int = 16  # tokens
    d: int = 8  # dimension
    beta: float = 1.0  # inverse temperature
    batch: int = 128  # trajectories (uniform starts) per head draw
    head_draws: int = 2  # head draws per point
    t1: float = 20.0  # trajectory length
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


def _median(a: np.ndarray) -> float | None:
    return float(np.median(a)) if a.size else None


def run(point: Point) -> Result:
    p: Params = point.p
    g = point.generator()
    started, left, entered, total = [0, 0, 0], [0, 0, 0], [0, 0, 0], 0
    start, t_exit, t_clus, share = [], [], [], []
    for _ in range(p.head_draws):
        spec = Heads.orthogonal_subspaces(p.heads, p.d, generator=g, random_within=True, kind="usa")
        x0 = init.uniform(batch=p.batch, n=p.n, d=p.d, generator=g, device=point.device)
        ri = radial_invariance(spec.to(point.device), x0, p.beta, p.t1, p.every, p.dt)
        for k in range(3):
            started[k] += ri.started[k]
            left[k] += ri.left[k]
            entered[k] += ri.entered[k]
        total += ri.trajectories
        start.append(ri.form1_start)
        t_exit.append(ri.exit_time)
        t_clus.append(ri.cluster_time)
        share.append(ri.form1_share)
        t1 = ri.t1
    s, te, tc, sh = (np.concatenate(a) for a in (start, t_exit, t_clus, share))
    settled = s & (np.minimum(te, tc) <= t1)  # the question is answered within t1
    stayed = settled & (te >= tc)  # form 1 held until the tokens formed one cluster
    return Result(
        metrics={
            "started": started,
            "left": left,
            "entered": entered,
            "trajectories": total,
            "settled": int(settled.sum()),
            "stayed": int(stayed.sum()),
            "clustered": int((tc <= t1).sum()),
            "median_exit_time": _median(te[s & (te <= t1)]),
            "median_cluster_time": _median(tc[tc <= t1]),
            "median_form1_share": _median(sh[s]),
            "device": device_name(point.device),
        },
        arrays={
            "exit_time": np.where(np.isfinite(te), te, -1.0),
            "cluster_time": np.where(np.isfinite(tc), tc, -1.0),
        },
    )


TOLERANCE = (
    f"share q of form-1 starts that keep form 1 until one cluster; reading q ≥ {PERSIST}: "
    "holds when the 95% Wilson interval reaches it (lower end ≥ 0.9), fails when it lies below"
)


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    good, note = ok_rows(rows)
    if not good:
        return Verdict("inconclusive", {}, TOLERANCE, "no rows." + note)
    tot = {k: [sum(r.metrics[k][i] for r in good) for i in range(3)] for k in ("started", "left", "entered")}
    settled = sum(r.metrics.get("settled", 0) for r in good)
    stayed = sum(r.metrics.get("stayed", 0) for r in good)
    lo, hi = wilson_interval(stayed, settled)
    target = pred("persistence", PERSIST)
    nums = {
        "trajectories": sum(r.metrics["trajectories"] for r in good),
        "settled": settled,
        "stayed_until_cluster": stayed,
        "stay_fraction": stayed / settled if settled else None,
        "stay_interval": [lo, hi],
        "by_beta": {
            f"beta={r.params['beta']:g}": {
                "stayed/settled": [r.metrics.get("stayed"), r.metrics.get("settled")],
                "clustered": r.metrics.get("clustered"),
                "median_exit_time": r.metrics.get("median_exit_time"),
                "median_cluster_time": r.metrics.get("median_cluster_time"),
                "median_form1_share": r.metrics.get("median_form1_share"),
            }
            for r in good
        },
        "started_in_form_1_2_3": tot["started"],
        "left_form_1_2_3": tot["left"],
        "entered_form_1_2_3": tot["entered"],
        "leave_fraction_form_1_2_3": [
            l / s if s else None for l, s in zip(tot["left"], tot["started"], strict=True)
        ],
    }
    if settled < MIN_SETTLED:
        return Verdict.outside(
            f"only {settled} trajectories start in form 1 and cluster or leave it within t1 (need "
            f"{MIN_SETTLED})",
            nums,
            TOLERANCE,
        )
    if hi < target:
        return Verdict("fails", nums, TOLERANCE, note.strip(), branch="persistence")
    if lo >= target - 0.05:
        return Verdict("holds", nums, TOLERANCE, note.strip(), branch="persistence")
    return Verdict(
        "inconclusive",
        nums,
        TOLERANCE,
        note.strip(),
        regime=f"the interval [{lo:.3f}, {hi:.3f}] of the share straddles {target:g}: more trajectories",
        branch="persistence",
    )


_EXPLAIN = (
    "of {settled} trajectories that start in form 1 and settle within t1, {stayed_until_cluster} keep form 1 "
    "until the tokens form one cluster (share {stay_fraction:.3f}, 95% interval {stay_interval}); by β: "
    "{by_beta}. Per form, {started_in_form_1_2_3} of {trajectories} start inside and {left_form_1_2_3} of "
    "those leave it."
)
CLAIM = Claim(
    id="flow.radial-invariance",
    kind="finding",
    grade="evidence",
    paper="B",
    statement="Open problem of the seed: trajectories stay inside radial dominance (form 1, where every "
    "per-head energy is non-decreasing) long enough to cluster, for heads on mutually orthogonal subspaces.",
    version=2,
    params=Params,
    grids={
        "quick": Grid({"beta": [1.0, 4.0]}),
        "full": Grid(
            {"beta": [0.5, 1.0, 2.0, 4.0, 8.0], "n": [16, 32], "heads": [2, 4]},
            fixed={"d": 16, "batch": 512, "head_draws": 4, "t1": 40.0},
        ),  # fmt: skip
    },
    run=run,
    verdict=verdict,
    controls={
        "one-head": Control(
            "holds",
            {"heads": 1},
            "with one head form 1 has no cross term (Σ‖P⊥f_i‖² ≥ 0): it holds at every state, so every "
            "trajectory keeps it until it clusters",
        )
    },
    predictions={"persistence": "the share of form-1 starts that keep form 1 until one cluster (≥ 0.95)"},
    regime="orthogonal-subspace heads, usa kind, V = M, uniform starts on the sphere, within t1",
    explain={"holds": _EXPLAIN, "fails": _EXPLAIN, "inconclusive": _EXPLAIN},
)
