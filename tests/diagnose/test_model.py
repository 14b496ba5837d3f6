"""diagnose() on the bundled MiniLM and on small models, against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnlab.diagnose import diagnose, ov_factors
from attnlab.models import bundled_model_path, load


@pytest.fixture(scope="module")
def minilm_diag():
    return diagnose(load("minilm"))


def _hdi_numpy(Ws: list[np.ndarray]) -> tuple[float, float]:
    """Subspace HDI and mean principal angle (degrees) with scipy, head pair by head pair."""
    from scipy.linalg import subspace_angles

    Us = [np.linalg.svd(W, full_matrices=False)[0] for W in Ws]
    ov, ang = [], []
    for a in range(len(Ws)):
        for b in range(a + 1, len(Ws)):
            ov.append(np.linalg.norm(Us[a].T @ Us[b]) ** 2 / Ws[a].shape[1])
            ang.extend(np.degrees(subspace_angles(Ws[a], Ws[b])))
    return 1 - float(np.mean(ov)), float(np.mean(ang))


def test_minilm_hdi_against_file(minilm_diag) -> None:
    from safetensors.numpy import load_file

    sd = load_file(str(bundled_model_path() / "model.safetensors"))
    for layer in (0, 5):
        W = sd[f"encoder.layer.{layer}.attention.self.key.weight"].astype(np.float64)  # (H*k, d): y = x Wᵀ
        heads = [W[h * 32 : (h + 1) * 32].T for h in range(12)]  # (d, k) each
        hdi, mean_angle = _hdi_numpy(heads)
        row = minilm_diag.layers[layer]
        # same float32 weights, float64 arithmetic in both: ~1e-12; 1e-9 leaves room for the angle routines
        assert abs(row["hdi_k"] - hdi) < 1e-9
        assert abs(row["mean_angle_k_deg"] - mean_angle) < 1e-7
        assert abs(row["hdi_null"] - (1 - 32 / 384)) < 1e-15
        sd_null = np.sqrt(2 * (384 - 32) ** 2 / (384**2 * 383 * 386) / 66)
        assert abs(row["hdi_k_z"] - (hdi - (1 - 32 / 384)) / sd_null) < 1e-5


def test_minilm_table_shape(minilm_diag) -> None:
    assert len(minilm_diag.layers) == 6 and len(minilm_diag.heads) == 72
    d = minilm_diag.to_dict()
    assert (d["n_layers"], d["n_heads"], d["d_model"], d["d_head"]) == (6, 12, 384, 32)
    for key in ("hdi_k", "hdi_q", "hdi_v", "hdi_null", "hdi_k_z", "mean_angle_k_deg", "qk_rank90"):
        assert all(np.isfinite(r[key]) for r in d["layers"])
    # per-layer values are means over heads
    for l in range(6):
        rows = [r for r in minilm_diag.heads if r["layer"] == l]
        assert abs(np.mean([r["qk_rank90"] for r in rows]) - minilm_diag.layers[l]["qk_rank90"]) < 1e-12
    assert minilm_diag.arrays["qk_sv"].shape == (6, 12, 32)
    assert minilm_diag.arrays["overlap_k"].shape == (6, 12, 12)


def test_ov_factor_reproduces_dense_overlaps() -> None:
    from attnlab.core.geometry import overlap_matrix

    g = torch.Generator().manual_seed(0)
    WV = torch.randn(4, 20, 3, generator=g, dtype=torch.float64)
    WO = torch.randn(4, 3, 20, generator=g, dtype=torch.float64)
    F = ov_factors(WV, WO)  # (4, 20, 3)
    V = (WV @ WO).transpose(-1, -2)  # (4, 20, 20), rank 3
    np.testing.assert_allclose(
        (F @ F.transpose(-1, -2)).numpy(), (V @ V.transpose(-1, -2)).numpy(), rtol=1e-10, atol=1e-10
    )
    # weight-aware overlaps depend only on V Vᵀ: compute the dense version directly
    dense = np.zeros((4, 4))
    for a in range(4):
        for b in range(4):
            Va, Vb = V[a].numpy(), V[b].numpy()
            dense[a, b] = np.linalg.norm(Va.T @ Vb) ** 2 / (
                np.linalg.norm(Va.T @ Va) * np.linalg.norm(Vb.T @ Vb)
            )
    np.testing.assert_allclose(overlap_matrix(F, form="weight").numpy(), dense, rtol=1e-10)


def test_gqa_uses_distinct_kv_heads(build_model) -> None:
    from attnlab.models import from_transformers

    heads = from_transformers(build_model("llama-gqa"), dtype=torch.float64)
    diag = diagnose(heads)
    WK = heads.layers[0].W_K[::3].numpy()  # the 2 distinct K heads
    hdi, _ = _hdi_numpy([WK[0], WK[1]])
    assert abs(diag.layers[0]["hdi_k"] - hdi) < 1e-10
    assert diag.layers[0]["hdi_q"] > 0  # query heads all distinct
    # expanded copies would have made some pairs identical: per-head K overlap maps to its K/V head
    assert diag.heads[0]["overlap_k"] == diag.heads[1]["overlap_k"] == diag.heads[2]["overlap_k"]


def test_token_level_on_small_model(build_model) -> None:
    from attnlab.models import from_transformers
    from attnlab.models.trace import trace

    model = build_model("bert")
    heads = from_transformers(model, dtype=torch.float64)
    traces = [
        trace(model, torch.randint(3, 50, (1, n), generator=torch.Generator().manual_seed(n))) for n in (6, 9)
    ]
    diag = diagnose(heads, traces)
    assert diag.text
    for r in diag.heads:
        assert 0 <= r["radial_form3"] <= r["radial_form2"] <= r["radial_form1"] <= 1 or r["radial_form3"] <= 1
        assert 0 < r["entropy_ratio"] <= 1 + 1e-12
    assert abs(diag.layers[0]["entropy_max"] - (np.log(6) + np.log(9)) / 2) < 1e-12


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="heads: expected HeadWeights"):
        diagnose({"W_Q": 1})
