# %% [markdown]
# # The spectrum of the learned attention matrix: theory against Adam
#
# docs/highdim.md C3–C4: at the state-evolution fixed point, the eigenvalues of the learned `Ŝ` follow
# `η · ReLU(S0 + δZ − ε)`, an atom at zero plus a shifted, rescaled free convolution. This example solves the
# state evolution, trains a student by full-batch Adam at a small `d`, and overlays the two (the same figure
# as `attnlab highdim spectrum`, at a size that runs in seconds).

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from attnlab.highdim import Setting, TrainConfig, predicted_spectrum, simulate, state_evolution

OUT = Path(os.environ.get("ATTNLAB_EXAMPLES_OUT", "figures"))
setting = Setting(kappa0=0.5, noise=0.5, tokens=2, lam=0.01)
alpha, d = 0.5, 16

# %%
fp = state_evolution(setting, alpha, nodes=256)
spec = predicted_spectrum(setting, fp)
run = simulate(d, alpha, kappa0=0.5, noise=0.5, tokens=2, lam=0.01, seed=0, config=TrainConfig(max_steps=150))
ev = run.eigenvalues
nz = ev[ev > 1e-3]
print(f"atom at 0: theory {spec.atom:.3f}, Adam (d = {d}) {1 - nz.size / ev.size:.3f}")
print(f"test error: theory {fp.test_error:.4f}, Adam {run.test_error:.4f}")

# %%
fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
ax.hist(nz, bins=15, density=True, alpha=0.5, label=f"Adam, d = {d} (non-zero part)")
ax.plot(spec.x, spec.density, "r-", label="theory η·ReLU(S0 + δZ − ε)")
ax.set(xlabel="eigenvalue of Ŝ (dimensionless)", ylabel="density of the non-zero part")
ax.set_title(f"α = {alpha}, λ̃ = 0.01: atom at 0, theory {spec.atom:.2f}")
ax.legend(fontsize=8)
OUT.mkdir(parents=True, exist_ok=True)
fig.savefig(OUT / "highdim_spectrum.png", dpi=110)
print(f"figure: {OUT / 'highdim_spectrum.png'}")
