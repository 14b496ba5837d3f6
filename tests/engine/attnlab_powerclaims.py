"""Claims with typed Params, a prediction and controls, for the protocol and power tests.

``test.mean``: a noisy sample of mean ``mu``; the verdict holds when the sample mean is within 3%
of the predicted value 1.0 (``pred("target", 1.0)``). A negative control plants ``mu = 1.5`` (must
fail), a positive one ``mu = 1.0, noise = 0`` (must hold). ``test.vacuous`` holds whatever the data:
it declares nothing, so power calls it "cannot fail".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

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


@dataclass(frozen=True)
class Params:
    mu: float = 1.0  # true mean of the sample
    noise: float = 0.01  # standard deviation of each draw
    n: int = 400  # sample size
    mode: Literal["a", "b"] = "a"  # an enumerated knob
    extra: float = 0.0  # a field no grid states (its default does not enter the seed)


def run(point: Point) -> Result:
    p: Params = point.p
    x = p.mu + p.noise * torch.randn(p.n, generator=point.generator(), dtype=torch.float64)  # (n,)
    return Result({"mean": float(x.mean()) + p.extra})


def verdict(rows: Sequence[Row], pred: Predict = NO_PERTURBATION) -> Verdict:
    m = sum(r.metrics["mean"] for r in rows if r.ok) / max(1, sum(r.ok for r in rows))
    target = pred("target", 1.0)
    rel = abs(m - target) / target
    return Verdict("holds" if rel < 0.03 else "fails", {"mean": m, "target": target, "rel": rel}, "3%")


def vacuous(rows: Sequence[Row]) -> Verdict:
    return Verdict("holds", {"rows": len(rows)}, "-")


GRIDS = {"quick": Grid({"mu": [1.0]}, seeds=2), "full": Grid({"mu": [1.0]}, seeds=4)}

CLAIMS = [
    Claim(
        id="test.mean",
        kind="theorem",
        paper="A",
        statement="the sample mean is 1",
        version=1,
        params=Params,
        grids=GRIDS,
        run=run,
        verdict=verdict,
        predictions={"target": "the predicted mean 1.0"},
        controls={
            "shifted": Control("fails", {"mu": 1.5}, "a mean of 1.5 is 50% off the prediction"),
            "exact": Control("holds", {"noise": 0.0}, "no noise: the mean is exactly 1"),
        },
        regime="any sample size",
        explain={
            "holds": "mean {mean:.4f} within 3% of {target:.3f}",
            "fails": "mean {mean:.4f} is {rel:.1%} off",
        },
    ),
    Claim(
        id="test.vacuous",
        kind="theorem",
        paper="B",
        statement="anything",
        version=1,
        params=Params,
        grids=GRIDS,
        run=run,
        verdict=vacuous,
    ),
]

NOT_TESTABLE = {"a remark on the mean": "the statement gives nothing to compare with"}
