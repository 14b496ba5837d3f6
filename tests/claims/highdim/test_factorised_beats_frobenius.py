"""highdim.factorised-beats-frobenius: the verdict on synthetic rows (paired seed means against two standard
errors, its two branches), its over-shrunk negative control, and the control's knob reaching the run."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim.factorised_beats_frobenius import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES

GRID = {"lams": [0.001, 0.01, 0.1], "lams_frob": [0.001, 0.01, 0.1]}


def _rows(adv, control="", jitter=(-0.02, 0.0, 0.02)):
    """One row per (κ0, seed): the factorised error ``0.06 (1 − a − j)`` against the Frobenius ``0.06``."""
    extra = {"control": control} if control else {}
    return [
        Row(
            "x",
            {"kappa0": k0, "rep": i} | GRID | extra,
            "ok",
            {"test_factorised": 0.06 * (1 - a - j), "test_frobenius": 0.06, "lam_factorised": 0.01}
            | {"lam_frobenius": 0.01},
        )
        for k0, a in adv.items()
        for i, j in enumerate(jitter)
    ]


def test_verdict_reads_paired_seed_means_against_two_standard_errors():
    v = CLAIM.decide(_rows({0.1: 0.6, 0.25: 0.4, 0.5: 0.3, 1.0: 0.2}))
    # independent: the advantages are 0.6 + (0.02, 0, −0.02), mean 0.6, standard error 0.02/√3
    se = np.std([0.02, 0.0, -0.02], ddof=1) / np.sqrt(3)
    assert v.status == "holds" and v.branch == "advantage"
    assert v.numbers["rel_advantage_k0.1"] == pytest.approx(0.6)
    assert v.numbers["rel_advantage_se_k0.1"] == pytest.approx(se)
    assert v.band == pytest.approx(2 * se) and "4 of the κ0" in v.note and "edge" not in v.note
    # an advantage of 0.02 is inside 2 se (0.023): not a win beyond the noise, fails through "advantage"
    v = CLAIM.decide(_rows({0.1: 0.6, 1.0: 0.02}))
    assert v.status == "fails" and v.branch == "advantage"
    # the largest advantage at an intermediate rank by more than the noise: fails through "ordering"
    v = CLAIM.decide(_rows({0.1: 0.3, 0.25: 0.4, 1.0: 0.2}))
    assert v.status == "fails" and v.branch == "ordering"
    # ... but within the noise (0.3 against 0.32, 2 se in quadrature 0.033) it holds
    assert CLAIM.decide(_rows({0.1: 0.3, 0.25: 0.32, 1.0: 0.2})).status == "holds"
    assert CLAIM.decide(_rows({0.1: 0.6})).status == "inconclusive"
    two_seeds = CLAIM.decide(_rows({0.1: 0.6, 1.0: 0.2}, jitter=(0.0, 0.01)))
    assert two_seeds.status == "inconclusive" and "3" in two_seeds.regime
    edge = _rows({0.1: 0.6, 1.0: 0.2})
    edge[0] = Row("x", edge[0].params, "ok", {**edge[0].metrics, "lam_frobenius": 0.001})
    assert "frobenius at κ0 = 0.1" in CLAIM.decide(edge).note


def test_negative_control_is_an_overshrunk_factorised_student_and_must_fail():
    ((name, ctrl),) = CLAIM.controls.items()
    assert ctrl.expect == "fails" and dict(ctrl.set) == {"lams": [0.3]}
    pts = [p for p in CLAIM.points("quick") if p.control == name]
    test = CLAIM.points("quick", controls=False)
    assert {tuple(p.p.lams) for p in pts} == {(0.3,)} and len(pts) == len(test)
    assert min(sum(p.p.kappa0 == k for p in test) for k in {p.p.kappa0 for p in test}) >= 3
    # the over-shrunk student losing at full rank: the control fails through the test's branch
    rows = _rows({0.1: 0.6, 0.25: 0.4, 0.5: 0.3, 1.0: 0.2}) + _rows({0.1: 0.3, 1.0: -0.5}, control=name)
    pw = resolving_power(CLAIM, rows)
    assert pw.controls[name]["got"] == "fails" and pw.controls[name]["same_branch"]
    assert pw.label == "controls 1/1" and not pw.cannot_fail
    assert FIGURES[CLAIM.id](rows)["factorised_vs_frobenius"].axes[0].get_legend() is not None


def test_control_point_trains_the_factorised_student_at_one_lambda(monkeypatch):
    # intercept the trainings of a tiny control point: one factorised λ̃ (0.3), every Frobenius one
    import attnlab.highdim as hd

    seen = []
    real = hd.train_erm

    def spy(tr, te, lam, factorised=True, **k):
        seen.append((factorised, lam))
        return real(tr, te, lam=lam, factorised=factorised, **k)

    monkeypatch.setattr(hd, "train_erm", spy)
    ctrl = next(
        p
        for p in CLAIM.points("quick", overrides={"d": 6, "n_val": 20, "n_test": 20, "max_steps": 5})
        if p.control
    )
    m = CLAIM.run(ctrl).metrics
    assert [lam for f, lam in seen if f] == [0.3] and m["lam_factorised"] == 0.3
    assert [lam for f, lam in seen if not f] == list(ctrl.p.lams_frob)
