"""``ensemble.training-orthogonalises`` (docs/ensemble.md A4): does plain training push heads apart?

Statement (the paper's reading of Thm 5.1): training pressure drives heads towards orthogonal subspaces,
so training without any orthogonality penalty raises the heads' HDI.

Setting: projections trained by full-batch Adam on the leave-one-out ensemble MSE, early-stopped on a
validation split, from random subspaces (HDI near the random-subspace null ``1 − d_k/d``), on a radial
target spread over every direction and on the two-direction bump target, several seeds each.

Trajectory: the projections are kept every ``checkpoint_every`` Adam steps, from the start to the step
where training stopped, and the HDI of each checkpoint gives the path of HDI along training. Its slope
over the part of training that was kept (least squares over the checkpoints before the early-stopped
step and that step itself, per 100 steps) says which way training pushed the heads on the way to the
trained projections, not only where they ended.

Verdict rule, per target: the 95% t-interval over seeds of the end-minus-start change
HDI(trained) − HDI(initial) (trained: the early-stopped projections) decides, and the path must go the
same way: the interval above 0 with a positive mean slope holds, below 0 with a negative mean slope
fails, otherwise (the interval straddles 0, or the path's mean slope points the other way)
inconclusive. The slope's own t-interval and the share of seeds whose path goes the change's way are
reported beside it. Any failing target fails the claim, all holding holds it. The trained HDI is also
reported as a z-score against the random-subspace null, and the figure draws every path against the
null's ±2 sd band.

Controls (one knob each): ``penalised`` (``penalty=1``) — the orthogonality penalty must raise HDI
(must hold); ``orthogonal-start`` (``init="orthogonal"``) — heads start at HDI = 1, the ceiling, so
training can only lower it (must fail).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnlab.claims.ensemble._common import device_name, setting_label, split, task_of
from attnlab.core.geometry import diversity
from attnlab.core.stats import mean_ci
from attnlab.engine.params import In, Items, OneOf
from attnlab.engine.protocol import Claim, Control, Grid, Point, Result, Row, Verdict
from attnlab.ensemble.layouts import projection_layout
from attnlab.ensemble.training import kept_path_slope, train_projections

__all__ = ["CLAIM", "Params", "run", "verdict"]

_SETTINGS = [[8, 3, 2, "radial", 0.5, 400, 1.5], [8, 3, 2, "bump", 0.5, 400, 1.5]]


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
    "per target, 95% t-interval over seeds of HDI(trained) − HDI(init) > 0 with a positive mean slope of "
    "the HDI path holds, < 0 with a negative mean slope fails, else inconclusive"
)


def verdict(rows: Sequence[Row]) -> Verdict:
    ok, failed = split(rows)
    groups: dict[str, list[Row]] = {}
    for r in ok:
        groups.setdefault(setting_label(r.params["setting"]), []).append(r)
    numbers: dict = {"points": len(ok), "failed_points": failed}
    statuses, parts = [], []
    for lab, rs in groups.items():
        m, lo, hi = mean_ci([r.metrics["hdi_trained"] - r.metrics["hdi_init"] for r in rs])
        slopes = [
            r.metrics["hdi_slope_per_100"]
            for r in rs
            if r.metrics["hdi_slope_per_100"] == r.metrics["hdi_slope_per_100"]
        ]
        sm, slo, shi = mean_ci(slopes) if len(slopes) >= 2 else (float("nan"),) * 3
        up, down = lo > 0 and sm > 0, hi < 0 and sm < 0
        same_way = sum((x > 0) == (m > 0) for x in slopes)
        st = "holds" if up else ("fails" if down else "inconclusive")
        statuses.append(st)
        g = {
            "hdi_init_mean": float(np.mean([r.metrics["hdi_init"] for r in rs])),
            "hdi_trained_mean": float(np.mean([r.metrics["hdi_trained"] for r in rs])),
            "hdi_null": rs[0].metrics["hdi_null"],
            "z_trained_mean": float(np.mean([r.metrics["z_trained"] for r in rs])),
            "change_mean": m,
            "change_ci95": [lo, hi],
            "slope_per_100_mean": sm,
            "slope_per_100_ci95": [slo, shi],
            "seeds_path_with_change": f"{same_way}/{len(slopes)}",
            "val_gain_mean": float(np.mean([r.metrics["val_init"] - r.metrics["val_trained"] for r in rs])),
            "seeds": len(rs),
            "status": st,
        }
        numbers[lab] = g
        parts.append(
            f"{lab}: HDI {g['hdi_init_mean']:.3f} → {g['hdi_trained_mean']:.3f} (null {g['hdi_null']:.3f}, "
            f"z {g['z_trained_mean']:.1f}), change {m:+.3f} CI [{lo:.3f}, {hi:.3f}], path slope {sm:+.3f} "
            f"per 100 steps CI [{slo:.3f}, {shi:.3f}] (the change's way in {same_way}/{len(slopes)} seeds), "
            f"{st}"
        )
    numbers["groups"] = "; ".join(parts)
    if not statuses or len(ok) < 2:
        return Verdict("inconclusive", numbers, TOLERANCE, "fewer than 2 seeds finished")
    status = (
        "fails"
        if "fails" in statuses
        else ("holds" if all(s == "holds" for s in statuses) else "inconclusive")
    )
    return Verdict(status, numbers, TOLERANCE)


_READING = "Leave-one-out training, early-stopped, HDI recorded along training, {points} points. {groups}."

CLAIM = Claim(
    id="ensemble.training-orthogonalises",
    kind="theorem",
    grade="evidence",
    paper="A",
    statement="Reading of Thm 5.1: training pressure drives heads to orthogonal subspaces, so plain training "
    "(no penalty) raises the heads' HDI.",
    version=3,
    params=Params,
    grids={
        "quick": Grid({"setting": _SETTINGS}, seeds=4),
        "full": Grid(
            {"setting": _SETTINGS + [[12, 4, 2, "radial", 0.5, 800, 1.5]]}, fixed={"steps": 400}, seeds=12
        ),
    },
    run=run,
    verdict=verdict,
    controls={
        "penalised": Control(
            expect="holds", set={"penalty": 1.0}, why="the orthogonality penalty pushes the heads apart"
        ),
        "orthogonal-start": Control(
            expect="fails",
            set={"init": "orthogonal"},
            why="heads start at HDI = 1, the ceiling: any movement lowers it",
        ),
    },
    regime="heads initialised at random subspaces; training that lowers the validation MSE",
    explain={"holds": _READING, "fails": _READING, "inconclusive": _READING},
    description="HDI path along plain training, per target: end-minus-start change and slope over seeds, "
    "against the random-subspace null.",
)
