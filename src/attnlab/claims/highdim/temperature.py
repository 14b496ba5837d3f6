"""``highdim.temperature``: the theory holds at inverse temperatures β = β0 ≠ 1 (docs/highdim.md C1–C3):
Adam's student ``rowsoftmax(β Z(S))`` trained on a target at ``β0`` matches the state evolution at the
same (β, β0).

Runs :mod:`~attnlab.claims.highdim.theory_vs_adam`'s two sides at β = β0 = 2 (quick) and 0.5, 2 (full), and
decides with its rule (relative gap of the seed mean within 3% + 2 standard errors of the mean; the
state-evolution test error and training loss are predictions).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.claims.highdim import theory_vs_adam as tva
from attnlab.engine.protocol import Claim, Grid, Point, Result

__all__ = ["CLAIM", "CLAIMS", "Params", "run"]


@dataclass(frozen=True)
class Params(tva.Params):
    beta: float = 2.0  # student inverse temperature β
    beta0: float = 2.0  # target inverse temperature β0


def run(point: Point) -> Result:
    return tva.run(point)


def _grid(betas: list[float], alphas: list[float], seeds: int, max_steps: int) -> Grid:
    # β = β0 moves together: one grid per temperature
    sims = [
        Grid(
            {"alpha": alphas},
            {"side": "simulation", "lam": 0.01, "beta": b, "beta0": b, "d": 100, "max_steps": max_steps},
            seeds,
        )
        for b in betas
    ]
    theory = [
        Grid({"alpha": alphas}, {"side": "theory", "lam": 0.01, "beta": b, "beta0": b, "rep": 0})
        for b in betas
    ]
    return Grid(sims[0].axes, sims[0].fixed, seeds, extra=sims[1:] + theory)


CLAIM = Claim(
    id="highdim.temperature",
    kind="theorem",
    paper=tva.PAPER,
    statement="At β = β0 ≠ 1 Adam's test error and training loss match the state evolution at the same "
    "temperatures (within 3% + 2 standard errors of the seed mean at d = 100).",
    version=2,
    params=Params,
    grids={"quick": _grid([2.0], [0.3016], 3, 1500), "full": _grid([0.5, 2.0], [0.3016, 1.0], 5, 3000)},
    run=run,
    verdict=tva.verdict,
    predictions=tva.CLAIM.predictions,
    regime=tva.CLAIM.regime,
    explain=tva.CLAIM.explain,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
