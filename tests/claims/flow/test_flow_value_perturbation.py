"""flow.value-perturbation: identities, the size exponent's power, the softmax control, one real point."""

import pytest

from attnlab.claims.flow.value_perturbation import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row


def _row(size, mx, viol=10, control="", d_over_k=0.1, floor=0.9):
    params = {"size": size, **({"control": control} if control else {})}
    m = {
        "violations": viol,
        "trials": 64,
        "violation_rate_by_window": {"6": viol / 128, "20": viol / 64},
        "max_rel_violation": mx,
        "max_D_over_K_size2": d_over_k if viol else None,
        "max_D_over_cauchy_schwarz": 0.8 if viol else None,
        "max_violation_over_floor": floor if viol else None,
        "K": 29.6,
    }
    return Row(f"{size}{control}", params, "ok", m)


def _test_rows(exp=2.0):
    return [_row(0.0, 0.0, viol=0)] + [_row(s, 0.1 * s**exp) for s in (0.001, 0.01, 0.1, 1.0)]


def test_exponent_decides_with_power():
    rows = _test_rows()
    v = CLAIM.decide(rows)
    assert v.status == "holds" and v.numbers["exponent"] == pytest.approx(2.0, abs=1e-12)
    assert CLAIM.decide(rows, Predict({"exponent": 1.1})).status == "fails"  # exact data: SE 0, tol 0.1
    assert CLAIM.decide(_test_rows(exp=1.0)).status == "fails"  # linear violations: not robust
    ctrl = [_row(s, 0.01, control="softmax-kind") for s in (0.0, 0.001, 0.01, 0.1, 1.0)]
    pw = resolving_power(CLAIM, rows + ctrl)
    assert pw.flips["exponent"]["+"] == 0.1 and pw.controls["softmax-kind"]["as_designed"]


def test_identities_and_regime():
    rows = _test_rows()
    assert CLAIM.decide([*rows[:-1], _row(1.0, 0.1, d_over_k=1.5)]).status == "fails"  # D > K s²
    assert CLAIM.decide([*rows[:-1], _row(1.0, 0.1, floor=1.2)]).status == "fails"  # below the floor
    assert CLAIM.decide([_row(0.0, 1e-9, viol=1), *rows[1:]]).status == "fails"  # Thm 11 at size 0
    v = CLAIM.decide([rows[0], rows[1], rows[2]])
    assert v.status == "inconclusive" and v.regime


def test_real_point_meets_the_identities():
    p = next(
        p
        for p in CLAIM.points("quick", overrides={"batch": 8, "head_draws": 1, "t1": 10.0})
        if p["size"] == 1.0
    )
    m = CLAIM.run(p).metrics
    assert m["violations"] > 0  # size 1: violations are common (docs/flow.md B2)
    assert m["max_D_over_K_size2"] <= 1.0 and m["max_violation_over_floor"] <= 1.0 + 1e-9
