"""Claims for the tests of open-knob maps, seed stability and the decisive count.

``test.knobbed``: the sample mean of draws around ``1 + (scale - 1) / 2``, held against the prediction
1.0 with a 3% band. Its open knob ``scale`` maps to 1.0 (the test setting: holds), 1.01 (mean 1.005:
holds) and 2.0 (mean 1.5: fails), so the claim *depends*; ``test.knob-agrees`` maps only 1.0 and 1.01.
``test.coin``: holds when its point's derived seed is even, so its verdict changes with the root seed
(an unstable verdict by construction). ``test.branches``: a holding exponent-like rule with one negative
control that fails through the same branch ("band") and one that fails through another ("size-0").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab.engine.protocol import (
    NO_PERTURBATION,
    Claim,
    Control,
    Grid,
    Knob,
    Point,
    Predict,
    Result,
    Row,
    Verdict,
)


@dataclass(frozen=True)
class Params:
    scale: float = 1.0  # the open knob: the data's mean is 1 + (scale - 1) / 2
    noise: float = 0.001  # standard deviation of each draw
    n: int = 64  # draws per point


def run(point: Point) -> Result:
    p: Params = point.p
    mu = 1.0 + (p.scale - 1.0) / 2
    x = mu + p.noise * torch.randn(p.n, generator=point.generator(), dtype=torch.float64)  # (n,)
    return Result({"mean": float(x.mean()), "n": p.n, "seed_parity": point.seed % 2})


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    ok = [r for r in rows if r.ok and r.metrics["n"] > 0]
    if not ok:
        return Verdict("fails", {"points": 0}, "3%", branch="size-0")
    m = sum(r.metrics["mean"] for r in ok) / len(ok)
    target = pred("target", 1.0)
    rel = abs(m - target) / target
    status = "holds" if rel < 0.03 else "fails"
    return Verdict(status, {"mean": m, "rel": rel}, "3%", branch="band", band=0.03)


def coin(rows: Sequence[Row]) -> Verdict:
    par = rows[0].metrics["seed_parity"]
    return Verdict("holds" if par == 0 else "fails", {"parity": par}, "even seed", branch="parity")


def run_sized(point: Point) -> Result:
    p: Params = point.p
    if p.n == 1:  # a planted empty sample: the rule's size-0 branch
        return Result({"mean": 0.0, "n": 0, "seed_parity": 0})
    return run(point)


GRIDS = {"quick": Grid(fixed={"scale": 1.0}, seeds=2), "full": Grid(fixed={"scale": 1.0}, seeds=3)}

CLAIMS = [
    Claim(
        id="test.knobbed",
        kind="theorem",
        paper="A",
        statement="the mean is 1 whatever the scale",
        version=1,
        params=Params,
        grids=GRIDS,
        run=run,
        verdict=verdict,
        grade="evidence",
        predictions={"target": "the predicted mean 1.0"},
        knobs={"scale": Knob({"quick": [1.0, 1.01, 2.0], "full": [1.0, 1.01, 2.0, 3.0]}, "a free scale")},
    ),
    Claim(
        id="test.knob-agrees",
        kind="theorem",
        paper="A",
        statement="the mean is 1 for scales near 1",
        version=1,
        params=Params,
        grids=GRIDS,
        run=run,
        verdict=verdict,
        grade="evidence",
        predictions={"target": "the predicted mean 1.0"},
        knobs={"scale": Knob([1.0, 1.01], "a free scale")},
    ),
    Claim(
        id="test.coin",
        kind="theorem",
        paper="B",
        statement="the seed is even",
        version=1,
        params=Params,
        grids={"quick": Grid(fixed={"scale": 1.0}), "full": Grid(fixed={"scale": 1.0})},
        run=run,
        verdict=coin,
        grade="evidence",
    ),
    Claim(
        id="test.branches",
        kind="theorem",
        paper="C",
        statement="the mean is 1",
        version=1,
        params=Params,
        grids=GRIDS,
        run=run_sized,
        verdict=verdict,
        grade="numerics",
        predictions={"target": "the predicted mean 1.0"},
        controls={
            "shifted": Control("fails", {"scale": 2.0}, "a mean of 1.5 is 50% off: fails through the band"),
            "empty": Control("fails", {"n": 1}, "no data: fails through size-0, not the band"),
        },
    ),
]
