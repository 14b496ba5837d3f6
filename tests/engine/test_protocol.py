"""The claim protocol: typed Params and --set, seeds, controls, resolving power, regime, templates."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from attnlab.engine.power import EPSILONS, resolving_power
from attnlab.engine.protocol import Claim, Grid, Predict, Row, Verdict, render, variant_name

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def pc(monkeypatch):
    """The power test claims, registered in this process and in spawned workers."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_powerclaims")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    import attnlab_powerclaims as m

    return m


def test_set_is_checked_against_params(pc):
    c = pc.CLAIMS[0]
    with pytest.raises(ValueError, match=r"^--set n: expected int, got 'abc'$"):
        c.check_overrides({"n": "abc"})
    with pytest.raises(
        ValueError, match=r"^--set: expected a parameter of attnlab_powerclaims \(mu, noise, n"
    ):
        c.check_overrides({"nn": 3})
    with pytest.raises(ValueError, match=r"^--set mode: expected one of 'a', 'b', got 'c'$"):
        c.check_overrides({"mode": "c"})
    with pytest.raises(ValueError, match=r"^--set rep: expected an integer >= 1"):
        c.check_overrides({"rep": 0})
    with pytest.raises(ValueError, match=r"^--set n: expected int, got 2.5$"):
        c.check_overrides({"n": [2, 2.5]})  # every value of an axis is checked
    assert c.check_overrides({"mu": 2, "n": [10, 20]}) == {"mu": 2, "n": [10, 20]}  # an int is a float
    pts = c.points("quick", overrides={"n": [10, 20]}, controls=False)
    assert sorted({p.p.n for p in pts}) == [10, 20] and len(pts) == 4


def test_list_valued_parameter_takes_one_list_or_an_axis_of_lists(pc):
    @dataclasses.dataclass(frozen=True)
    class P:
        sizes: tuple[int, ...] = (1, 2)  # a parameter whose one value is a list

    c = Claim("t.lv", "theorem", "A", "s", 1, {"quick": Grid(), "full": Grid()}, lambda p: None,
              lambda rows: Verdict("holds", {}, "-"), params=P)  # fmt: skip
    assert [p.params["sizes"] for p in c.points("quick")] == [[1, 2]]
    assert [p.params["sizes"] for p in c.points("quick", overrides={"sizes": [3, 4, 5]})] == [[3, 4, 5]]
    two = c.points("quick", overrides={"sizes": [[3], [4, 5]]})
    assert [p.params["sizes"] for p in two] == [[3], [4, 5]]
    with pytest.raises(ValueError, match=r"--set sizes: expected a list of int, got \['x'\]"):
        c.points("quick", overrides={"sizes": ["x"]})


def test_grid_values_are_checked_when_the_claim_is_defined(pc):
    with pytest.raises(ValueError, match=r"grid 'quick' n: expected int, got 'x'"):
        dataclasses.replace(pc.CLAIMS[0], grids={"quick": Grid({"n": ["x"]}), "full": Grid()})


def test_defaults_do_not_enter_the_seed_but_do_enter_the_point_id(pc):
    c = pc.CLAIMS[0]
    a = c.points("quick", controls=False)
    b = c.points("quick", overrides={"extra": 0.0}, controls=False)  # stated explicitly: new seed
    assert a[0].params["extra"] == 0.0 and a[0].p == pc.Params()
    assert a[0].seed != b[0].seed

    @dataclasses.dataclass(frozen=True)
    class Other(pc.Params):
        more: int = 7  # a field added later, with a default

    c2 = dataclasses.replace(c, params=Other)
    a2 = c2.points("quick", controls=False)
    assert [p.seed for p in a2] == [p.seed for p in a]  # the same draws as before the new field
    assert [p.point_id for p in a2] != [p.point_id for p in a]  # but the full params differ


