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
    WK = heads.layers[0].W_K.numpy()  # the 2 distinct K heads, stored once
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


def _random_llama_state(H: int, H_kv: int, d: int, k: int, L: int = 2, seed: int = 0) -> tuple[dict, dict]:
    """A Llama-layout state dict with i.i.d. Gaussian attention weights."""
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for i in range(L):
        a = f"model.layers.{i}.self_attn."
        sd[a + "q_proj.weight"] = torch.randn(H * k, d, generator=g, dtype=torch.float64)
        sd[a + "k_proj.weight"] = torch.randn(H_kv * k, d, generator=g, dtype=torch.float64)
        sd[a + "v_proj.weight"] = torch.randn(H_kv * k, d, generator=g, dtype=torch.float64)
        sd[a + "o_proj.weight"] = torch.randn(d, H * k, generator=g, dtype=torch.float64)
    cfg = {
        "model_type": "llama",
        "hidden_size": d,
        "num_attention_heads": H,
        "num_key_value_heads": H_kv,
        "num_hidden_layers": L,
        "head_dim": k,
    }
    return sd, cfg


@pytest.mark.parametrize("H, H_kv", [(4, 1), (1, 1)])
def test_single_kv_head_or_single_head_is_null_with_a_note(H: int, H_kv: int) -> None:
    sd, cfg = _random_llama_state(H, H_kv, 32, 8)
    diag = diagnose(load(sd, config=cfg, dtype=torch.float64))
    row = diag.layers[0]
    assert np.isnan(row["hdi_k"]) and np.isnan(row["hdi_v"]) and np.isnan(row["hdi_null_sd"])
    assert row["hdi_null"] == 1 - 8 / 32  # the null mean does not depend on the head count
    assert (np.isnan(row["hdi_q"])) == (H == 1)
    assert any("at least 2 heads" in n for n in diag.notes)
    assert np.isfinite(row["qk_rank90"])


def test_weight_z_of_gaussian_heads_is_near_zero() -> None:
    """i.i.d. Gaussian heads of MiniLM's shape: the weight-form z against its own null is ~N(0, 1)
    (the subspace-form null 1 − k/d gave z ≈ +16 here)."""
    sd, cfg = _random_llama_state(12, 12, 384, 32, L=4, seed=5)
    diag = diagnose(load(sd, config=cfg, dtype=torch.float64))
    for name in ("q", "k", "v", "ov"):
        z = np.array([r[f"hdi_{name}_weight_z"] for r in diag.layers])
        # four independent layers of N(0, 1): |z| < 4 each fails with probability ~2.5e-4
        assert np.all(np.abs(z) < 4), (name, z)


def test_grouped_cross_products_equal_the_expanded_ones() -> None:
    from attnlab.diagnose import cross_products
    from attnlab.diagnose.flow import grouped_cross_products

    g = torch.Generator().manual_seed(9)
    WQ = torch.randn(6, 30, 5, generator=g, dtype=torch.float64)
    WK = torch.randn(2, 30, 5, generator=g, dtype=torch.float64)
    kv = torch.arange(6) // 3
    # same quantity, contractions grouped differently: rounding only (~1e-15 relative)
    torch.testing.assert_close(
        grouped_cross_products(WQ, WK, kv), cross_products(WQ, WK[kv]), rtol=1e-10, atol=1e-12
    )


