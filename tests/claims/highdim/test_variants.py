"""The claims that run theory-vs-adam's two sides in another setting (seq2seq, T = 3 and 5, β = β0 = 2,
κ = 0.75): their settings reach both sides, their controls are designed to come out as stated, and a
perturbed prediction flips them like the parent claim."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.claims.highdim import seq2seq, temperature, tokens, width
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _rows(sim_factor=1.01, control="", params=None):
    params = params or {}
    extra = {"control": control} if control else {}
    th = {"se_test_error": 0.17, "se_train_loss": 0.012, "se_converged": True}
    rows = [Row("x", {"side": "theory", "alpha": 0.5, "lam": 0.01, "rep": 0} | params | extra, "ok", th)]
    for rep in range(3):
        j = 1 + 0.002 * (rep - 1)
        m = {"sim_test_error": 0.17 * sim_factor * j, "sim_train_loss": 0.012 * j}
        rows.append(
            Row(
                "x",
                {"side": "simulation", "alpha": 0.5, "lam": 0.01, "d": 100, "rep": rep} | params | extra,
                "ok",
                m,
            )
        )
    return rows


def test_settings_reach_both_sides():
    for mod, key, value, sizes in (
        (seq2seq, "task", "seq2seq", {100: 3}),
        (temperature, "beta0", 2.0, {40: 12, 60: 8, 100: 6}),
        (width, "kappa", 0.75, {100: 3}),
    ):
        pts = [p for p in mod.CLAIM.points("quick") if not p.control and not p.cell]
        assert {getattr(p.p, key) for p in pts} == {value} and {p.p.side for p in pts} == {
            "simulation",
            "theory",
        }
        # the seeds per d of the ERM side (temperature: three sizes, more seeds where a seed is cheap)
        sims = [p.p.d for p in pts if p.p.side == "simulation"]
        assert {d: sims.count(d) for d in set(sims)} == sizes
    pts = [p for p in tokens.CLAIM.points("quick") if not p.control]
    # ᾱ = α (T² + T − 2)/2 = 0.6 at T = 3 and 5, both sides, three seeds of Adam per T
    for t in (3, 5):
        sel = [p.p for p in pts if p.p.tokens == t]
        assert {round(p.alpha * (t * t + t - 2) / 2, 12) for p in sel} == {0.6}
        assert sum(p.side == "simulation" for p in sel) == 3 and sum(p.side == "theory" for p in sel) == 1
    full = [p.p for p in temperature.CLAIM.points("full") if not p.control]
    assert {(p.beta, p.beta0) for p in full} == {(2.0, 2.0)}
    # full: decided at the large sizes, 16, 12 and 10 seeds at d = 100, 150, 200
    pts = temperature.CLAIM.points("full")
    sims = [p.p.d for p in pts if not p.control and not p.cell and p.p.side == "simulation"]
    assert {d: sims.count(d) for d in set(sims)} == {100: 16, 150: 12, 200: 10}
    # α is an open knob: the quick map runs 0.5 beside the test's 0.3016, the full one the published range
    assert temperature.CLAIM.map_cells("quick") == [("alpha", 0.5)]
    full_cells = [a for _, a in temperature.CLAIM.map_cells("full")]
    assert full_cells == [0.45, 0.5, 0.75, 1.0]


def test_controls_as_designed():
    # width: the narrow student misses the theory by 20% and fails; the test setting holds
    rows = _rows(params={"kappa": 0.75}) + _rows(1.2, "narrow", {"kappa": 0.3})
    pw = resolving_power(width.CLAIM, rows)
    assert pw.base == "holds" and pw.controls["narrow"]["got"] == "fails" and "controls 1/1" in pw.label
    # seq2seq: the seq2lab control agrees with the theory and holds
    rows = _rows(params={"task": "seq2seq"}) + _rows(1.0, "seq2lab", {"task": "seq2lab"})
    assert resolving_power(seq2seq.CLAIM, rows).controls["seq2lab"]["got"] == "holds"
    # seq2seq and tokens carry theory-vs-adam's doubled-λ̃ control: 30% off, it fails through the same branch
    for mod, prm in ((seq2seq, {"task": "seq2seq"}), (tokens, {"tokens": 3})):
        rows = _rows(params=prm) + _rows(1.3, "doubled_lam", prm | {"sim_lam_scale": 2.0})
        c = resolving_power(mod.CLAIM, rows).controls["doubled_lam"]
        assert c["got"] == "fails" and c["as_designed"] and c["same_branch"]
        ctrl = [p for p in mod.CLAIM.points("quick") if p.control == "doubled_lam"]
        assert ctrl and all(p.p.sim_lam_scale == 2.0 for p in ctrl)


@pytest.mark.parametrize("mod", [seq2seq, tokens, width])
def test_predictions_flip_within_five_percent(mod):
    pw = resolving_power(mod.CLAIM, _rows())
    assert pw.flips["se_test_error"]["+"] is not None and pw.flips["se_test_error"]["+"] <= 0.05
    assert not pw.cannot_fail


def test_theory_points_use_the_setting():
    from attnlab.highdim import Setting, state_evolution

    over = {"nodes": 512, "theory_solves": 1}
    p = next(q for q in temperature.CLAIM.points("quick", overrides=over) if q.p.side == "theory")
    got = temperature.CLAIM.run(p).metrics["se_test_error"]
    ref = state_evolution(Setting(lam=0.01, beta=2.0, beta0=2.0), 0.3016, nodes=512)
    assert got == ref.test_error
    assert temperature.CLAIM.run(p).metrics["se_test_error_stderr"] == ref.stderr["test_error"] > 0
    # the claim's rows combine independent solves on disjoint scrambles (four a solve: seeds 0 and 4)
    assert {q.p.theory_solves for q in temperature.CLAIM.points("quick") if q.p.side == "theory"} == {4}
    assert {q.p.theory_solves for q in temperature.CLAIM.points("full") if q.p.side == "theory"} == {8}
    p2 = next(
        q
        for q in temperature.CLAIM.points("quick", overrides={"nodes": 512, "theory_solves": 2})
        if q.p.side == "theory"
    )
    m = temperature.CLAIM.run(p2).metrics
    other = state_evolution(Setting(lam=0.01, beta=2.0, beta0=2.0), 0.3016, nodes=512, seed=4)
    assert m["se_solves"] == m["se_solves_used"] == 2 and m["se_branches"] == 1
    assert m["se_test_error"] == pytest.approx((ref.test_error + other.test_error) / 2, rel=1e-12)


class _FP:
    """A stand-in for a FixedPoint: the fields solves_row reads."""

    def __init__(self, q, te, tl, se=(0.01, 0.001, 0.0001), converged=True):
        self.q, self.test_error, self.train_loss, self.converged = q, te, tl, converged
        self.stderr = {"q": se[0], "test_error": se[1], "train_loss": se[2]}


def test_solves_row_by_hand():
    # one fixed point: the mean, and the larger of the spread over √n and the pooled own errors (rms / √n)
    fps = [_FP(2.0 + 0.01 * k, 0.27 + 0.002 * k, 0.0848 + 1e-5 * k) for k in range(4)]
    m = temperature.solves_row(fps)
    te = np.array([0.27, 0.272, 0.274, 0.276])
    assert m["se_test_error"] == pytest.approx(te.mean(), rel=1e-12)
    assert m["se_test_error_stderr"] == pytest.approx(te.std(ddof=1) / 2, rel=1e-12)  # 1.3e-3 > 1e-3/2
    assert m["se_train_loss_stderr"] == pytest.approx(1e-4 / 2, rel=1e-12)  # own errors exceed the spread
    assert (m["se_branches"], m["se_solves_used"], m["se_solves_converged"], m["se_converged"]) == (
        1,
        4,
        4,
        True,
    )
    # a second branch (q twice as large) with a higher training loss is left out, whatever its size
    big = [_FP(5.0 + 0.02 * k, 0.36, 0.0861) for k in range(5)]
    m2 = temperature.solves_row(fps + big)
    assert m2["se_branches"] == 2 and m2["se_solves_used"] == 4 and m2["se_test_error"] == m["se_test_error"]
    # and taken when its training loss is the lower one
    low = [_FP(5.0 + 0.02 * k, 0.36, 0.0800) for k in range(3)]
    assert temperature.solves_row(fps + low)["se_test_error"] == pytest.approx(0.36, rel=1e-12)
    # a lone solve between the branches, with a lower training loss the others do not share, does not win
    lone = _FP(3.5, 0.31, 0.065)
    m3 = temperature.solves_row(fps + [lone])
    assert m3["se_branches"] == 2 and m3["se_test_error"] == m["se_test_error"]
    # solves whose scrambles disagree on the training loss (relative standard error above 10%) resolve no
    # fixed point: left out, even three of them with the lowest training loss (as measured at α = 1: 0.065 ±
    # 0.021, -3.8 ± 3.9); at 10% exactly a solve is kept
    wild = [_FP(5.9, 0.36, -3.8, se=(1.5, 0.02, 3.9)), _FP(5.8, 0.36, 0.065, se=(1.5, 0.02, 0.021))] * 2
    m4 = temperature.solves_row(fps + wild)
    assert m4["se_branches"] == 1 and m4["se_solves_used"] == 4 and m4["se_test_error"] == m["se_test_error"]
    edge = [_FP(2.0 + 0.01 * k, 0.27, 0.08, se=(0.01, 0.001, 0.008)) for k in range(3)]
    assert temperature.solves_row(edge)["se_solves_used"] == 3
    nudge = [_FP(2.0 + 0.01 * k, 0.27, 0.08, se=(0.01, 0.001, 0.00801)) for k in range(3)]
    assert temperature.solves_row(nudge)["se_solves_used"] == 0
    # a relative gap of 24% in q stays one fixed point, 26% splits it (BRANCH_GAP = 0.25)
    assert temperature.solves_row([_FP(2.0, 0.27, 0.08), _FP(2.48, 0.27, 0.08)])["se_branches"] == 1
    assert temperature.solves_row([_FP(2.0, 0.27, 0.08), _FP(2.52, 0.27, 0.08)])["se_branches"] == 2


def test_solves_row_converged_rule():
    ok = [_FP(2.0, 0.27, 0.0848), _FP(2.01, 0.271, 0.0849)]
    # two solves on the selected fixed point: no usable spread, not converged
    assert temperature.solves_row(ok)["se_converged"] is False
    # three, two of them converged: converged; one of four: not
    assert temperature.solves_row(ok + [_FP(2.02, 0.272, 0.085, converged=False)])["se_converged"] is True
    half = [_FP(2.0 + 0.01 * k, 0.27, 0.0848, converged=k == 0) for k in range(4)]
    assert temperature.solves_row(half)["se_converged"] is False
    # values that are not finite are dropped; none finite: an unconverged row with nan predictions
    m = temperature.solves_row([_FP(float("nan"), 0.27, 0.08)] * 3)
    assert m["se_converged"] is False and np.isnan(m["se_test_error"]) and m["se_solves_used"] == 0


def test_unresolved_theory_is_inconclusive_whatever_the_simulations():
    rows = _sizes()
    th = dict(rows[0].metrics, se_solves=8, se_branches=2, se_solves_used=2, se_solves_converged=2)
    th["se_converged"] = False
    bad = [Row(rows[0].point_id, rows[0].params, "ok", th), *rows[1:]]
    v = temperature.verdict(bad)
    assert v.status == "inconclusive" and "unresolved" in v.regime and "2 found" in v.regime
    # the same rows with a resolved theory decide (holds, test_temperature_extrapolates_along_a_tested_trend)
    good = dict(th, se_branches=1, se_solves_used=8, se_converged=True)
    v = temperature.verdict([Row(rows[0].point_id, rows[0].params, "ok", good), *rows[1:]])
    assert v.status == "holds" and v.numbers["se_solves_a0.3016_l0.01"] == [8, 1, 8, 2]


def _sizes(limit=(1.0, 1.0), b=(2.0, 4.0), sizes=(40, 60, 100), bump=0.0, params=None, control=""):
    """Temperature rows: seed means (test error, training loss) = theory × (limit + b/d), with a spread of
    ±1% over four seeds, at each size; ``bump`` adds a relative offset at the middle size only."""
    params, extra = params or {}, ({"control": control} if control else {})
    th = {"se_test_error": 0.17, "se_train_loss": 0.012, "se_converged": True}
    out = [Row("x", {"side": "theory", "alpha": 0.3016, "lam": 0.01, "rep": 0} | params | extra, "ok", th)]
    for d in sizes:
        f = [lim + bb / d + (bump if d == sizes[1] else 0.0) for lim, bb in zip(limit, b)]
        for rep in range(4):
            j = 1 + 0.01 * (rep - 1.5)
            m = {"sim_test_error": 0.17 * f[0] * j, "sim_train_loss": 0.012 * f[1] * j}
            prm = {"side": "simulation", "alpha": 0.3016, "lam": 0.01, "d": d, "rep": rep}
            out.append(Row("x", prm | params | extra, "ok", m))
    return out


def test_trend_chi2_against_a_weighted_polynomial_fit():
    per = {40: (1.10, 0.02), 60: (1.02, 0.01), 100: (1.03, 0.005)}
    got, dof = temperature.trend_chi2(per)
    x = np.array([1 / 40, 1 / 60, 1 / 100])
    y, se = np.array([1.10, 1.02, 1.03]), np.array([0.02, 0.01, 0.005])
    fit = np.polyval(np.polyfit(x, y, 1, w=1 / se), x)  # numpy's weighted least squares, independently
    assert dof == 1 and got == pytest.approx(float(np.sum(((y - fit) / se) ** 2)), rel=1e-9)
    assert temperature.trend_chi2({40: (1.05, 0.01), 60: (1 + 2 / 60, 0.01), 100: (1.02, 0.01)})[0] < 1e-20


def test_temperature_extrapolates_along_a_tested_trend():
    # seed means 1 + 2/d and 1 + 4/d of the theory (5% above it at d = 40, 4% at d = 100): the limit is
    # the theory, so it holds through the extrapolated gap, with the gap at each d reported
    v = temperature.verdict(_sizes())
    assert v.status == "holds" and v.branch == "extrapolated gap" and v.numbers["ds"] == [40, 60, 100]
    assert v.numbers["rel_gap_train_loss_a0.3016_l0.01_d100"] == pytest.approx(0.04, rel=1e-6)
    assert v.numbers["rel_gap_train_loss_a0.3016_l0.01"] < 1e-9  # the extrapolated gap
    # every finite-size form holds too (1/d data: a + b/√d and a + b/d² are off by less than their bands)
    assert [f[1] for f in v.numbers["forms"].values()] == ["holds"] * 3
    # the same trend toward a limit 15% off fails along every form, through the same branch
    v = temperature.verdict(_sizes(limit=(1.0, 1.15)))
    assert v.status == "fails" and v.branch == "extrapolated gap"
    assert [f[1] for f in v.numbers["forms"].values()] == ["fails"] * 3
    # 8% off: fails along a + b/d (1.45 of its tolerance) and a + b/d², holds along a + b/√d, whose limit
    # lies lower and whose standard error is larger: form-dependent, not decided
    v = temperature.verdict(_sizes(limit=(1.0, 1.08)))
    assert v.status == "inconclusive" and "form-dependent" in v.regime
    assert {p: f[1] for p, f in v.numbers["forms"].items()} == {"1": "fails", "0.5": "holds", "2": "fails"}
    assert v.numbers["forms"]["1"][0] == pytest.approx(v.numbers["worst_gap_over_tol"], rel=1e-12)
    # a middle size 3% off the line (0.4% standard errors) refutes the trend: inconclusive
    v = temperature.verdict(_sizes(bump=0.03))
    assert v.status == "inconclusive" and "a + b/d" in v.regime
    # two sizes determine the line without testing it
    v = temperature.verdict(_sizes(sizes=(60, 100)))
    assert v.status == "inconclusive" and "2 size(s)" in v.regime


def test_temperature_prediction_flips_it():
    pw = resolving_power(temperature.CLAIM, _sizes())
    assert pw.flips["se_train_loss"]["+"] is not None and pw.flips["se_train_loss"]["+"] <= 0.10
    assert not pw.cannot_fail


def test_temperature_control_trains_at_beta_one(monkeypatch):
    # the control's ERM runs at β = β0 = 1 while its theory point stays at β = β0 = 2
    import attnlab.highdim as hd

    seen = []

    def spy(d, alpha, **kw):
        seen.append((kw["beta"], kw["beta0"]))
        raise RuntimeError("stop")

    monkeypatch.setattr(hd, "simulate", spy)
    pts = [p for p in temperature.CLAIM.points("quick") if p.control == "beta_one_erm"]
    sim = next(p for p in pts if p.p.side == "simulation")
    with pytest.raises(RuntimeError, match="stop"):
        temperature.CLAIM.run(sim)
    assert seen == [(1.0, 1.0)]
    th = next(p for p in pts if p.p.side == "theory")
    assert (th.p.beta, th.p.beta0) == (2.0, 2.0)
    rows = _sizes(params={"beta": 2.0}) + _sizes((1.5, 1.2), params={"sim_beta": 1.0}, control="beta_one_erm")
    c = resolving_power(temperature.CLAIM, rows).controls["beta_one_erm"]
    assert c["got"] == "fails" and c["same_branch"]


@pytest.mark.parametrize(
    "value, says",
    [(0, "expected an integer in [1, inf), got 0"), (1.5, "expected int, got 1.5"), (300, "at most 256")],
)
def test_theory_solves_is_checked_before_work(value, says):
    with pytest.raises(ValueError, match="theory_solves") as e:
        temperature.CLAIM.points("quick", overrides={"theory_solves": value})
    assert says in str(e.value)
