"""``highdim.seq2seq``: one theory serves both tasks (docs/highdim.md C2): since ``XXᵀ/d → I_T`` at fixed
T, the seq2seq loss (divided by d) converges to the seq2lab one, so Adam trained on seq2seq data matches
the same state evolution.

Runs :mod:`~attnlab.claims.highdim.theory_vs_adam`'s two sides with Adam on the seq2seq task, and decides
with its rule (relative gap of the seed mean within 3% + 2 standard errors of the mean; the state-evolution
test error and training loss are the predictions). Its control ``seq2lab`` runs the same points on seq2lab,
the task the theory was written for: it must hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attnlab.claims.highdim import theory_vs_adam as tva
from attnlab.claims.highdim._common import shared_theory_row
from attnlab.engine.protocol import Claim, Control, Grid, Point, Result

__all__ = ["CLAIM", "CLAIMS", "Params", "run"]


@dataclass(frozen=True)
class Params(tva.Params):
    task: Literal["seq2lab", "seq2seq"] = "seq2seq"  # Adam's task


def run(point: Point) -> Result:
    if point.p.side == "theory":  # doubled_lam's theory row is the test's (it changes the ERM side only)
        return shared_theory_row(point, tva.run)
    return tva.run(point)


CLAIM = Claim(
    id="highdim.seq2seq",
    kind="theorem",
    grade="evidence",
    paper=tva.PAPER,
    statement="The ERM trained on the seq2seq task matches the same state evolution as seq2lab (test error "
    "and training loss within 3% + 2 standard errors of the seed mean at d = 100).",
    version=5,  # label nodes folded at T = 2 (channel_nodes.default_fold)
    params=Params,
    grids={
        "quick": Grid(
            {},
            {"side": "simulation", "alpha": 0.3016, "lam": 0.01, "d": 100, "max_steps": 1500},
            seeds=3,
            extra=[Grid({}, {"side": "theory", "alpha": 0.3016, "lam": 0.01, "rep": 0})],
        ),
        "full": Grid(
            {"alpha": [0.15, 0.3016, 1.0], "lam": [0.01, 0.1]},
            {"side": "simulation", "d": 100},
            seeds=5,
            extra=[Grid({"alpha": [0.15, 0.3016, 1.0], "lam": [0.01, 0.1]}, {"side": "theory", "rep": 0})],
        ),
    },
    run=run,
    verdict=tva.verdict,
    predictions=tva.CLAIM.predictions,
    controls={
        "seq2lab": Control(
            expect="holds", set={"task": "seq2lab"}, why="the task the state evolution was derived for"
        ),
        # theory-vs-adam's negative control, on this task: the same branch must see a planted mismatch
        "doubled_lam": tva.CLAIM.controls["doubled_lam"],
    },
    regime=tva.CLAIM.regime,
    explain=tva.CLAIM.explain,
)

#: the engine finds a point's claim through the module of its run function
CLAIMS = [CLAIM]
