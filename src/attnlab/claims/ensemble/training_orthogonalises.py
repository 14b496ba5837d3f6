"""``ensemble.training-orthogonalises`` (docs/ensemble.md A4): does plain training push heads apart?

Statement (the paper's reading of Thm 5.1): training pressure drives heads towards orthogonal subspaces,
so training without any orthogonality penalty raises the heads' HDI.

Setting: projections trained by full-batch Adam on the leave-one-out ensemble MSE, early-stopped on a
validation split, from random subspaces (HDI near the random-subspace null ``1 − d_k/d``), on the radial
target, spread over every direction so that no frame of heads is favoured (the fair target: heads that
move apart are not pulled towards the directions the target reads). The two-direction bump target at
d = 8, H = 3, d_k = 2 is a labelled counter-case (a control): three orthogonal 2-dimensional heads in
R^8 cannot all see its two directions, so training pulls them together.

Trajectory: the projections are kept every ``checkpoint_every`` Adam steps, from the start to the step
where training stopped, and the HDI of each checkpoint gives the path of HDI along training. Its slope
over the part of training that was kept (least squares over the checkpoints before the early-stopped
step and that step itself, per 100 steps) says which way training pushed the heads on the way to the
trained projections, not only where they ended.

Verdict rule (branch "pooled CI"), on the change HDI(trained) − HDI(initial) pooled over seeds (24 quick),
against the equivalence margin ±δ, δ = one sd of the random-subspace null of the HDI
(``pred("margin", δ)``: a change smaller than the spread between two random initialisations leaves the
heads where chance put them). Every branch is a one-sided test at the 5% level, read on the 90%
t-interval of the mean change (``LEVEL``): the interval inside (−δ, δ) — *at the null* (the two one-sided
tests of an equivalence test, TOST): plain training does not raise the HDI, fails; its lower end above 0
(and not inside the margin) with a positive mean path slope — *above*: holds; its upper end below 0 with
a negative mean slope — *below*: fails; anything else inconclusive, with the seeds an interval of the
present spread would need to land inside the margin or clear of 0 (band: the interval's half-width over
δ). Every target of the test grid must hold to hold; any failing target fails. The trained HDI is also
reported as a z-score against the null, and the figure draws every path against the null's ±2 sd band.
The 24 seeds are what makes the verdict repeat over root seeds: the change's seed-to-seed sd is about
0.085 and its mean about +0.01, so 16 seeds left the interval's edge within 0.01 of the margin at some
root seeds (docs/ensemble.md).

Controls (one knob each, decided by the same pooled interval): ``penalised`` (``penalty=1``) — the
orthogonality penalty must raise HDI (must hold, above); ``bump-counter-case`` (the bump target) — heads
pulled together (must fail, below).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.claims.ensemble._common import device_name, setting_label, split, task_of
from attnlab.core.geometry import diversity
from attnlab.core.stats import mean_ci
from attnlab.engine.params import In, Items, OneOf
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
from attnlab.ensemble.layouts import projection_layout
from attnlab.ensemble.training import kept_path_slope, train_projections

__all__ = ["CLAIM", "Params", "run", "verdict"]

_RADIAL = [8, 3, 2, "radial", 0.5, 400, 1.5]
_BUMP = (8, 3, 2, "bump", 0.5, 400, 1.5)
BRANCH = "pooled CI"
LEVEL = 0.90  # two-sided level of the interval: each branch a one-sided test at 5% (TOST for "at the null")


@dataclass(frozen=True)
class Params:
    setting: tuple[Any, ...] = (8, 3, 2, "radial", 0.5, 400, 1.5)  # (d, H, d_k, target, noise σ, n, scale c)
    init: str = "random"  # initial layout of the heads (ensemble.layouts.LAYOUTS)
    penalty: float = 0.0  # orthogonality penalty λ (0: plain training)
    objective: str = "loo"  # training objective
    steps: int = 150  # Adam steps at most
    lr: float = 0.03  # Adam learning rate
    val_fraction: float = 0.25  # share of the sample held out for early stopping
    patience: int = 40  # early-stopping patience (steps)
    kernel: str = "gaussian"  # NW kernel
    checkpoint_every: int = 10  # Adam steps between two recorded points of the HDI path

    DOMAINS = {  # what each value may be: checked before a point runs (engine/params.py)
        "setting": Items(
            In("[1, inf)", cap=100_000),
            In("[1, inf)", cap=256),
            In("[1, inf)", cap=100_000),
            OneOf("sine", "ridge", "bump", "linear", "radial", "zero"),
            In("[0, inf)"),
            In("[2, inf)", cap=10_000_000),
            In("(0, inf)"),
        ),
        "init": OneOf("random", "orthogonal", "shared", "controlled"),
        "penalty": In("[0, inf)"),
        "objective": OneOf("loo", "holdout"),
        "steps": In("[1, inf)", cap=1_000_000),
        "lr": In("(0, 10]"),
        "val_fraction": In("(0, 1)"),
        "patience": In("[1, inf)"),
        "kernel": OneOf("dot", "gaussian"),
        "checkpoint_every": In("[1, inf)"),
    }


def run(point: Point) -> Result:
    p: Params = point.p
    task, H, d_k, n, c = task_of(p.setting)
    g = point.generator()
    X, y = task.sample(n, g)  # (n, d), (n,)
    W0 = projection_layout(p.init, H, task.d, d_k, c, generator=g)  # (H, d, d_k)
    X, y, W0 = X.to(point.device), y.to(point.device), W0.to(point.device)
    n_val = int(round(n * float(p.val_fraction)))
    tr = train_projections(
        W0, X[n_val:], y[n_val:], penalty=float(p.penalty), objective=p.objective, steps=int(p.steps),
        lr=float(p.lr), kernel=p.kernel, X_val=X[:n_val], y_val=y[:n_val], patience=int(p.patience),
        checkpoint_every=int(p.checkpoint_every),
    )  # fmt: skip
    d0, d1 = diversity(W0), diversity(tr.W)
    steps = np.array(tr.checkpoint_steps, dtype=float)  # (T,) the whole run, to where training stopped
    path = np.array([diversity(Wc).hdi for Wc in tr.checkpoints])  # (T,) HDI along training
    return Result(
        metrics={
            "hdi_init": d0.hdi,
            "hdi_trained": d1.hdi,
            "hdi_null": d1.hdi_null,
            "hdi_null_sd": d1.hdi_null_sd,
            "z_trained": d1.z,
            "hdi_slope_per_100": kept_path_slope(steps, path, int(tr.best_step), d1.hdi),
            "best_step": int(tr.best_step),
            "val_init": float(tr.val_history[0]),
            "val_trained": float(tr.val_history[tr.best_step]),
            "device": device_name(point.device),
        },
        arrays={"hdi_path": path, "path_steps": steps},
    )


TOLERANCE = (
    "per target, 90% t-interval over seeds of HDI(trained) − HDI(init) (one-sided tests at 5%): inside ±δ "
    "(δ = one null sd; TOST) fails (at the null); above 0 with a positive mean path slope holds; below 0 "
    "with a negative slope fails; else inconclusive"
)


def _target(rs: Sequence[Row], margin_scale: Predict) -> tuple[str, str, dict]:
    """(status, region, numbers) of one target's rows under the pooled rule."""
    m, lo, hi = mean_ci([r.metrics["hdi_trained"] - r.metrics["hdi_init"] for r in rs], LEVEL)
    slopes = [
        r.metrics["hdi_slope_per_100"]
        for r in rs
        if r.metrics["hdi_slope_per_100"] == r.metrics["hdi_slope_per_100"]
    ]
    sm, slo, shi = mean_ci(slopes, LEVEL) if len(slopes) >= 2 else (float("nan"),) * 3
    delta = margin_scale("margin", float(rs[0].metrics["hdi_null_sd"]))
    if lo != lo:
        status, region = "inconclusive", "one seed"
    elif -delta < lo and hi < delta:
        status, region = "fails", "at the null"
    elif lo > 0 and sm > 0:
        status, region = "holds", "above"
    elif hi < 0 and sm < 0:
        status, region = "fails", "below"
    else:
        status, region = "inconclusive", "undecided"
    half = (hi - lo) / 2 if hi == hi else math.inf
    need = math.inf
    if status == "inconclusive" and half < math.inf:  # seeds for the present spread to decide
        room = max(delta - abs(m), abs(m))  # inside the margin, or clear of 0
        need = math.ceil(len(rs) * (half / room) ** 2) if room > 0 else math.inf
    same_way = sum((x > 0) == (m > 0) for x in slopes)
    return (
        status,
        region,
        {
            "hdi_init_mean": float(np.mean([r.metrics["hdi_init"] for r in rs])),
            "hdi_trained_mean": float(np.mean([r.metrics["hdi_trained"] for r in rs])),
            "hdi_null": rs[0].metrics["hdi_null"],
            "margin": delta,
            "z_trained_mean": float(np.mean([r.metrics["z_trained"] for r in rs])),
            "change_mean": m,
            "change_ci90": [lo, hi],
            "slope_per_100_mean": sm,
            "slope_per_100_ci90": [slo, shi],
            "seeds_path_with_change": f"{same_way}/{len(slopes)}",
            "val_gain_mean": float(np.mean([r.metrics["val_init"] - r.metrics["val_trained"] for r in rs])),
            "seeds": len(rs),
            "seeds_needed": need,
            "band": half / delta if delta > 0 else math.inf,
            "region": region,
            "status": status,
        },
    )


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok, failed = split(rows)
    groups: dict[str, list[Row]] = {}
    for r in ok:
        groups.setdefault(setting_label(r.params["setting"]), []).append(r)
    numbers: dict = {"points": len(ok), "failed_points": failed}
    statuses, parts, bands = [], [], []
    for lab, rs in groups.items():
        st, region, g = _target(rs, pred)
        statuses.append(st)
        bands.append(g["band"])
        numbers[lab] = g
        lo, hi = g["change_ci90"]
        slo, shi = g["slope_per_100_ci90"]
        parts.append(
            f"{lab}: HDI {g['hdi_init_mean']:.3f} → {g['hdi_trained_mean']:.3f} (null {g['hdi_null']:.3f}, "
            f"z {g['z_trained_mean']:.1f}), change {g['change_mean']:+.3f} 90% CI [{lo:.3f}, {hi:.3f}] "
            f"against the margin ±{g['margin']:.3f}, path slope {g['slope_per_100_mean']:+.3f} per 100 steps "
            f"CI [{slo:.3f}, {shi:.3f}] (the change's way in {g['seeds_path_with_change']} seeds), "
            f"{g['seeds']} seeds: {region}, {st}"
            + (f" (about {g['seeds_needed']} seeds would decide)" if st == "inconclusive" else "")
        )
    numbers["groups"] = "; ".join(parts)
    band = max(bands) if bands else None
    if not statuses or len(ok) < 2:
        return Verdict("inconclusive", numbers, TOLERANCE, "fewer than 2 seeds finished", branch=BRANCH)
    status = (
        "fails"
        if "fails" in statuses
        else ("holds" if all(s == "holds" for s in statuses) else "inconclusive")
    )
    return Verdict(status, numbers, TOLERANCE, branch=BRANCH, band=band)


