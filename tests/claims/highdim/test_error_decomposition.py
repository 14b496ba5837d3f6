"""highdim.error-decomposition: each part against its own prediction, the resolving power per part, the
sum as a reported consistency check, and a real point on a power-law target."""

from __future__ import annotations

import pytest

from attnlab.claims.highdim.error_decomposition import CLAIM, PARTS
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

PRED = {"over": 0.058, "under": 0.056, "approx": 0.075, "rotation": 0.036}


def _rows(factor=1.05, part_off=None, off=1.0):
    rows = []
    for a in (0.1, 0.3):
        m = {f"pred_{k}": v for k, v in PRED.items()} | {"pred_total": sum(PRED.values())}
        meas = {k: v * factor * (off if k == part_off else 1.0) for k, v in PRED.items()}
        total = sum(meas.values())
        m |= meas | {"total": total, "parts_sum": total, "n_recovered": 3, "se_s_error": 0.23}
        rows.append(Row("x", {"alpha": a, "d": 50, "rep": 0}, "ok", m))
    return rows


def test_parts_against_their_predictions():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.numbers["recovered_a0.1"] == 3
    assert v.numbers["sum_residual_a0.3"] == 0.0  # reported as a consistency check, not the evidence
    # one part 60% off its prediction fails the claim, whatever the sum does
    v = CLAIM.decide(_rows(part_off="rotation", off=1.6))
    assert v.status == "fails" and "rotation" in v.numbers["worst_part"]
    assert FIGURES[CLAIM.id](_rows())["decomposition"].axes[0].get_ylabel()


def test_each_part_is_a_prediction_that_can_flip_it():
    pw = resolving_power(CLAIM, _rows(factor=1.0))
    assert set(pw.flips) == set(PARTS)
    # tolerance 0.2 × part + 0.05 × total (total 0.225): the largest part (approx, 0.075) flips at 50%
    # (0.0375 > 0.0263), not at 25%; the smallest (rotation, 0.036: 50% is 0.018 < 0.0185) does not
    assert pw.flips["approx"] == {"+": 0.5, "-": 0.5} and pw.flips["rotation"] == {"+": None, "-": None}
    assert not pw.cannot_fail


def test_real_point_on_a_power_law_target():
    p = CLAIM.points("quick", overrides={"d": 12, "max_steps": 40, "draws": 2})[0]
    m = CLAIM.run(p).metrics
    # the split is exact on both sides; the power law's strongest directions are recovered
    assert m["parts_sum"] == pytest.approx(m["total"], rel=1e-10) and m["n_recovered"] >= 1
    assert m["pred_total"] == pytest.approx(sum(m[f"pred_{k}"] for k in PARTS), rel=1e-10)
