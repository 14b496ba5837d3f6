"""Folded label nodes (docs/se-accuracy.md, "Folded label nodes"): the output channel's symmetries at T = 2,
the quadrant they fold the label plane into, and the folded rule against the whole plane."""

import math

import numpy as np
import pytest
import torch

import attnlab.highdim.channel as channel_mod
from attnlab.highdim import OutputChannel, Setting, state_evolution
from attnlab.highdim.channel import mirror_basis

#: the token exchange on flat coordinates (S00·√2, S01, S11·√2) at T = 2
SWAP = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64)


def _hats_per_scramble(s, q, m, sigma, label, grid, fold, scrambles=8):
    out = []
    for r in range(scrambles):
        ch = OutputChannel(s, label * grid * grid, 100 + r, rule="product", grid=grid, fold=fold)
        z = ch.z_of(q, m)
        h, M = ch.prox_best(z, sigma)
        out.append(ch.average(ch.node_terms(q, m, sigma, 0.5, z, h, M)).numpy())
    return np.array(out)  # (scrambles, 4): q̂, m̂, Σ̂, E[M]


def _deviations(a, b):
    """(mean a − mean b) in combined standard errors of the two means, per column."""
    se = np.hypot(a.std(0, ddof=1), b.std(0, ddof=1)) / math.sqrt(len(a))
    return (a.mean(0) - b.mean(0)) / se


def test_mirror_basis_spans_the_row_space_along_the_token_exchange():
    # The basis is orthonormal, lies in the row space of the logit differences, and the token exchange
    # (an independent construction: the permutation of the flat coordinates) flips its first column and
    # keeps its second, so on it the exchange is the reflection diag(−1, 1). Rounding only: 1e-14.
    ch = OutputChannel(Setting(tokens=2), 512, 0)
    B = mirror_basis(ch.basis)
    assert float((B.T @ B - torch.eye(2, dtype=B.dtype)).abs().max()) < 1e-14
    assert float((ch._proj @ B - B).abs().max()) < 1e-14
    assert float((SWAP @ B[:, 0] + B[:, 0]).abs().max()) < 1e-14
    assert float((SWAP @ B[:, 1] - B[:, 1]).abs().max()) < 1e-14


@pytest.mark.parametrize("lam,q,m,sigma", [(1e-2, 1.46, 1.38, 2.3), (1e-4, 5.12, 2.12, 61.6)])
def test_the_output_equations_are_invariant_under_the_channels_symmetries(lam, q, m, sigma):
    # What folding rests on: the per-node terms of the output equations (q̂, m̂, Σ̂, M) are the same at the
    # images of a node (v, w) under −1 (every logit difference's sign), the token exchange and their product.
    # Each image is a new channel whose labels are recomputed from its nodes and whose proximal step is solved
    # afresh from both starts, so the equality is not built in. At λ̃ = 1e-4 (Σ ≈ 62) a fifth of the nodes
    # have two minima. The steps stop at a scale-free gradient of 1e-11, so the terms agree to ~1e-13.
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=lam)
    ch = OutputChannel(s, 1024, 3, rule="sobol")

    def terms(c):
        z = c.z_of(q, m)
        h, M = c.prox_best(z, sigma)
        return c.node_terms(q, m, sigma, 0.25, z, h, M)

    t0 = terms(ch)
    for A in (-torch.eye(3, dtype=torch.float64), SWAP, -SWAP):
        img = OutputChannel(s, 1024, 3, rule="sobol")
        img.v, img.w = ch.v @ A.T, ch.w @ A.T
        noisy = img._sn * img.v
        img.y, img._target = img._softmax(noisy, s.beta0), (s.beta0 / s.beta) * noisy
        assert float((terms(img) - t0).abs().max()) < 1e-11
    # and a map that is not a symmetry moves them: a rotation of the row space by 0.3 rad
    c, sn = math.cos(0.3), math.sin(0.3)
    B = ch.basis
    rot = B @ torch.tensor([[c, -sn], [sn, c]], dtype=torch.float64) @ B.T + (torch.eye(3) - ch._proj)
    img = OutputChannel(s, 1024, 3, rule="sobol")
    img.v, img.w = ch.v @ rot.T, ch.w @ rot.T
    noisy = img._sn * img.v
    img.y, img._target = img._softmax(noisy, s.beta0), (s.beta0 / s.beta) * noisy
    assert float((terms(img) - t0).abs().max()) > 1e-3


