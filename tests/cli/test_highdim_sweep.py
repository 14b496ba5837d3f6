"""`attnlab highdim sweep`: state evolution along α with continuation; JSON contract and bad input."""

import json

import pytest

from attnlab.cli.main import main
from attnlab.highdim import Setting, state_evolution


def test_sweep_json_matches_independent_solves(capsys):
    # continuation changes the start, not the fixed point: each point equals a solve from the default
    # start to the solver's accuracy (tol 1e-6 at both ends: 1e-5 leaves a factor 5 for the two errors)
    rc = main(["highdim", "sweep", "--alphas", "0.5,0.6", "--nodes", "256", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    pts = out["points"]
    assert [p["alpha"] for p in pts] == [0.5, 0.6] and out["lam_tilde"] == 0.01
    assert all(p["converged"] for p in pts)
    assert pts[1]["test_error"] < pts[0]["test_error"]  # more data, lower error (docs/highdim.md C3)
    for p in pts:
        fp = state_evolution(Setting(), p["alpha"], nodes=256)
        assert p["test_error"] == pytest.approx(fp.test_error, rel=1e-5)
        assert p["q"] == pytest.approx(fp.q, rel=1e-5)


def test_sweep_with_a_power_law_target(capsys):
    """--gamma/--d: the fixed points of a power-law target along α, each equal to an independent solve on the
    same spectrum (as above, tol 1e-6 at both ends), the excess error falling with α."""
    from attnlab.highdim import power_law_spectrum

    rc = main(
        ["highdim", "sweep", "--alphas", "0.05,0.1", "--nodes", "512", "--gamma", "1", "--d", "40", "--json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert (out["target"], out["gamma"], out["d"]) == ("power-law", 1.0, 40)
    assert out["top_share"] == pytest.approx(0.617191005078116, rel=1e-12)  # 1/Σ_{i≤40} i⁻²
    pts = out["points"]
    assert pts[1]["test_error"] < pts[0]["test_error"]
    s = Setting(target=power_law_spectrum(40, 1.0))
    for p in pts:
        fp = state_evolution(s, p["alpha"], nodes=512)
        assert p["test_error"] == pytest.approx(fp.test_error, rel=1e-5)
        assert p["q"] == pytest.approx(fp.q, rel=1e-5)


@pytest.mark.parametrize(
    ("args", "argument"),
    [
        (["--alphas", "0.5,abc"], "--alphas"),
        (["--alphas", "0.5,-1"], "--alphas"),
        (["--alphas", "0.5", "--tol", "0"], "--tol"),
        (["--alphas", "0.5", "--nodes", "3"], "--nodes"),
        (["--alphas", "0.5", "--lam", "-1"], "--lam"),
        (["--alphas", "0.5", "--d", "50"], "--d"),
        (["--alphas", "0.5", "--gamma", "1"], "--d"),
        (["--alphas", "0.5", "--gamma", "0", "--d", "50"], "--gamma"),
    ],
)
def test_sweep_bad_input(capsys, args, argument):
    rc = main(["highdim", "sweep", *args])
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "\n" not in err and err.startswith(f"error: {argument}: expected") and "Traceback" not in err


def test_cold_sweep_same_points_more_evaluations(capsys):
    # continuation saves map evaluations, not accuracy: the cold sweep finds the same fixed points (1e-5,
    # as above) with at least as many evaluations in total
    out = {}
    for flag in ([], ["--cold"]):
        rc = main(["highdim", "sweep", "--alphas", "0.3,0.35,0.4", "--nodes", "256", "--json", *flag])
        assert rc == 0
        out[bool(flag)] = json.loads(capsys.readouterr().out)
    warm, cold = out[False], out[True]
    assert warm["continuation"] and not cold["continuation"]
    assert cold["map_evaluations"] >= warm["map_evaluations"]
    assert cold["map_evaluations"] == sum(p["iterations"] for p in cold["points"])
    for a, b in zip(warm["points"], cold["points"]):
        assert a["q"] == pytest.approx(b["q"], rel=1e-5) and a["sigma"] == pytest.approx(b["sigma"], rel=1e-5)


def test_sweep_reports_where_each_solve_started(capsys, monkeypatch):
    # continuation: the first point from the default start, the others from their neighbour; --cold: all
    # from the default start
    for flag, want in (([], ["default", "neighbour"]), (["--cold"], ["default", "default"])):
        rc = main(["highdim", "sweep", "--alphas", "0.5,0.6", "--nodes", "256", "--json", *flag])
        assert rc == 0
        assert [p["start"] for p in json.loads(capsys.readouterr().out)["points"]] == want
    # a warm start solved again from the default start (FixedPoint.start) is reported as such; the solver's
    # retry itself is tested in tests/highdim/test_se_failures.py
    import dataclasses

    import attnlab.highdim as hd

    real = hd.sweep

    def retried(s, grid, **kw):
        fps = real(s, grid, **kw)
        return [fps[0], dataclasses.replace(fps[1], start="default")]

    monkeypatch.setattr(hd, "sweep", retried)
    rc = main(["highdim", "sweep", "--alphas", "0.5,0.6", "--nodes", "256", "--json"])
    assert rc == 0
    assert [p["start"] for p in json.loads(capsys.readouterr().out)["points"]] == ["default", "default"]
