# %% [markdown]
# # Random heads sit at the null: the Head Diversity Index of random subspaces
#
# docs/ensemble.md A3: for `H` random `d_k`-dimensional subspaces of `R^d`, the HDI has mean
# `1 − d_k/d` and an exact standard deviation `√(Var s / P)` over the `P = H(H−1)/2` pairs. This example
# draws many random layouts of a small layer (`d = 128`, 8 heads of 16) and sets the histogram of
# their HDI beside the predicted normal law, with the orthogonal (1) and shared (0) layouts for scale.
#
# Run it as a script (`python examples/hdi_null.py`) or open it as a notebook with jupytext. The figure is
# written to `$ATTNLAB_EXAMPLES_OUT` (default `figures/`).

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from attnlab.ensemble import diversity, projection_layout

OUT = Path(os.environ.get("ATTNLAB_EXAMPLES_OUT", "figures"))
d, H, dk, draws = 128, 8, 16, 40

# %%
g = torch.Generator().manual_seed(0)
hdis = np.array([diversity(projection_layout("random", H, d, dk, generator=g)).hdi for _ in range(draws)])
ref = diversity(projection_layout("random", H, d, dk, generator=g))
null, sd = ref.hdi_null, ref.hdi_null_sd
print(f"HDI over {draws} random layouts: mean {hdis.mean():.5f}, sd {hdis.std(ddof=1):.2e}")
print(f"null: mean {null:.5f} (1 - d_k/d = {1 - dk / d:.5f}), sd {sd:.2e}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5), constrained_layout=True)
ax.hist(hdis, bins=15, density=True, alpha=0.6, label=f"{draws} random layouts")
x = np.linspace(null - 5 * sd, null + 5 * sd, 200)
ax.plot(
    x, np.exp(-0.5 * ((x - null) / sd) ** 2) / (sd * np.sqrt(2 * np.pi)), "k-", label="null N(1 − d_k/d, sd²)"
)
ax.set(xlabel="HDI (dimensionless)", ylabel="density", title=f"H = {H}, d = {d}, d_k = {dk}")
ax.legend(fontsize=8)
OUT.mkdir(parents=True, exist_ok=True)
fig.savefig(OUT / "hdi_null.png", dpi=110)
print(f"figure: {OUT / 'hdi_null.png'}")
