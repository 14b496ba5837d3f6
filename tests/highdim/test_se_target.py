"""The accuracy target of the state evolution (docs/se-accuracy.md, "Accuracy on request"): the stopping
rule, its coverage under optional stopping, batches against the joint refinement, the budget's flag, the
accuracy reached against the many-scramble reference, and bad input."""

import math

import numpy as np
import pytest

import attnlab.highdim.se_target as target
from attnlab.highdim import Setting, state_evolution
from attnlab.highdim.scrambles import channels

REF = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
QUANT = ("q", "m", "sigma", "test_error", "train_loss")


def test_rule_stops_on_the_bound_and_not_before_the_minimum():
    # the bound rtol / t against tabulated quantiles of Student's t (two-sided 95%: 3.182446 for 3 degrees of
    # freedom, 2.364624 for 7, 2.131450 for 15), an independent source for scipy's quantile
    for r, t in ((4, 3.182446), (8, 2.364624), (16, 2.131450)):
        assert target.bound(1e-3, r) == pytest.approx(1e-3 / t, rel=1e-6)
    vals = {k: 2.0 for k in QUANT}
    at = 2.0 * target.bound(1e-3, 8)  # the standard error that sits on the bound at 8 scrambles
    assert target.target_met(vals, {k: 0.99 * at for k in QUANT}, 8, 1e-3)
    assert not target.target_met(vals, {k: 1.01 * at for k in QUANT}, 8, 1e-3)
    # one quantity over its bound is enough to go on
    assert not target.target_met(vals, {k: 0.5 * at for k in QUANT} | {"test_error": 1.01 * at}, 8, 1e-3)
    assert target.bound_ratio(vals, {k: 0.5 * at for k in QUANT} | {"sigma": 1.01 * at}, 8, 1e-3) == (
        pytest.approx(1.01)
    )
    # below the minimum of scrambles nothing stops, however small the spread
    assert not target.target_met(vals, {k: 1e-12 for k in QUANT}, target.MIN_SCRAMBLES - 4, 1e-3)
    assert target.target_met(vals, {k: 1e-12 for k in QUANT}, target.MIN_SCRAMBLES, 1e-3)
    # a value of zero with a standard error: never met
    assert not target.target_met(vals | {"m": 0.0}, {k: 1e-12 for k in QUANT}, 8, 1e-3)


def _false_claims(spread, n=4000, batch=4, budget=64, rtol=1e-3, seed=0):
    """Solves with Gaussian scramble values (exact value 1, spread ``spread · rtol`` per scramble) stopped as
    the solver stops them (batches of ``batch`` from ``batch``, the rule at every batch, at most ``budget``):
    the fraction that stop with the target met, and the fraction that stop met with an error above rtol."""
    rng = np.random.default_rng(seed)
    x = 1 + rtol * spread * rng.standard_normal((n, budget))
    r = np.arange(batch, budget + 1, batch)
    s1, s2 = np.cumsum(x, 1)[:, r - 1], np.cumsum(x * x, 1)[:, r - 1]
    mean = s1 / r
    se = np.sqrt(np.maximum(s2 - r * mean**2, 0) / (r - 1) / r)
    bounds = np.array([target.bound(rtol, int(k)) for k in r])
    met = (r >= target.MIN_SCRAMBLES) & (se / np.abs(mean) <= bounds)
    stop, first = met.any(1), met.argmax(1)
    err = np.abs(mean[np.arange(n), first] - 1)
    return stop.mean(), (stop & (err > rtol)).mean()


