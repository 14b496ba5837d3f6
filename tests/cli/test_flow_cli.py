"""``attnlab flow`` commands: JSON contract and reference values."""

import json

import pytest
from typer.testing import CliRunner

from attnlab.cli.flow import app

runner = CliRunner()


def run_json(*args):
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_beta_star_json():
    out = run_json("beta-star", "--heads", "2", "--n", "32")
    assert out["c_star"] == pytest.approx(0.618034, abs=5e-7)
    assert out["beta_star"] == pytest.approx(1.4764, abs=5e-5)
    assert out["valid"] is True
    assert out["beta_form2"] == pytest.approx(1.717, abs=5e-4)
    assert run_json("beta-star", "--heads", "3", "--n", "128")["beta_star"] == pytest.approx(1.6348, abs=5e-5)


def test_beta_star_invalid_and_infinite():
    neg = run_json("beta-star", "--heads", "4", "--n", "8")
    assert neg["valid"] is False and neg["beta_star"] == pytest.approx(-0.174, abs=5e-4) and neg["note"]
    one = run_json("beta-star", "--heads", "1", "--n", "8")
    assert one["beta_star"] is None and one["valid"] is False and "infinite" in one["note"]


def test_equiangular_json():
    out = run_json("equiangular", "--n", "32", "--beta", "1", "--strengths", "1")
    assert out["t_star"] == pytest.approx(5.27, abs=5e-3)  # docs/flow.md B6 reference
    assert out["early_rate"] == pytest.approx(2 / (2.718281828459045 + 31), rel=1e-12)
    assert out["late_rate"] == pytest.approx(2.0)
    two = run_json("equiangular", "--n", "32", "--beta", "1", "--strengths", "1,0.5", "--target", "0.9")
    assert two["late_rate"] == pytest.approx(3.0) and two["t_star"] > 0


def test_simulate_json(tmp_path):
    fig = tmp_path / "e.png"
    out = run_json(
        "simulate",
        "--n",
        "8",
        "--d",
        "3",
        "--heads",
        "2",
        "--beta",
        "1",
        "--kind",
        "usa",
        "--time",
        "2",
        "--batch",
        "4",
        "--figure",
        str(fig),
    )
    for key in ("energy_start", "energy_end", "energy_monotone", "cluster_fraction", "steps"):
        assert key in out
    assert out["energy_monotone"] is True  # Thm 11: usa, symmetric, V = M
    assert out["energy_end"] >= out["energy_start"]
    assert out["steps"] == 40 and 0 <= out["cluster_fraction"] <= 1
    assert fig.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["beta-star", "--heads", "0", "--n", "8"],
        ["equiangular", "--n", "8", "--beta", "1", "--strengths", "1,x"],
        ["simulate", "--n", "8", "--d", "3", "--heads", "2", "--beta", "-1", "--time", "1"],
        ["simulate", "--n", "8", "--d", "3", "--heads", "2", "--beta", "1", "--time", "1", "--kind", "gelu"],
    ],
)
def test_bad_input_raises_value_error(args):
    res = runner.invoke(app, args)
    assert res.exit_code != 0
    assert isinstance(res.exception, ValueError) or type(res.exception).__name__ == "UsageError"