def test_bulk_edge_ratio_from_bartlett_factors_matches_gaussian_products() -> None:
    from attnlab.diagnose import bulk_edge_ratio
    from attnlab.diagnose.spectra import qk_triangular_factors

    G = torch.randn(2, 3000, 50, 6, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    Ra, Rb = qk_triangular_factors(G[0], G[1])
    sv = torch.linalg.svdvals(Ra @ Rb.transpose(-1, -2))
    direct = float(torch.quantile(sv[:, 0], 0.99) / sv.median(dim=-1).values.mean())
    # two Monte Carlo estimates of a 99th percentile (3000 draws each): ~1% apart at most
    assert bulk_edge_ratio(50, 6, 3000) == pytest.approx(direct, rel=0.03)


def _llama_traces(build_model, lengths: tuple[int, ...]):
    from attnlab.models import from_transformers
    from attnlab.models.trace import trace

    model = build_model("llama-gqa")
    heads = from_transformers(model, dtype=torch.float64)
    V = model.config.vocab_size
    traces = [
        trace(model, torch.randint(0, V, (1, n), generator=torch.Generator().manual_seed(n))) for n in lengths
    ]
    return heads, traces


def test_data_metric_key_hdi_against_numpy(build_model) -> None:
    heads, traces = _llama_traces(build_model, (30, 41))
    diag = diagnose(heads, traces, data_null_samples=64)
    d = heads.d_model
    for i, row in enumerate(diag.layers):
        X = np.concatenate([tr.inputs[i][0].double().numpy() for tr in traces])  # (71, d)
        w, U = np.linalg.eigh(np.cov(X.T))
        # Σ^{1/2}; Σ is singular here (≤ 50 distinct tokens feed layer 0): rounding-level eigenvalues -> 0
        root = (U * np.sqrt(np.where(w > d * 2.3e-16 * w[-1], w, 0.0))) @ U.T
        WK = heads.layers[i].W_K.numpy()  # (H_kv, d, k) distinct K heads
        hdi, _ = _hdi_numpy([root @ W for W in WK])
        # float64 eigen-decomposition and SVDs on the same data: ~1e-13; 1e-9 leaves room
        assert abs(row["hdi_k_data"] - hdi) < 1e-9
        assert row["hdi_k_data_z"] == pytest.approx(
            (row["hdi_k_data"] - row["hdi_k_data_null"]) / row["hdi_k_data_null_sd"], rel=1e-12
        )
        # the null by an independent Monte Carlo in numpy (Σ^{1/2} G, G Gaussian), 400 draws
        rng = np.random.default_rng(i)
        H_kv, _, k = WK.shape
        mc = [_hdi_numpy([root @ rng.standard_normal((d, k)) for _ in range(H_kv)])[0] for _ in range(400)]
        se = np.std(mc) * np.sqrt(1 / 64 + 1 / 400)  # two independent Monte Carlo means
        assert abs(row["hdi_k_data_null"] - np.mean(mc)) < 4 * se
        assert abs(row["hdi_k_data_null_sd"] / np.std(mc) - 1) < 0.35  # sd from 64 draws: ±9% each 1σ


def test_data_metric_is_the_subspace_form_under_whitened_inputs(build_model) -> None:
    """Σ = I exactly (whitened attention inputs): the data-metric HDI is the weight-space subspace HDI."""
    from attnlab.models.trace import Trace

    heads, traces = _llama_traces(build_model, (60,))  # 60 tokens > d = 48
    tr = traces[0]
    n, d = tr.inputs[0].shape[1:]
    g = torch.Generator().manual_seed(0)
    white = []
    for _ in tr.inputs:
        Z = torch.randn(n, d, generator=g, dtype=torch.float64)
        Z = Z - Z.mean(0)
        Q, _ = torch.linalg.qr(Z)  # (n, d) orthonormal columns, each orthogonal to the ones vector
        white.append((Q * (n - 1) ** 0.5).unsqueeze(0))  # covariance exactly I
    wtr = Trace(inputs=white, attentions=tr.attentions, outputs=tr.outputs)
    diag = diagnose(heads, [wtr])
    for row in diag.layers:
        assert abs(row["hdi_k_data"] - row["hdi_k"]) < 1e-12


def test_shared_layers_take_their_own_inputs(build_model) -> None:
    """ALBERT: layers sharing weights share the weight numbers, not the token-level ones."""
    from attnlab.models import from_transformers
    from attnlab.models.trace import trace

    model = build_model("albert")
    heads = from_transformers(model, dtype=torch.float64)
    traces = [
        trace(model, torch.randint(3, 50, (1, n), generator=torch.Generator().manual_seed(n)))
        for n in (30, 35)
    ]
    diag = diagnose(heads, traces, data_null_samples=8)
    assert heads.layer_key(0) == heads.layer_key(1)
    a, b = diag.layers[0], diag.layers[1]
    assert a["hdi_k"] == b["hdi_k"] and a["hdi_k_data"] != b["hdi_k_data"]
    for i, row in enumerate(diag.layers):
        X = np.concatenate([tr.inputs[i][0].double().numpy() for tr in traces])  # (65, d)
        w, U = np.linalg.eigh(np.cov(X.T))
        root = (U * np.sqrt(np.where(w > X.shape[1] * 2.3e-16 * w[-1], w, 0.0))) @ U.T
        hdi, _ = _hdi_numpy(list(root @ heads.layers[i].W_K.numpy()))
        assert abs(row["hdi_k_data"] - hdi) < 1e-9  # as in test_data_metric_key_hdi_against_numpy
        # entropy of layer i's own attention maps, averaged over heads and traces
        ent = np.mean(
            [
                -(tr.attentions[i][0].double() * tr.attentions[i][0].double().clamp_min(1e-300).log())
                .sum(-1)
                .mean(-1)
                .numpy()
                for tr in traces
            ]
        )
        assert abs(row["entropy"] - ent) < 1e-9