def test_rule_coverage_under_optional_stopping(monkeypatch):
    # The rule is checked after every batch (optional stopping), so its 95% holds only approximately. On 4000
    # simulated solves per spread (1, 2 and 3 times rtol per scramble: the target met at 8, about 20 and about
    # 36 scrambles) a solve stops met with an error above rtol in 0.4%, 4.4% and 5.4% of the cases (20000
    # solves each); the binomial standard error at 5% on 4000 solves is 0.35%, so 7% is 4.4 of them above the
    # worst. Planted fault: a rule that ignores the quantile (stderr <= rtol, t = 1) stops wrongly in 15-26%
    # of these solves, and fails the same check.
    for spread in (1.0, 2.0, 3.0):
        stopped, wrong = _false_claims(spread)
        assert stopped > 0.99 and wrong < 0.07, (spread, stopped, wrong)
    monkeypatch.setattr(target, "QUANTILE", 0.8413)  # t ~ 1: the standard error itself held to rtol
    assert max(_false_claims(s)[1] for s in (1.0, 2.0, 3.0)) > 0.07


def test_batches_equal_the_joint_refinement_and_the_budget_is_flagged():
    # Eight scrambles of 2048 Sobol nodes (seeds 0-7) refined jointly (scrambles=8, the mean map of all eight)
    # against the same eight in two batches of four (scrambles=4 with a target: seeds 0-3, then 4-7 from the
    # first batch's mean, each batch on its own mean-map Jacobian and linearisation point), with the same
    # pilot. Each scramble point is that scramble's own fixed point linearised about its batch's point, so the
    # two agree up to (a) second order in the distance between the linearisation points (about one
    # four-scramble standard error, ~3e-3 relative here: ~1e-5 times the curvature) and (b) the two
    # Jacobians' difference (forward differences on other nodes), which scales each scramble's offset by
    # a few percent and the mean by that much of mean G ≈ 0. Measured here: means within 0.005 of the standard
    # error, standard errors within 0.6% (at λ̃ = 1e-3 and 1e-4 with 16 default scrambles, where the
    # scrambles spread more and the Jacobians are noisier: 0.08 and 19%, docs/se-accuracy.md). Held to 0.05
    # and 5%. The target (1e-6) cannot be met on eight scrambles: flagged. A targeted solve folds its label
    # nodes (OutputChannel, fold), so the joint refinement is handed the same folded scrambles.
    joint = state_evolution(REF, 0.5, channel=channels(REF, 2048, 0, 8, fold=True))
    batched = state_evolution(REF, 0.5, nodes=2048, scrambles=4, rtol=1e-6, max_scrambles=8)
    assert joint.scrambles == batched.scrambles == 8 and joint.converged and batched.converged
    for k in QUANT:
        assert abs(getattr(joint, k) - getattr(batched, k)) < 0.05 * joint.stderr[k], k
        assert batched.stderr[k] == pytest.approx(joint.stderr[k], rel=0.05), k
    assert batched.accuracy_met is False and batched.rtol == 1e-6
    assert batched.to_dict()["accuracy_met"] is False
    # no target: nothing flagged
    assert joint.accuracy_met is None and joint.rtol is None


def test_a_failed_batch_or_an_unconverged_point_never_meets_the_target(monkeypatch):
    import importlib

    se = importlib.import_module("attnlab.highdim.state_evolution")
    # a batch whose refinement fails (refine returns None, as where the map is undefined on the way) ends the
    # solve on the scrambles so far, flagged, even with a target those would meet (rtol 0.5)
    calls, real = [], se._refine

    def failing(*a, **k):
        calls.append(1)
        return real(*a, **k) if len(calls) == 1 else None

    monkeypatch.setattr(se, "_refine", failing)
    fp = state_evolution(REF, 0.5, nodes=512, rtol=0.5)
    assert len(calls) == 2 and fp.scrambles == 4 and fp.accuracy_met is False
    monkeypatch.setattr(se, "_refine", real)
    # the same loose target on a pilot stopped after two map evaluations: converged False, so not met, and
    # no batch is added (none could change that)
    calls.clear()
    monkeypatch.setattr(se, "_refine", failing)
    fp = state_evolution(REF, 0.5, nodes=512, rtol=0.5, max_iter=2)
    assert not fp.converged and fp.accuracy_met is False and fp.scrambles == 4 and len(calls) == 1
    monkeypatch.setattr(se, "_refine", real)
    # rounds that do not settle in a batch (planted: the batch's points flagged unsettled) end the solve there
    calls.clear()

    def unsettled(*a, **k):
        calls.append(1)
        fps, ok = real(*a, **k)
        return fps, ok and len(calls) == 1

    monkeypatch.setattr(se, "_refine", unsettled)
    fp = state_evolution(REF, 0.5, nodes=512, rtol=1e-6, max_scrambles=32)
    assert len(calls) == 2 and fp.scrambles == 8 and not fp.converged and fp.accuracy_met is False


