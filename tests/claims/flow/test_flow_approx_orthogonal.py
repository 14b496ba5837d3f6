"""flow.approx-orthogonal: the verdict rule on synthetic rows, its negative control, one real point."""

import pickle

import numpy as np
import pytest
import torch

from attnlab.claims.flow.approx_orthogonal import CLAIM
from attnlab.dynamics import Heads, critical_deltas, init, log_energy, velocity
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _row(space, c, n=16, rep=0, control="", broke=3, kept=200, flat_rate=0.0):
    params = {"space": space, "n": n, "rep": rep}
    if control:
        params["control"] = control
    m = {
        "c": c,
        "kept": kept,
        "broke": broke,
        "spearman_log_dcrit_log_kappa": 0.8,
        "rate_at_zero": flat_rate if space == "flat" else 0.02,
        "largest_delta_without_fall": 1.0,
    }
    return Row(f"{space}{n}{rep}{control}", params, "ok", m)


def test_rule_and_control_on_synthetic_rows():
    test = [_row("sphere", 10.0 * (n / 16), n=n, rep=j) for j in (0, 1) for n in (16, 32, 64)]
    test.append(_row("flat", 5.0))
    v = CLAIM.decide(test)  # every point has a linear bound: the smallest c bounds them all
    assert v.status == "holds" and v.branch == "linear bound" and v.numbers["c_min"] == 10.0
    # the law in n is reported (c ∝ n here), not decided
    assert v.numbers["exponent_n"] == pytest.approx(1.0, abs=1e-12)
    # a state with κ > 0 that falls at the smallest δ: c = 0, no linear bound
    v = CLAIM.decide([_row("sphere", 0.0), *test[1:]])
    assert v.status == "fails" and v.branch == "linear bound"
    # flat space must be exactly monotone at δ = 0
    assert CLAIM.decide([*test[:-1], _row("flat", 5.0, flat_rate=0.01)]).status == "fails"
    # nothing broke within the grid: c only bounded by the grid edge -> inconclusive
    v = CLAIM.decide([_row("sphere", 10.0, broke=0), _row("flat", 5.0)])
    assert v.status == "inconclusive" and v.regime
    assert CLAIM.decide([_row("sphere", 10.0, kept=20), _row("flat", 5.0)]).status == "inconclusive"
    ctrl = [
        _row("sphere", 0.0, control="values-not-aligned"),
        _row("flat", 5.0, control="values-not-aligned"),
    ]
    c = resolving_power(CLAIM, test + ctrl).controls["values-not-aligned"]
    assert c["got"] == "fails" and c["same_branch"]


def test_replicated_tokens_give_the_same_margins_at_every_n():
    # the usa field and E_h average over tokens: n/16 copies of 16 points have the margins of the 16 points
    x16 = init.uniform(batch=8, n=4, d=8, generator=torch.Generator().manual_seed(3))
    grid = [0.0, 1e-2, 0.1, 1.0]
    a = critical_deltas(2, 8, x16, 1.0, "sphere", grid, 7)
    b = critical_deltas(2, 8, x16.repeat_interleave(4, dim=1), 1.0, "sphere", grid, 7)
    torch.testing.assert_close(a.kappa, b.kappa, rtol=1e-10, atol=1e-14)
    assert torch.equal(a.delta_ok, b.delta_ok)


def test_critical_deltas_against_central_differences():
    g = torch.Generator().manual_seed(0)
    x = init.uniform(batch=64, n=8, d=8, generator=g)
    grid = [0.0, 1e-3, 1e-2, 0.1, 1.0]
    cd = critical_deltas(2, 8, x, 1.0, "sphere", grid, 5)
    base = Heads.approx_orthogonal(2, 8, 0.0, generator=torch.Generator().manual_seed(5))
    v = velocity(base, x, 1.0, "sphere")
    h = 1e-6  # central difference of log E_h: truncation ~1e-12, cancellation ~1e-10 relative
    fd = (log_energy(base, x + h * v, 1.0) - log_energy(base, x - h * v, 1.0)) / (2 * h)  # (B, H)
    np.testing.assert_allclose(cd.kappa.numpy(), fd.min(-1).values.numpy(), atol=1e-7)
    # states that never broke have δ_ok = 1; a state that broke is safe at δ_ok and falls at the next δ
    for b in np.nonzero(cd.broke.numpy())[0][:3]:
        k = grid.index(float(cd.delta_ok[b]))
        spec = Heads.approx_orthogonal(2, 8, grid[k + 1], generator=torch.Generator().manual_seed(5))
        xb = x[b : b + 1]
        vb = velocity(spec, xb, 1.0, "sphere")
        fdb = (log_energy(spec, xb + h * vb, 1.0) - log_energy(spec, xb - h * vb, 1.0)) / (2 * h)
        assert float(fdb.min()) < 0
    assert np.all(cd.delta_ok.numpy()[~cd.broke.numpy()] == 1.0)
    assert cd.rate[0] == float((cd.kappa < -1e-12).double().mean())  # δ = 0: the margin's sign


def test_quick_point_runs():
    p = next(
        p for p in CLAIM.points("quick", overrides={"batch": 64, "n": 8}) if p.params["space"] == "sphere"
    )
    m = CLAIM.run(p).metrics
    assert m["kept"] > 0 and (m["c"] is None or m["c"] >= 0)
    assert pickle.loads(pickle.dumps(m)) == m