def test_controls_are_extra_points_and_decided_apart(pc):
    c = pc.CLAIMS[0]
    pts = c.points("quick")
    assert sorted({p.control for p in pts}) == ["", "exact", "shifted"] and len(pts) == 6
    rows = [Row(p.point_id, p.params, "ok", c.run(p).metrics) for p in pts]
    assert c.decide(rows).status == "holds"
    assert c.decide_control("shifted", rows).status == "fails"
    assert c.decide_control("exact", rows).status == "holds"
    power = resolving_power(c, rows)
    assert power.controls["shifted"]["as_designed"] and power.controls["exact"]["as_designed"]
    assert "controls 2/2" in power.label and not power.cannot_fail


def test_power_finds_the_smallest_flipping_perturbation(pc):
    """Mean 1.0 against a 3% window: a prediction 5% off is outside it, 2% off inside."""
    c = pc.CLAIMS[0]
    pts = c.points("quick", overrides={"noise": 0.0}, controls=False)
    rows = [Row(p.point_id, p.params, "ok", c.run(p).metrics) for p in pts]
    assert c.decide(rows, Predict({"target": 1.02})).status == "holds"
    assert c.decide(rows, Predict({"target": 1.05})).status == "fails"
    p = resolving_power(c, rows)
    assert p.flips["target"] == {"+": 0.05, "-": 0.05} and p.label.startswith("±5%")
    assert EPSILONS[0] == 0.01 and EPSILONS[-1] == 0.5


def test_a_claim_nothing_can_flip_is_labelled_cannot_fail(pc):
    c = pc.CLAIMS[1]
    rows = [Row(p.point_id, p.params, "ok", c.run(p).metrics) for p in c.points("quick")]
    p = resolving_power(c, rows)
    assert p.cannot_fail and p.label == "cannot fail"
    # an inconclusive verdict has no power to measure: n/a with its reason, never "cannot fail"
    inc = dataclasses.replace(c, verdict=lambda rows: Verdict.outside("n ≪ d does not hold", {}))
    q = resolving_power(inc, rows)
    assert q.label == "n/a" and q.reason == "n ≪ d does not hold" and not q.cannot_fail
    # a verdict that fails whatever the data cannot hold; a holding positive control shows it could
    always_fails = dataclasses.replace(c, verdict=lambda rows: Verdict("fails", {}, "-"))
    assert resolving_power(always_fails, rows).label == "cannot hold"
    from attnlab.engine.protocol import Control

    mean = pc.CLAIMS[0]
    rows_m = [Row(p.point_id, p.params, "ok", mean.run(p).metrics) for p in mean.points("quick")]
    failing = dataclasses.replace(
        mean, predictions={}, controls={"exact": mean.controls["exact"]}, verdict=_shifted(mean.verdict)
    )
    r = resolving_power(failing, rows_m)
    assert r.base == "fails" and not r.cannot_fail and r.label == "controls 1/1", r
    assert isinstance(mean.controls["exact"], Control)
    ident = dataclasses.replace(c, kind="identity")
    assert resolving_power(ident, rows).label.startswith("identity")


def _shifted(verdict):
    """The test claim's verdict with the test rows (mean 1.0) judged against 1.2, so that they fail,
    and the control rows against 1.0, where the noiseless positive control holds."""

    def v(rows, pred=None):
        from attnlab.engine.protocol import Predict

        return verdict(rows, Predict({"target": 1.2}) if not any(r.control for r in rows) else Predict())

    return v


def test_outside_regime_must_be_inconclusive_and_templates_render():
    with pytest.raises(ValueError, match="regime"):
        Verdict("holds", {}, "-", regime="outside")
    assert render("mean {m:.2f} ({k}) {missing}", {"m": 1.234, "k": None}) == "mean 1.23 (n/a) {missing}"
    assert variant_name({"b": [1, 2], "a": 0.5}) == "a=0.5, b=[1,2]" and variant_name({}) == ""


def test_claim_without_params_keeps_the_grid_names_check():
    c = Claim(
        "t.np",
        "theorem",
        "A",
        "s",
        1,
        {"quick": Grid({"a": [1]}), "full": Grid()},
        lambda p: None,
        lambda rows: Verdict("holds", {}, "-"),
    )
    with pytest.raises(ValueError, match=r"expected a parameter of t.np \(a, rep\), got 'b'"):
        c.points("quick", overrides={"b": 1})