def test_a_targeted_solve_takes_the_finer_grid_below_lambda_1e_3(asked_channels):
    # Below λ̃ = 1e-3 every scramble of a targeted solve, the first ones and every batch, is drawn with the
    # 16 × 16 grid in w on the default's 512 label nodes (131072 nodes), and 8 × 8 on 2048 for
    # 1e-3 <= λ̃ < 1e-2; without a target, and at λ̃ >= 1e-2, the default grid. Every scramble at T = 2 has
    # its label nodes folded (OutputChannel, fold), targeted or not. The channels are
    # recorded and replaced by 512 Sobol nodes (folded where asked) to keep the solve small.
    asked = asked_channels
    low = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-4)
    fp = state_evolution(low, 0.25, rtol=0.5, max_scrambles=12)
    assert fp.scrambles >= 8 and len(asked) >= 2 and set(asked) == {(131072, 16, True)}
    asked.clear()
    state_evolution(low, 0.25)
    assert asked == [(73728, None, True)]
    asked.clear()
    state_evolution(REF, 0.5, rtol=0.5)  # λ̃ = 1e-2: the default grid on half the default's label nodes
    assert set(asked) == {(25600, 5, True)}
    asked.clear()
    mid = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-3)  # 8 × 8 on the default's 2048 label nodes
    state_evolution(mid, 0.3, rtol=0.5)
    assert set(asked) == {(131072, 8, True)}
    # a target below 2e-3 takes 2048 label nodes below λ̃ = 1e-3 (channel_nodes.target_nodes), none above;
    # one below 1e-3 at λ̃ ≥ 1e-2 the default's 2048
    asked.clear()
    state_evolution(REF, 0.5, rtol=9e-4, max_scrambles=8)
    assert set(asked) == {(51200, 5, True)}
    asked.clear()
    state_evolution(low, 0.25, rtol=1e-3, max_scrambles=8)
    assert set(asked) == {(524288, 16, True)}
    asked.clear()
    state_evolution(mid, 0.3, rtol=1e-3, max_scrambles=8)
    assert set(asked) == {(131072, 8, True)}


def test_target_nodes_take_more_label_nodes_for_a_fine_target_below_lambda_1e_3():
    # channel_nodes.target_nodes: the default's label nodes times the target grid, except below λ̃ = 1e-3 at
    # rtol < FINE_TARGET (2e-3), where 512 label nodes become 2048, and at λ̃ >= 1e-2 at rtol >= COARSE_TARGET
    # (1e-3), where 2048 become 1024; other token counts keep their Sobol nodes
    from attnlab.highdim.channel_nodes import (
        COARSE_TARGET,
        FINE_TARGET,
        default_nodes,
        target_grid,
        target_nodes,
    )

    def at(lam, rtol, tokens=2):
        s = Setting(kappa0=0.5, noise=0.5, tokens=tokens, lam=lam)
        return target_nodes(s, rtol, target_grid(s) if tokens == 2 else None)

    assert FINE_TARGET == 2e-3 and COARSE_TARGET == 1e-3
    fine = [at(1e-2, 1e-3), at(1e-3, 1e-3), at(1e-4, 1e-3), at(1e-5, 1e-3)]
    assert fine == [25600, 131072, 524288, 1179648]
    assert [at(1e-2, 0.999e-3), at(0.1, 0.5), at(0.00999, 0.5)] == [51200, 25600, 131072]
    assert [at(1e-4, 2e-3), at(1e-4, 1.99e-3), at(1e-5, 0.5)] == [131072, 524288, 294912]
    low = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-4)
    assert at(1e-4, 2e-3) == default_nodes(low, target_grid(low))
    assert at(1e-4, 1e-3, tokens=3) == 73728


