"""The claims that run theory-vs-adam's two sides in another setting (seq2seq, T = 3 and 5, β = β0 = 2,
κ = 0.75): their settings reach both sides, their controls are designed to come out as stated, and a
perturbed prediction flips them like the parent claim."""

from __future__ import annotations

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
    for mod, key, value in (
        (seq2seq, "task", "seq2seq"),
        (temperature, "beta0", 2.0),
        (width, "kappa", 0.75),
    ):
        pts = [p for p in mod.CLAIM.points("quick") if not p.control]
        assert {getattr(p.p, key) for p in pts} == {value} and {p.p.side for p in pts} == {
            "simulation",
            "theory",
        }
        # all run at d = 100 in the quick profile (temperature decides there directly, no extrapolation)
        assert {p.p.d for p in pts if p.p.side == "simulation"} == {100}
    pts = tokens.CLAIM.points("quick")
    # ᾱ = α (T² + T − 2)/2 = 0.6 at T = 3 and 5, both sides, three seeds of Adam per T
    for t in (3, 5):
        sel = [p.p for p in pts if p.p.tokens == t]
        assert {round(p.alpha * (t * t + t - 2) / 2, 12) for p in sel} == {0.6}
        assert sum(p.side == "simulation" for p in sel) == 3 and sum(p.side == "theory" for p in sel) == 1
    full = [p.p for p in temperature.CLAIM.points("full") if not p.control]
    assert {(p.beta, p.beta0) for p in full} == {(2.0, 2.0)}
    assert {p.d for p in full if p.side == "simulation"} == {100, 200}
    # α is an open knob: the quick map runs 0.5 beside the test's 0.3016
    assert temperature.CLAIM.map_cells("quick") == [("alpha", 0.5)]


def test_controls_as_designed():
    # width: the narrow student misses the theory by 20% and fails; the test setting holds
    rows = _rows(params={"kappa": 0.75}) + _rows(1.2, "narrow", {"kappa": 0.3})
    pw = resolving_power(width.CLAIM, rows)
    assert pw.base == "holds" and pw.controls["narrow"]["got"] == "fails" and "controls 1/1" in pw.label
    # seq2seq: the seq2lab control agrees with the theory and holds
    rows = _rows(params={"task": "seq2seq"}) + _rows(1.0, "seq2lab", {"task": "seq2lab"})
    assert resolving_power(seq2seq.CLAIM, rows).controls["seq2lab"]["got"] == "holds"


@pytest.mark.parametrize("mod", [seq2seq, tokens, temperature, width])
def test_predictions_flip_within_five_percent(mod):
    pw = resolving_power(mod.CLAIM, _rows())
    assert pw.flips["se_test_error"]["+"] is not None and pw.flips["se_test_error"]["+"] <= 0.05
    assert not pw.cannot_fail


def test_theory_points_use_the_setting():
    from attnlab.highdim import Setting, state_evolution

    p = next(q for q in temperature.CLAIM.points("quick", overrides={"nodes": 512}) if q.p.side == "theory")
    got = temperature.CLAIM.run(p).metrics["se_test_error"]
    ref = state_evolution(Setting(lam=0.01, beta=2.0, beta0=2.0), 0.3016, nodes=512)
    assert got == ref.test_error
    assert temperature.CLAIM.run(p).metrics["se_test_error_stderr"] == ref.stderr["test_error"] > 0


def test_temperature_decides_at_the_largest_d_only():
    # d = 100 misses by 10% (would fail), d = 200 within 1% (holds): the verdict is d = 200's, and the
    # d = 100 gap is reported beside it without deciding; swapped, it fails
    def rows(f100, f200):
        th = {"se_test_error": 0.17, "se_train_loss": 0.012, "se_converged": True}
        out = [Row("x", {"side": "theory", "alpha": 0.3016, "lam": 0.01, "rep": 0}, "ok", th)]
        for d, f in ((100, f100), (200, f200)):
            for rep in range(4):
                j = 1 + 0.002 * (rep - 1)
                m = {"sim_test_error": 0.17 * f * j, "sim_train_loss": 0.012 * f * j}
                prm = {"side": "simulation", "alpha": 0.3016, "lam": 0.01, "d": d, "rep": rep}
                out.append(Row("x", prm, "ok", m))
        return out

    v = temperature.verdict(rows(1.10, 1.01))
    assert v.status == "holds" and v.numbers["d"] == 200 and v.branch == "seed-mean gap"
    assert v.numbers["rel_gap_test_error_a0.3016_l0.01_d100"] == pytest.approx(1.10 * 1.001 - 1, rel=1e-9)
    assert temperature.verdict(rows(1.01, 1.10)).status == "fails"


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
    rows = _rows(params={"beta": 2.0}) + _rows(1.5, "beta_one_erm", {"beta": 2.0, "sim_beta": 1.0})
    assert resolving_power(temperature.CLAIM, rows).controls["beta_one_erm"]["got"] == "fails"
