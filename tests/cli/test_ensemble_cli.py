"""``attnlab ensemble hdi|decompose``: JSON contract and reference values."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from attnlab.cli.common import UsageError
from attnlab.cli.ensemble import app

runner = CliRunner()


def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "layout, hdi",
    [("orthogonal", 1.0), ("shared", 0.0)],
)
def test_hdi_reference_layouts(layout, hdi):
    out = _json(["hdi", "--d", "384", "--heads", "12", "--dk", "32", "--layout", layout])
    assert out["hdi"] == pytest.approx(hdi, abs=1e-12)
    assert out["hdi_null"] == pytest.approx(0.916667, abs=1e-6)
    for key in ("hdi_z", "mean_angle_deg"):
        assert key in out


def test_hdi_random_layout_sits_at_the_null():
    out = _json(["hdi", "--d", "384", "--heads", "12", "--dk", "32", "--seed", "3"])
    # one draw of random subspaces: within a few null standard deviations (sd 4.15e-4)
    assert abs(out["hdi"] - 0.916667) < 5 * 4.15e-4
    assert abs(out["hdi_z"]) < 5
    assert out["hdi_null_sd"] == pytest.approx(4.15e-4, rel=2e-3)
    assert 70 < out["mean_angle_deg"] < 80


def test_hdi_bad_input_is_a_usage_error():
    for args in (
        ["--heads", "1", "--dk", "2"],
        ["--heads", "3", "--dk", "9"],
        ["--heads", "3", "--dk", "2", "--layout", "weird"],
    ):
        res = runner.invoke(app, ["hdi", "--d", "8", *args])
        assert res.exit_code != 0
        assert isinstance(res.exception, (UsageError, ValueError))


def test_decompose_json_and_table():
    out = _json(["decompose", "--reps", "10", "--queries", "20", "--n", "50"])
    for key in ("bias2", "variance", "covariance", "mse", "terms_sum", "identity_rel_error"):
        assert key in out
    assert out["terms_sum"] == pytest.approx(out["mse"], rel=1e-12)
    res = runner.invoke(app, ["decompose", "--reps", "5", "--queries", "10", "--n", "30"])
    assert res.exit_code == 0 and "covariance" in res.stdout
