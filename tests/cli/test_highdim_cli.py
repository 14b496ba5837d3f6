"""`attnlab highdim` commands: JSON contract and bad input."""

import json

import pytest
from typer.testing import CliRunner

from attnlab.cli.highdim import app

runner = CliRunner()


def test_thresholds_json():
    r = runner.invoke(app, ["thresholds", "--kappa0", "0.5", "--noise", "0.5", "--tokens", "2", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for k in (
        "alpha_interp",
        "alpha_bar_interp",
        "alpha_pr",
        "alpha_bar_pr",
        "alpha_bar_pr_unfactorised",
        "alpha_bar_pr_bayes",
    ):
        assert k in out
    assert out["alpha_interp"] == pytest.approx(0.153482, abs=1e-6)


def test_thresholds_noiseless_is_strict_json():
    r = runner.invoke(app, ["thresholds", "--noise", "0", "--json"])
    out = json.loads(r.stdout)
    assert out["alpha_interp"] is None and "note" in out


@pytest.mark.slow
def test_se_json():
    r = runner.invoke(app, ["se", "--alpha", "0.3016", "--lam", "0.01", "--nodes", "2048", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for k in (
        "test_error",
        "train_loss",
        "q",
        "m",
        "sigma",
        "q_hat",
        "m_hat",
        "sigma_hat",
        "rank_fraction",
        "iterations",
        "converged",
    ):
        assert k in out
    assert out["test_error"] == pytest.approx(0.174, rel=0.02)


def test_train_json():
    r = runner.invoke(app, ["train", "--d", "12", "--alpha", "0.5", "--max-steps", "50", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for k in ("test_error", "test_error_clean", "train_loss", "steps", "rank"):
        assert k in out


def test_bad_input_raises_value_error():
    r = runner.invoke(app, ["se", "--alpha", "-1", "--json"])
    assert r.exit_code != 0
    assert isinstance(r.exception, ValueError) and "alpha" in str(r.exception)
    r = runner.invoke(app, ["train", "--d", "8", "--task", "nope", "--json"])
    assert isinstance(r.exception, ValueError) and "task" in str(r.exception)
