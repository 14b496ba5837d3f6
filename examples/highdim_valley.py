# %% [markdown]
# # A shallow valley: the training loss along the norm of the learned attention matrix
#
# docs/highdim.md (temperature, "A shallow valley"): at `β = β0 = 2`, `α = 0.75` the ERM's training loss
# matches the state evolution's while its test error lies about 9% below it and its `Tr S²/d` well below the
# fixed point's `q`. This example holds `Tr S²/d` at chosen values `q*` (a quadratic penalty
# `μ d² (Tr S²/d − q*)²` added to the loss, `μ` raised from 1e-3 to 1 with warm starts, L-BFGS in float64 from
# a start of scale 0.1) and draws the training loss and the test error along the norm, with the state
# evolution's point marked. The doc's table ran this at `d = 100` with two seeds
# (`ATTNLAB_VALLEY_D=100 ATTNLAB_VALLEY_SEEDS=2`); the default is a size that runs in seconds.

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy.optimize import minimize

from attnlab.core.seeding import derive_seed, generator
from attnlab.highdim import Setting, state_evolution
from attnlab.highdim.data import mp_target, sample
from attnlab.highdim.objective import Problem
from attnlab.highdim.setting import lam_from_lam_tilde
from attnlab.highdim.train import evaluate

OUT = Path(os.environ.get("ATTNLAB_EXAMPLES_OUT", "figures"))
d = int(os.environ.get("ATTNLAB_VALLEY_D", "30"))
seeds = int(os.environ.get("ATTNLAB_VALLEY_SEEDS", "1"))
alpha, beta, lam_tilde = 0.75, 2.0, 0.01
setting = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=lam_tilde, beta=beta, beta0=beta)
held = [1.5, 2.5, 3.5, 4.6, 5.5]

# %%
fp = state_evolution(setting, alpha, nodes=4096)
print(f"state evolution: q {fp.q:.3f}, test error {fp.test_error:.4f}, training loss {fp.train_loss:.5f}")


def fit(f: Problem, P: torch.Tensor, qstar: float | None, mu: float) -> torch.Tensor:
    """L-BFGS on the loss (plus the norm penalty when ``qstar`` is given) from ``P``."""

    def fun(x: np.ndarray):
        W = torch.from_numpy(x).view(d, d)
        v, G = f(W)
        if qstar is not None:
            S = f.S(W)
            q = float((S * S).sum()) / d
            v += mu * d * d * (q - qstar) ** 2
            # d(Tr S²/d)/dS = 2S/d, and S = WᵀW/c chains a symmetric G to W as 2 W G / c
            G = G + (mu * d * d * 2 * (q - qstar) * 2.0 / f.c) * (W @ (2 * S / d))
        return v, G.numpy().ravel().copy()

    opts = dict(maxiter=20000, maxfun=40000, ftol=1e-15, gtol=1e-9)
    r = minimize(fun, P.numpy().ravel(), jac=True, method="L-BFGS-B", options=opts)
    return torch.from_numpy(r.x).view(d, d)


def measure(f: Problem, W: torch.Tensor, test) -> tuple[float, float, float]:
    """(Tr S²/d, training loss per d², test error) of the factor ``W``."""
    S = f.S(W)
    return float((S * S).sum()) / d, f(W, grad=False)[0] / d**2, evaluate(S, test, beta)[0]


rows = []  # (seed, q*, Tr S²/d, training loss, test error); q* None: the free minimum
for seed in range(1000, 1000 + seeds):
    g = generator(derive_seed(seed, "data"))
    S0 = mp_target(d, setting.kappa0, g)
    train = sample(S0, round(alpha * d * d), 2, setting.noise, beta, "seq2lab", g)
    test = sample(S0, 4000, 2, setting.noise, beta, "seq2lab", g)
    reg = lam_from_lam_tilde(lam_tilde, 1.0)  # κ = 1: the factor is d × d
    f = Problem(train.X.double(), train.y.double(), "seq2lab", beta, True, d, reg)
    W0 = 0.1 * torch.randn(d, d, generator=generator(derive_seed(seed, "init")), dtype=torch.float64)
    free = fit(f, W0, None, 0.0)
    rows.append((seed, None, *measure(f, free, test)))
    for qs in held:
        W = free
        for mu in (1e-3, 1e-2, 1e-1, 1.0):
            W = fit(f, W, qs, mu)
        rows.append((seed, qs, *measure(f, W, test)))
for seed, qs, q, tl, te in rows:
    what = "free minimum" if qs is None else f"held at {qs}"
    print(f"d = {d}, seed {seed}, {what:>14}: Tr S²/d {q:.3f}, training loss {tl:.5f}, test error {te:.4f}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.6))
for seed in range(1000, 1000 + seeds):
    pts = sorted((q, tl, te) for s, qs, q, tl, te in rows if s == seed)
    free = next((q, tl, te) for s, qs, q, tl, te in rows if s == seed and qs is None)
    q, tl, te = (np.array(v) for v in zip(*pts))
    ax1.plot(q, 100 * (tl / free[1] - 1), "o-", label=f"ERM, seed {seed}")
    ax2.plot(q, te, "o-", label=f"ERM, seed {seed}")
    ax2.plot(free[0], free[2], "k*", ms=10)
ax1.axvline(fp.q, color="0.5", ls="--", label="state evolution's q")
ax2.plot(fp.q, fp.test_error, "rs", ms=8, label="state evolution")
ax1.set(xlabel="Tr S²/d held", ylabel="training loss above the free minimum (%)")
ax2.set(xlabel="Tr S²/d held", ylabel="test error")
ax1.legend(fontsize=8)
ax2.legend(fontsize=8)
fig.suptitle(f"β = β0 = 2, α = {alpha}, d = {d}: a shallow valley along the norm (★ the free minimum)")
fig.tight_layout()
OUT.mkdir(parents=True, exist_ok=True)
path = OUT / "highdim_valley.png"
fig.savefig(path, dpi=110)
print(f"figure: {path}")
