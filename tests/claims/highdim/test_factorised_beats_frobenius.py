"""highdim.factorised-beats-frobenius: the verdict on synthetic rows, its negative control (a
negative-definite target) designed to fail, and the control's knob reaching the run."""

from __future__ import annotations

import pytest
import torch

from attnlab.claims.highdim.factorised_beats_frobenius import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

GRID = {"lams": [0.001, 0.01, 0.1], "lams_frob": [0.001, 0.01, 0.1]}


def _rows(adv, control=""):
    extra = {"control": control} if control else {}
    return [
        Row(
            "x",
            {"kappa0": k0} | GRID | extra,
            "ok",
            {"test_factorised": 0.06 * (1 - a), "test_frobenius": 0.06, "lam_factorised": 0.01}
            | {"lam_frobenius": 0.01},
        )
        for k0, a in adv.items()
    ]


def test_verdict():
    v = CLAIM.decide(_rows({0.1: 0.6, 0.25: 0.4, 0.5: 0.3, 1.0: 0.2}))
    assert v.status == "holds" and v.numbers["rel_advantage_k0.1"] == pytest.approx(0.6)
    assert "4 of the κ0" in v.note and "edge" not in v.note
    # largest advantage at an intermediate rank, or a loss somewhere: fails
    assert CLAIM.decide(_rows({0.1: 0.3, 0.25: 0.4, 1.0: 0.2})).status == "fails"
    assert CLAIM.decide(_rows({0.1: 0.6, 1.0: -0.1})).status == "fails"
    assert CLAIM.decide(_rows({0.1: 0.6})).status == "inconclusive"
    edge = _rows({0.1: 0.6, 1.0: 0.2})
    edge[0] = Row("x", edge[0].params, "ok", {**edge[0].metrics, "lam_frobenius": 0.001})
    assert "frobenius at κ0 = 0.1" in CLAIM.decide(edge).note


def test_negative_control_is_a_negated_target_and_must_fail():
    ((name, ctrl),) = CLAIM.controls.items()
    assert ctrl.expect == "fails" and dict(ctrl.set) == {"target_sign": -1.0}
    pts = [p for p in CLAIM.points("quick") if p.control == name]
    assert {p.p.target_sign for p in pts} == {-1.0} and len(pts) == len(CLAIM.points("quick", controls=False))
    # the factorised student losing at every rank on the control rows: the control comes out as designed
    rows = _rows({0.1: 0.6, 0.25: 0.4, 0.5: 0.3, 1.0: 0.2}) + _rows({0.1: -4.0, 1.0: -3.0}, control=name)
    pw = resolving_power(CLAIM, rows)
    assert pw.controls[name]["got"] == "fails" and pw.label == "controls 1/1" and not pw.cannot_fail
    assert FIGURES[CLAIM.id](rows)["factorised_vs_frobenius"].axes[0].get_legend() is not None


def test_control_point_trains_on_the_negated_target(monkeypatch):
    # the run's target is −S0 on the control: intercept the sampler and compare with the test point's
    import attnlab.highdim as hd

    seen = []
    real = hd.sample

    def spy(S0, *a, **k):
        seen.append(S0.clone())
        raise RuntimeError("stop")

    monkeypatch.setattr(hd, "sample", spy)
    test = CLAIM.points("quick", overrides={"d": 6})[0]
    ctrl = next(
        p for p in CLAIM.points("quick", overrides={"d": 6}) if p.control and p.p.kappa0 == test.p.kappa0
    )
    for p in (test, ctrl):
        with pytest.raises(RuntimeError, match="stop"):
            CLAIM.run(p)
    assert real is not spy
    # the two points draw their targets from their own seeds; each control target is negative semi-definite
    assert torch.linalg.eigvalsh(seen[0]).min() >= -1e-12 and torch.linalg.eigvalsh(seen[1]).max() <= 1e-12