@pytest.mark.parametrize(
    "lam,q,m,sigma,grid", [(1e-2, 1.462367, 1.380946, 2.30351, 5), (1e-4, 5.117329, 2.119592, 61.64039, 6)]
)
def test_folded_label_nodes_against_the_whole_plane(lam, q, m, sigma, grid, monkeypatch):
    # The folded rule and the whole plane integrate the same expectation: eight scrambles of 512 label nodes
    # each, the hats' means within 4 combined standard errors (a mean of eight is a t variable with seven
    # degrees of freedom; beyond 4 about one time in two hundred). At λ̃ = 1e-4 (the study's point, ties
    # between two minima on ~17% of the weight) the integrand jumps. Measured: deviations −1.4 to +0.4; the
    # folded rule's spread 0.37–0.61 of the whole plane's at λ̃ = 1e-2 and 0.27–0.57 at 1e-4.
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=lam)
    whole = _hats_per_scramble(s, q, m, sigma, 512, grid, False)
    folded = _hats_per_scramble(s, q, m, sigma, 512, grid, True)
    assert np.all(np.abs(_deviations(folded, whole)) < 4)
    spread = folded.std(0, ddof=1) / whole.std(0, ddof=1)
    assert spread[1] < 1 and spread[2] < 1
    # The same rule folded along lines that are not the mirror lines (the mirror basis turned by 0.3 rad)
    # is biased: the check fails through the same comparison (measured: 300–360 combined standard errors at
    # λ̃ = 1e-2, 68–233 at 1e-4)
    real = channel_mod.mirror_basis
    c, sn = math.cos(0.3), math.sin(0.3)
    turn = torch.tensor([[c, -sn], [sn, c]], dtype=torch.float64)
    monkeypatch.setattr(channel_mod, "mirror_basis", lambda b: real(b) @ turn)
    wrong = _hats_per_scramble(s, q, m, sigma, 512, grid, True)
    assert np.all(np.abs(_deviations(wrong, whole)) > 10)


def test_fold_layout_and_checks():
    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-2)
    for rule in ("sobol", "product"):
        ch = OutputChannel(s, 9216, 1, rule=rule, fold=True)
        assert ch.fold and ch.rule == rule
        # every label node lies in the quadrant of the mirror basis, and the labels are those of its nodes
        coords = ch.v @ mirror_basis(ch.basis)
        assert bool((coords >= 0).all())
        assert torch.equal(ch.y, ch._softmax(ch._sn * ch.v, s.beta0))
        # a prefix is the channel on fewer nodes, folded too
        assert ch.head(512).fold
    # without fold the nodes are those of the default channel, bit for bit
    a, b = OutputChannel(s, 9216, 1), OutputChannel(s, 9216, 1, fold=False)
    assert torch.equal(a.v, b.v) and torch.equal(a.w, b.w) and not a.fold
    with pytest.raises(ValueError, match=r"^fold: expected True or False, got 'yes'$"):
        OutputChannel(s, 512, fold="yes")
    with pytest.raises(ValueError, match=r"^fold: True needs tokens = 2, got tokens = 3$"):
        OutputChannel(Setting(tokens=3), 512, fold=True)


