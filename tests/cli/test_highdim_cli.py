"""`attnlab highdim` commands: JSON contract and bad input."""

import json
import re

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
    # the quadrature's error bar: four scrambles by default, a standard error per observable
    assert out["scrambles"] == 4 and out["nodes_per_scramble"] == 2048
    for k in ("q", "m", "sigma", "test_error", "train_loss", "s_error"):
        assert 0 < out["stderr"][k] < 0.05 * abs(out[k])


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


def test_spectrum_writes_the_figure(tmp_path):
    # through the top-level app, as a user types it: `attnlab highdim spectrum ...`
    from attnlab.cli.main import app as main_app

    out = tmp_path / "figs" / "spec.png"
    args = ["highdim", "spectrum", "--d", "16", "--alpha", "0.5", "--nodes", "512", "--max-steps", "150"]
    r = runner.invoke(main_app, [*args, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    for k in ("figure", "atom_theory", "atom_sim", "rank_fraction", "max_eigenvalue_theory"):
        assert k in res
    assert res["figure"] == str(out)
    # a PNG (magic bytes) and an SVG beside it
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.with_suffix(".svg").read_text().lstrip().startswith("<?xml")
    assert 0.0 <= res["atom_sim"] <= 1.0
    # the predicted rank fraction (μ_δ((ε, ∞)) from the spectrum's quadrature) against the one the
    # state evolution reports (the mass term of J's quadrature) at the same fixed point: two code
    # paths over the same law, both exact to ~1e-12
    r = runner.invoke(main_app, ["highdim", "se", "--alpha", "0.5", "--nodes", "512", "--json"])
    assert res["rank_fraction"] == pytest.approx(json.loads(r.stdout)["rank_fraction"], abs=1e-9)


@pytest.mark.slow
def test_se_multi_start_json():
    r = runner.invoke(app, ["se", "--alpha", "0.5", "--nodes", "1024", "--multi-start", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["stable"] is True and out["candidates"] >= 1 and out["converged"]


def test_train_device_option():
    import torch

    args = ["train", "--d", "10", "--alpha", "0.5", "--max-steps", "40", "--json"]
    base = json.loads(runner.invoke(app, args).stdout)
    r = runner.invoke(app, [*args, "--device", "cpu"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == base and base["device"] == "cpu"  # "cpu" is the default, bit for bit
    from attnlab.cli.common import UsageError

    r = runner.invoke(app, [*args, "--device", "tpu"])
    assert isinstance(r.exception, UsageError)  # main() prints it as one line, exit status 2
    assert str(r.exception) == "--device: expected cpu, cuda or cuda:N, got 'tpu'"
    if not torch.cuda.is_available():
        r = runner.invoke(app, [*args, "--device", "cuda"])
        assert isinstance(r.exception, UsageError)
        assert str(r.exception) == "--device: expected cpu or an available cuda device, got 'cuda'"


def test_se_reports_its_grid_and_takes_the_finer_one_with_a_target_below_1e_3(cli, request):
    # the product rule's grid in w is in the JSON (`grid`; Sobol nodes have none); with --rtol below λ̃ = 1e-3
    # the solve takes the 16 × 16 grid on 512 label nodes (131072 nodes per scramble: the channels it asks for
    # are recorded and replaced by 512 Sobol nodes to keep the run small)
    out = cli("highdim", "se", "--alpha", "0.5", "--nodes", "9216", "--scrambles", "2", "--json").json()
    assert (out["rule"], out["grid"], out["nodes_per_scramble"]) == ("product", 5, 256 * 25)
    assert out["folded"] is True  # at T = 2 every solve folds its label nodes (channel_nodes.default_fold)
    assert "grid" not in cli("highdim", "se", "--alpha", "0.5", "--nodes", "2048", "--json").json()
    asked = request.getfixturevalue("asked_channels")  # from here on the solves' channels are small
    args = ["--lam", "1e-4", "--alpha", "0.25", "--rtol", "0.5", "--max-scrambles", "8", "--json"]
    r = cli("highdim", "se", *args)
    assert r.code == 0, r.stderr
    out = r.json()
    assert (out["rule"], out["grid"], out["nodes_per_scramble"]) == ("product", 16, 131072)
    assert out["folded"] is True  # a targeted solve's label nodes are folded too (OutputChannel, fold)
    assert set(asked) == {(131072, 16, True)}
    # --no-fold keeps a targeted solve, or the default one, on the whole plane; --fold at T = 2 is the default
    asked.clear()
    out = cli("highdim", "se", *args, "--no-fold").json()
    assert out["folded"] is False and set(asked) == {(131072, 16, False)}
    asked.clear()
    out = cli("highdim", "se", "--lam", "1e-4", "--alpha", "0.25", "--no-fold", "--json").json()
    assert out["folded"] is False and asked == [(73728, None, False)] and "rtol" not in out
    asked.clear()
    out = cli("highdim", "se", "--lam", "1e-4", "--alpha", "0.25", "--fold", "--json").json()
    assert out["folded"] is True and asked == [(73728, None, True)]
    # a target below 2e-3 there takes 2048 label nodes (channel_nodes.target_nodes)
    asked.clear()
    out = cli("highdim", "se", "--lam", "1e-4", "--alpha", "0.25", "--rtol", "1e-3", "--max-scrambles", "8",
              "--json").json()  # fmt: skip
    assert out["nodes_per_scramble"] == 524288 and set(asked) == {(524288, 16, True)}
    r = cli("highdim", "se", "--lam", "1e-5", "--alpha", "0.2", "--rtol", "-1", "--json")
    assert r.code == 2 and r.json()["error"]["argument"] == "--rtol"  # checked before the nodes it sizes
    r = cli("highdim", "se", "--alpha", "0.5", "--tokens", "3", "--fold", "--json")
    assert r.code == 2 and r.json()["error"]["argument"] == "--fold"  # with --json the error is JSON too
    assert "--fold: expected --tokens 2 (the symmetries it folds are those of two tokens), got 3" in r.stderr


def test_se_accuracy_target_json_and_flag(cli, monkeypatch):
    # --rtol adds batches of scrambles until the rule of attnlab.highdim.se_target holds: at λ̃ = 1e-2 on 2048
    # Sobol nodes a scramble's relative spread is at most ~1.2% (Σ), so 1e-2 is met on the minimum of eight
    r = cli("highdim", "se", "--alpha", "0.5", "--nodes", "2048", "--rtol", "1e-2", "--json")
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["accuracy_met"] is True and out["rtol"] == 1e-2 and out["max_scrambles"] == 64
    assert out["scrambles"] >= 8 and out["scrambles"] % 4 == 0
    for k in ("q", "m", "sigma", "test_error", "train_loss"):
        assert out["stderr"][k] <= 1e-2 / 2.36 * abs(out[k])  # t(7) = 2.3646 is the loosest bound from 8 on
    assert "not met" not in r.stderr
    # a target that eight scrambles cannot reach: the point is still reported (exit 0, strict JSON), flagged,
    # with one line on stderr naming what was reached
    args = ["--alpha", "0.5", "--nodes", "2048", "--rtol", "1e-6", "--max-scrambles", "8", "--json"]
    r = cli("highdim", "se", *args)
    assert r.code == 0, r.stderr
    out = r.json()
    assert out["accuracy_met"] is False and out["scrambles"] == 8 and out["converged"] is True
    notes = [ln for ln in r.stderr.splitlines() if "not met" in ln]
    assert len(notes) == 1 and "rtol = 1e-06" in notes[0] and "after 8 scrambles" in notes[0], r.stderr
    # the budget ran out on a converged point: the note says what would meet the target, by the rule (the
    # scrambles grow with the square of the standard error's ratio to its bound) and with more nodes
    ratio = max(out["stderr"][k] / abs(out[k]) for k in ("q", "m", "sigma", "test_error", "train_loss"))
    ratio /= 1e-6 / 2.364624  # the bound rtol / t(7) at eight scrambles (tabulated quantile)
    need = re.search(r"about (\d+) scrambles would meet it \(--max-scrambles\)", notes[0])
    assert need and int(need.group(1)) == pytest.approx(8 * ratio**2, rel=1e-4), notes[0]
    assert "times its bound" in notes[0] and f"--nodes {4 * out['nodes_per_scramble']}" in notes[0], notes[0]
    # a targeted quantity of exactly zero with an error bar (planted on a real solve's point): the note
    # names it, with no estimate of what would meet the target, instead of a division by zero
    import dataclasses

    import attnlab.highdim as hd

    real = hd.state_evolution

    def zero_loss(*a, **k):
        return dataclasses.replace(real(*a, **k), train_loss=0.0, accuracy_met=False)

    monkeypatch.setattr(hd, "state_evolution", zero_loss)
    r = cli("highdim", "se", *args)
    assert r.code == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if "not met" in ln]
    assert len(notes) == 1 and "standard error is inf (train_loss)" in notes[0], r.stderr
    assert "would meet it" not in notes[0]
    monkeypatch.setattr(hd, "state_evolution", real)
    # without --rtol: no target fields
    assert "accuracy_met" not in cli("highdim", "se", "--alpha", "0.5", "--nodes", "512", "--json").json()


@pytest.mark.parametrize(
    "extra,arg",
    [
        (["--rtol", "0"], "--rtol"),
        (["--rtol", "-0.1"], "--rtol"),
        (["--rtol", "1"], "--rtol"),
        (["--rtol", "nan"], "--rtol"),
        (["--rtol", "inf"], "--rtol"),
        (["--rtol", "1e-3", "--max-scrambles", "2"], "--max-scrambles"),
        (["--rtol", "1e-3", "--scrambles", "12", "--max-scrambles", "8"], "--max-scrambles"),
        (["--max-scrambles", "16"], "--max-scrambles"),
        (["--rtol", "1e-3", "--scrambles", "1"], "--rtol"),
    ],
)
def test_se_accuracy_target_bad_values(cli, extra, arg):
    r = cli("highdim", "se", "--alpha", "0.5", "--nodes", "64", *extra)
    assert r.code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and arg in lines[0] and "expected" in lines[0], r.stderr


def _power_law(gamma: str, d: str, nodes: str = "2048") -> tuple[list[str], object, object]:
    """The se options of a power-law target at α = 0.1, λ̃ = 1e-2, Δ = 0.1, and the library's setting and
    fixed point for the same problem."""
    from attnlab.highdim import Setting, power_law_spectrum, state_evolution

    args = ["--alpha", "0.1", "--lam", "0.01", "--noise", "0.1", "--nodes", nodes, "--gamma", gamma, "--d", d]
    st = Setting(kappa0=0.5, noise=0.1, tokens=2, lam=0.01, target=power_law_spectrum(int(d), float(gamma)))
    return args, st, state_evolution(st, 0.1, nodes=int(nodes))


def test_se_with_a_power_law_target_json(cli):
    """--gamma/--d: the same fixed point as the library's state evolution on the power-law spectrum (the
    wiring, to rounding), and the strongest direction's share against its closed form 1/Σ_{i≤d} i^(−2γ)."""
    import numpy as np

    args, _, fp = _power_law("1", "60")
    r = cli("highdim", "se", *args, "--json")
    assert r.code == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["target"], out["gamma"], out["d"]) == ("power-law", 1.0, 60)
    assert out["top_share"] == pytest.approx(1 / np.sum(np.arange(1, 61) ** -2.0), rel=1e-12)
    for k in ("q", "m", "sigma", "test_error", "train_loss"):
        assert out[k] == pytest.approx(getattr(fp, k), rel=1e-12)
    assert "readout" not in out  # only on request


def test_se_readout_json(cli):
    """--readout: the library's readout_excess at the seed's draws (the wiring, to rounding), and at γ = 1.5
    the target's exact e0 above the Gaussian one by more than four of its standard errors (docs/highdim.md
    C6: +12% at d = 100 and 400)."""
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim import readout_excess

    args, st, fp = _power_law("1.5", "40")
    r = cli("highdim", "se", *args, "--readout", "--seed", "3", "--json")
    assert r.code == 0, r.stderr
    out = json.loads(r.stdout)
    ro = out["readout"]
    assert (ro["draws"], ro["samples"]) == (8, 8000)
    lib = readout_excess(
        st, fp.delta, fp.eps, fp.eta, draws=8, samples=8000, generator=generator(derive_seed(3, "law"))
    )
    assert ro["exact"] == pytest.approx(lib.exact, rel=1e-9)
    assert ro["gaussian"] == pytest.approx(lib.gaussian, rel=1e-9)
    assert ro["ratio"] == pytest.approx(lib.exact / lib.gaussian, rel=1e-9)
    assert out["e0_exact"] - 4 * out["e0_exact_stderr"] > out["e0_gaussian"]


def test_se_readout_text_output(cli):
    args, _, _ = _power_law("1", "20", nodes="1024")
    r = cli("highdim", "se", *args, "--readout")
    assert r.code == 0, r.stderr
    for word in ("top_share", "e0_exact", "readout_ratio", "±"):
        assert word in r.stdout


@pytest.mark.parametrize(
    "extra, arg",
    [
        (["--d", "50"], "--d"),
        (["--readout"], "--readout"),
        (["--gamma", "0"], "--gamma"),
        (["--gamma", "-1", "--d", "50"], "--gamma"),
        (["--gamma", "1"], "--d"),
        (["--gamma", "1", "--d", "1"], "--d"),
        (["--gamma", "1", "--d", "50", "--readout", "--tokens", "3"], "--readout"),
        (["--gamma", "1", "--d", "50", "--readout", "--seed", "-1"], "--seed"),
    ],
)
def test_se_power_law_bad_values(cli, extra, arg):
    r = cli("highdim", "se", "--alpha", "0.5", "--nodes", "64", *extra)
    assert r.code == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and arg in lines[0] and "expected" in lines[0], r.stderr
