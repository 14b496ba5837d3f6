"""flow.value-perturbation: identities, the size exponent's power, the softmax control, one real point."""

import pytest

from attnlab.claims.flow.value_perturbation import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Predict, Row


def _row(size, mx, viol=10, control="", d_over_k=0.1, floor=0.9, jitter=(1.0,) * 6):
    params = {"size": size, **({"control": control} if control else {})}
    m = {
        "violations": viol,
        "trials": 64,
        "violation_rate_by_window": {"6": viol / 128, "20": viol / 64},
        "max_rel_violation": mx * max(jitter),
        "max_rel_violation_by_draw": [mx * j if viol else 0.0 for j in jitter],
        "max_D_over_K_size2": d_over_k if viol else None,
        "max_D_over_cauchy_schwarz": 0.8 if viol else None,
        "max_violation_over_floor": floor if viol else None,
        "K": 29.6,
    }
    return Row(f"{size}{control}", params, "ok", m)


def _test_rows(exp=2.0, spread=0.0):
    # replicate j's violations carry a factor s^(spread·(j − 2.5)): exponents 2 ± spread·(j − 2.5)
    out = [_row(0.0, 0.0, viol=0)]
    for s in (0.001, 0.01, 0.1, 1.0):
        out.append(_row(s, 0.1 * s**exp, jitter=tuple(s ** (spread * (j - 2.5)) for j in range(6))))
    return out


def test_exponent_interval_decides_with_power():
    rows = _test_rows(spread=0.02)  # replicate exponents 1.95 … 2.05
    v = CLAIM.decide(rows)
    assert v.status == "holds" and v.branch == "exponent CI" and v.band == 0.1
    assert v.numbers["exponent"] == pytest.approx(2.0, abs=1e-9) and v.numbers["replicates"] == 6
    # predicted 2.5: the interval (1.96, 2.04) lies below the band (2.25, 2.75)
    assert CLAIM.decide(rows, Predict({"exponent": 1.25})).status == "fails"
    assert CLAIM.decide(_test_rows(exp=1.0)).status == "fails"  # linear violations: not robust
    wide = CLAIM.decide(_test_rows(spread=0.3))  # exponents 1.25 … 2.75: the interval straddles the band
    assert wide.status == "inconclusive" and wide.numbers["replicates_needed"] > 6
    ctrl = [_row(s, 0.01, control="softmax-kind") for s in (0.0, 0.001, 0.01, 0.1, 1.0)]
    pw = resolving_power(CLAIM, rows + ctrl)
    assert pw.flips["exponent"] == {"+": 0.1, "-": 0.1}  # band 10%: 5% off stays inside, 10% flips
    assert pw.controls["softmax-kind"]["as_designed"] and not pw.controls["softmax-kind"]["same_branch"]


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
        for p in CLAIM.points("quick", overrides={"batch": 8, "head_draws": 2, "t1": 10.0})
        if p["size"] == 1.0
    )
    m = CLAIM.run(p).metrics
    assert m["violations"] > 0  # size 1: violations are common (docs/flow.md B2)
    assert (
        len(m["max_rel_violation_by_draw"]) == 2
        and max(m["max_rel_violation_by_draw"]) == m["max_rel_violation"]
    )
    assert m["max_D_over_K_size2"] <= 1.0 and m["max_violation_over_floor"] <= 1.0 + 1e-9
