"""The paper-B claim package: registration order, kinds, file sizes, grids, failed rows, figures."""

from pathlib import Path

import pytest

from attnlab.claims import flow
from attnlab.engine.protocol import Row
from attnlab.report.figures.flow import FIGURES

IDS = [
    "flow.energy-monotone",
    "flow.energy-monotone-softmax",
    "flow.value-perturbation",
    "flow.radial-shadow",
    "flow.beta-star",
    "flow.equiangular-rates",
    "flow.relu-vs-softmax",
    "flow.entropy",
    "flow.approx-orthogonal",
]


def test_registered_in_order_with_grids_and_figures():
    got = [c.id for c in flow.CLAIMS]
    assert got[: len(IDS)] == IDS
    for c in flow.CLAIMS:
        assert c.paper == "B" and c.params is not None and c.explain
        assert c.points("quick") and len(c.points("full")) >= len(c.points("quick"))
        assert c.id in FIGURES and FIGURES[c.id]([]) is not None
        if c.kind == "theorem":  # every theorem can fail: a prediction to perturb or a control
            assert c.predictions or c.controls, c.id


def test_claim_files_are_small():
    for f in Path(flow.__file__).parent.glob("*.py"):
        assert len(f.read_text().splitlines()) <= 300, f.name


@pytest.mark.parametrize("claim", flow.CLAIMS, ids=lambda c: c.id)
def test_failed_rows_only_is_inconclusive(claim):
    v = claim.decide([Row("x", {}, "failed", {}, error="boom")])
    assert v.status == "inconclusive"