#: the many-scramble reference at λ̃ = 1e-2, α = 0.5 (docs/se-accuracy.md, "Node convergence against the
#: references": four runs of 16 scrambles of 262144 Sobol nodes, no grid in w, pooled; relative standard
#: errors 5e-6 to 2.6e-5)
REFERENCE = {
    "q": 1.462367, "m": 1.380946, "sigma": 2.30351, "test_error": 0.1359914, "train_loss": 0.02328958
}  # fmt: skip


def _errors(fp) -> dict[str, float]:
    return {k: (getattr(fp, k) - REFERENCE[k]) / REFERENCE[k] for k in QUANT}


def test_target_reached_against_the_reference(monkeypatch):
    # rtol = 3e-3 on 2048 Sobol nodes per scramble, folded (OutputChannel, fold: a scramble's relative
    # spread 0.9% on Σ, 0.4% on q), seed 1: the rule adds batches to 36 scrambles; every quantity within rtol
    # of the reference (measured: at most 0.18 rtol; the reference's own standard error is 0.01 rtol or
    # less). Planted fault: a rule without the quantile (t = 1) and without the minimum stops on the first
    # batch, and reports the target met with a quantity off by 1.06 rtol: the same check fails. (Folded nodes
    # leave the faulted rule less room than whole-plane ones did: over seeds 0-9 at 3e-3 it stopped within
    # rtol in eight, at 0.07-0.81 of it, and off by 1.06 at seeds 1 and 7; the coverage test above measures
    # such a rule's failure rate.)
    rtol = 3e-3
    fp = state_evolution(REF, 0.5, nodes=2048, seed=1, rtol=rtol)
    assert fp.accuracy_met and fp.converged and fp.scrambles >= target.MIN_SCRAMBLES
    assert max(abs(e) for e in _errors(fp).values()) <= rtol, _errors(fp)
    monkeypatch.setattr(target, "QUANTILE", 0.8413)
    monkeypatch.setattr(target, "MIN_SCRAMBLES", 4)
    bad = state_evolution(REF, 0.5, nodes=2048, seed=1, rtol=rtol)
    assert bad.accuracy_met and bad.scrambles == 4
    assert max(abs(e) for e in _errors(bad).values()) > rtol


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"rtol": 0.0}, "rtol: expected a finite number in \\(0.0, 1.0\\)"),
        ({"rtol": -1e-3}, "rtol: expected"),
        ({"rtol": 1.0}, "rtol: expected"),
        ({"rtol": math.nan}, "rtol: expected"),
        ({"rtol": math.inf}, "rtol: expected"),
        ({"rtol": 1e-3, "max_scrambles": 3}, "max_scrambles: expected an integer >= 8, got 3"),
        ({"rtol": 1e-3, "max_scrambles": 8.5}, "max_scrambles: expected an integer"),
        ({"rtol": 1e-3, "scrambles": 12, "max_scrambles": 8}, "max_scrambles: expected an integer >= 12"),
        ({"rtol": 1e-3, "refine": False}, "rtol: expected None unless the solve is refined"),
        ({"rtol": 1e-3, "scrambles": 1}, "rtol: expected None unless"),
        ({"max_scrambles": 16}, "max_scrambles: expected None without rtol, got 16"),
    ],
)
def test_bad_target_input(kwargs, match):
    # each raises before any work (64 nodes would be a solve of a second or so otherwise)
    with pytest.raises(ValueError, match=match):
        state_evolution(REF, 0.5, nodes=64, **kwargs)


def test_target_needs_scrambles_it_draws_itself():
    from attnlab.highdim import OutputChannel

    chans = [OutputChannel(REF, 64, seed=k) for k in range(4)]
    with pytest.raises(ValueError, match="rtol: expected None unless .* channel None"):
        state_evolution(REF, 0.5, channel=chans, rtol=1e-2)