def test_the_solve_folds_on_request(asked_channels):
    # state_evolution's fold: None folds at T = 2 (channel_nodes.default_fold), not at T = 3, with a target
    # or without; True and False ask for it either way; sweep passes it to its shared channels. The channels
    # asked for are recorded and replaced by 512 Sobol nodes (folded where asked) to keep the solves small.
    from attnlab.highdim import state_evolution as solve
    from attnlab.highdim import sweep

    asked = asked_channels
    low = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-4)
    solve(low, 0.25)
    assert asked == [(73728, None, True)]
    asked.clear()
    solve(low, 0.25, fold=False)
    assert asked == [(73728, None, False)]
    asked.clear()
    fp = solve(low, 0.25, rtol=0.5, max_scrambles=8, fold=False)
    assert fp.accuracy_met and set(asked) == {(131072, 16, False)}
    asked.clear()
    sweep(low, [0.25, 0.3])
    sweep(low, [0.25, 0.3], fold=False)
    assert asked == [(None, None, True), (None, None, False)]
    s3 = Setting(tokens=3)
    asked.clear()
    solve(s3, 0.25, nodes=512, scrambles=2)
    assert asked == [(512, None, False)]  # three tokens: the channel has no such symmetries
    with pytest.raises(ValueError, match=r"^fold: expected None, True or False, got 1$"):
        solve(low, 0.25, fold=1)
    with pytest.raises(ValueError, match=r"^fold: expected None when channel is given"):
        solve(low, 0.25, fold=True, channel=OutputChannel(low, 512))
    with pytest.raises(ValueError, match=r"^fold: True needs tokens = 2, got tokens = 3$"):
        solve(s3, 0.25, fold=True)
    with pytest.raises(ValueError, match=r"^fold: expected None, True or False, got 'no'$"):
        sweep(low, [0.25], fold="no")


#: grid-free references (bench/bench_highdim.py _SE_REFERENCE, docs/se-accuracy.md "Node convergence against
#: the references"): value and relative standard error
_REFERENCES = {
    (1e-2, 0.5): {"q": (1.462367, 1.2e-5), "m": (1.380946, 5e-6), "sigma": (2.30351, 2.6e-5),
                  "test_error": (0.1359914, 8e-6), "train_loss": (0.02328958, 7e-6)},
    (1e-3, 0.3): {"q": (2.860209, 5.5e-5), "m": (1.747856, 2.1e-5), "sigma": (14.8688, 1.6e-4),
                  "test_error": (0.2541347, 3.8e-5), "train_loss": (0.004221494, 3.1e-5)},
}  # fmt: skip


def _misses(fp, ref) -> list[str]:
    # 1e-3 relative (the accuracy asked of the default solve at these points) and within its own error bar:
    # a standard error from four scrambles is a t variable with three degrees of freedom, so the 95% interval
    # is 3.18 standard errors (combined with the reference's, ten to a hundred times smaller)
    out = []
    for k, (v, r) in ref.items():
        x, se = getattr(fp, k), fp.stderr[k]
        if abs(x / v - 1) > 1e-3 or abs(x - v) > 3.18 * math.hypot(se, r * v):
            out.append(k)
    return out


def test_the_default_solve_is_within_1e_3_and_its_error_bar_at_the_reference_points():
    # The default solve (four scrambles, folded label nodes) at λ̃ = 1e-2, α = 0.5 and λ̃ = 1e-3, α = 0.3,
    # seed 0, against grid-free references from 64 scrambles of 262144 Sobol nodes: measured every quantity
    # within 0.22e-3 and 0.45e-3 (seeds 0, 100, 200) and within 2.7 standard errors. The same check fails on
    # the whole plane's nodes at λ̃ = 1e-3, seed 0 (Σ −1.35e-3), which the fold replaced as the default.
    for (lam, alpha), ref in _REFERENCES.items():
        s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=lam)
        fp = state_evolution(s, alpha)
        assert fp.converged and fp.scrambles == 4
        assert _misses(fp, ref) == [], (lam, alpha)
    whole = state_evolution(Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-3), 0.3, fold=False)
    assert "sigma" in _misses(whole, _REFERENCES[(1e-3, 0.3)])


def test_stability_takes_the_default_solves_nodes():
    # stability() without a channel evaluates the map on the nodes a default solve takes: folded at T = 2
    # (channel_nodes.default_fold), the whole plane at T = 3; the same numbers as with that channel given
    from attnlab.highdim import stability

    s = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=1e-2)
    fp = state_evolution(s, 0.5, nodes=512, scrambles=1)
    own = stability(s, fp, nodes=512)
    assert own == stability(s, fp, channel=OutputChannel(s, 512, 0, fold=True))
    assert own != stability(s, fp, channel=OutputChannel(s, 512, 0, fold=False))
    s3 = Setting(kappa0=0.5, noise=0.5, tokens=3, lam=1e-2)
    fp3 = state_evolution(s3, 0.5, nodes=512, scrambles=1)
    assert stability(s3, fp3, nodes=512) == stability(s3, fp3, channel=OutputChannel(s3, 512, 0))
