"""``highdim.width``: the learned S, hence the test error, does not depend on the student width κ = p/d as
long as κ is above the rank fraction r of the solution (docs/highdim.md C4); below r the student cannot
hold the solution.

Runs :mod:`~attnlab.claims.highdim.theory_vs_adam`'s two sides with Adam at κ = 0.75 (the state evolution
does not depend on κ) at α = 0.5, λ̃ = 0.01, where r ≈ 0.64 (reported by the theory side), and decides with
its rule (relative gap of the seed mean within 3% + 2 standard errors of the mean; the state-evolution test
error and training loss are predictions). Negative control ``narrow``: κ = 0.3, below r, where the student's
rank is capped under the solution's and the verdict must come out "fails".
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.claims.highdim import theory_vs_adam as tva
from attnlab.engine.protocol import Claim, Control, Grid, Point, Result

__all__ = ["CLAIM", "CLAIMS", "Params", "run"]


@dataclass(frozen=True)
class Params(tva.Params):
    kappa: float = 0.75  # student width p/d
    alpha: float = 0.5  # sample ratio n/d²


def run(point: Point) -> Result:
    return tva.run(point)


CLAIM = Claim(
    id="highdim.width",
    kind="theorem",
    grade="evidence",
    paper=tva.PAPER,
    statement="A student of width κ = 0.75, above the solution's rank fraction, reaches the κ-independent "
    "state-evolution test error and training loss (within 3% + 2 standard errors of the seed mean "
    " at d = 100); a student narrower than the rank fraction does not.",
    version=5,  # label nodes folded at T = 2 (channel_nodes.default_fold)
    params=Params,
    grids={
        "quick": Grid(
            {},
            {"side": "simulation", "alpha": 0.5, "lam": 0.01, "kappa": 0.75, "d": 100, "max_steps": 1500},
            seeds=3,
            extra=[Grid({}, {"side": "theory", "alpha": 0.5, "lam": 0.01, "kappa": 0.75, "rep": 0})],
        ),
        "full": Grid(
            {"kappa": [0.75, 0.9], "alpha": [0.5, 1.0]},
            {"side": "simulation", "lam": 0.01, "d": 100, "max_steps": 3000},
            seeds=5,
            extra=[
                Grid({"kappa": [0.75, 0.9], "alpha": [0.5, 1.0]}, {"side": "theory", "lam": 0.01, "rep": 0})
            ],
        ),
    },
    run=run,
    verdict=tva.verdict,
    predictions=tva.CLAIM.predictions,
    controls={
        "narrow": Control(
            expect="fails",
            set={"kappa": 0.3},
            why="a student of rank at most 0.3·d cannot hold a solution of rank fraction ≈ 0.64",
        )
    },
    regime=tva.CLAIM.regime + "; κ above the rank fraction",
    explain=tva.CLAIM.explain,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
