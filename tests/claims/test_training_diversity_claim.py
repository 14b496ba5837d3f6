"""The finding models.training-diversity: its verdict rule on synthetic rows, one tiny real point, figures."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.models import CLAIMS
from attnlab.claims.models.training_diversity import (
    CLAIM,
    FORMS,
    SUBSPACES,
    Params,
    decide_groups,
    run,
    verdict,
)
from attnlab.engine.protocol import Point, Predict, Row
from attnlab.report.figures.training import FIGURES


def _metrics(delta: float, loss: float = 2.0, base: float = 3.3, L: int = 2) -> dict:
    m = {"val_loss": loss, "baseline": base, "qk_rank90": [1.0] * L, "entropy_ratio": [0.9] * L}
    for s in SUBSPACES:
        for f in FORMS:
            m[f"hdi_{s}_{f}"] = [0.7 + delta] * L
            m[f"hdi_{s}_{f}_init"] = [0.7] * L
            m[f"null_{s}_{f}"] = [0.7] * L
    return m


def _rows(deltas, loss=2.0, heads=4) -> list[Row]:
    return [
        Row(
            f"p{i}",
            {"task": "text", "n_heads": heads, "weight_decay": 0.1, "rep": i},
            "ok",
            _metrics(d, loss),
        )
        for i, d in enumerate(deltas)
    ]


def test_registered_with_controls() -> None:
    assert CLAIM in CLAIMS and CLAIM.kind == "finding"
    pts = CLAIM.points("quick")
    # 2 weight decays × 2 head counts × 3 seeds + NW × 3 seeds, and 3 seeds for each of two controls
    assert len(pts) == 21
    assert sorted({p.control for p in pts}) == ["", "apart", "together"]


def test_rule_on_synthetic_rows() -> None:
    # three seeds with HDI − null = −0.05 ± 0.01: interval below 0 in every form -> fails
    assert verdict(_rows([-0.04, -0.05, -0.06])).status == "fails"
    assert verdict(_rows([0.04, 0.05, 0.06])).status == "holds"
    # holds and fails are decided by one branch, the majority of cells: the penalty controls go
    # through the branch that decides the test
    assert verdict(_rows([-0.04, -0.05, -0.06])).branch == "cell majority"
    assert verdict(_rows([0.04, 0.05, 0.06])).branch == "cell majority"
    assert verdict(_rows([-0.04, -0.05, -0.06], loss=3.1)).branch != "cell majority"
    # an interval across 0 -> "at" in every cell -> inconclusive
    v = verdict(_rows([-0.05, 0.0, 0.06]))
    assert v.status == "inconclusive" and v.numbers["cells_k_at"] == 3
    # did not learn: loss 3.1 is not below 0.9 × 3.3 = 2.97 -> outside the regime
    v = verdict(_rows([-0.04, -0.05, -0.06], loss=3.1))
    assert v.status == "inconclusive" and "learned" in v.regime
    # two seeds give no interval the rule accepts
    assert "3 seeds" in verdict(_rows([-0.04, -0.05])).regime
    # mixed configurations: one fails (below), one not learned (ignored)
    rows = _rows([-0.04, -0.05, -0.06]) + _rows([0.1, 0.1, 0.1], loss=3.2, heads=8)
    v = verdict(rows)
    assert v.status == "fails" and v.numbers["configs_learned"] == 1 and v.numbers["configs"] == 2


def test_the_null_prediction_moves_the_verdict() -> None:
    rows = _rows([-0.04, -0.05, -0.06])
    # the null scaled by 0.8 (0.56 instead of 0.7): HDI 0.65 ± 0.01 is then above it
    assert verdict(rows, Predict({"hdi_null": 0.8})).status == "holds"
    # scaled by 0.9 (0.63): δ = 0.02 ± 0.01 over three seeds, an interval across 0
    assert verdict(rows, Predict({"hdi_null": 0.9})).status == "inconclusive"
    g = decide_groups(rows)["text H=4 wd=0.1"]
    assert g["k_data"]["position"] == "below"
    # t interval with 2 degrees of freedom: mean −0.05, sd 0.01, t = 4.3027 -> half-width 0.02484
    assert g["k_data"]["delta"] == pytest.approx([-0.05, -0.0748, -0.0252], abs=1e-4)


def test_one_tiny_point_and_its_figures() -> None:
    full = {
        **{f: getattr(Params(), f) for f in Params.__dataclass_fields__},
        "steps": 4,
        "d_model": 8,
        "n_heads": 2,
        "seq_len": 8,
        "batch_size": 4,
        "records": 2,
        "null_samples": 4,
        "task": "nw",
        "nw_dim": 2,
    }
    res = run(Point(CLAIM.id, "quick", full, 7, CLAIM.version, "cpu", Params))
    m = res.metrics
    assert len(m["hdi_k_data"]) == 2 and m["steps"] == 4 and np.isfinite(m["val_loss"])
    assert res.arrays["step"].tolist() == [0.0, 1.0, 4.0] and res.arrays["hdi_ov_weight"].shape == (3, 2)
    rows = [Row("a", full | {"rep": 0}, "ok", m, arrays=res.arrays)]
    figs = FIGURES[CLAIM.id](rows)
    assert list(figs) == ["hdi_vs_step_nw_h2_wd0p1"]
    assert len(figs["hdi_vs_step_nw_h2_wd0p1"].axes) == 24  # 12 panels and their loss twins