_READING = "Leave-one-out training, early-stopped, HDI recorded along training, {points} points. {groups}."

CLAIM = Claim(
    id="ensemble.training-orthogonalises",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Reading of Thm 5.1: training pressure drives heads to orthogonal subspaces, so plain training "
    "(no penalty) raises the heads' HDI.",
    version=5,
    params=Params,
    grids={
        "quick": Grid({"setting": [_RADIAL]}, seeds=24),
        "full": Grid(
            {"setting": [_RADIAL, [12, 4, 2, "radial", 0.5, 800, 1.5]]}, fixed={"steps": 400}, seeds=32
        ),
    },
    run=run,
    verdict=verdict,
    predictions={"margin": "the equivalence margin: one sd of the random-subspace null of the HDI"},
    controls={
        "penalised": Control(
            expect="holds", set={"penalty": 1.0}, why="the orthogonality penalty pushes the heads apart"
        ),
        "bump-counter-case": Control(
            expect="fails",
            set={"setting": _BUMP},
            why="three orthogonal 2-dimensional heads in R^8 cannot all see the bump's two directions: "
            "training pulls them together",
        ),
    },
    regime="heads initialised at random subspaces; training that lowers the validation MSE",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="HDI path along plain training on the radial target: end-minus-start change over 24 seeds "
    "pooled, against an equivalence margin of one null sd (TOST at 5%); the bump as a counter-case.",
)
