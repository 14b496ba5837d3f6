"""Loading the bundled model, errors on bad input, the offline guard."""

from __future__ import annotations

import json
import os

import pytest
import torch

from attnlab.models import bundled_model_path, from_state_dict, load, offline


def test_bundled_minilm_shapes_and_values() -> None:
    heads = load("minilm")
    assert (heads.n_layers, heads.n_heads, heads.d_model, heads.d_head) == (6, 12, 384, 32)
    assert heads.architecture == "bert" and not heads.causal and heads.name == "all-MiniLM-L6-v2"
    # independent read of one tensor straight from the safetensors file
    from safetensors import safe_open

    with safe_open(str(bundled_model_path() / "model.safetensors"), framework="pt") as f:
        wk = f.get_tensor("encoder.layer.3.attention.self.key.weight")  # (H*k, d), y = x W^T
        bo = f.get_tensor("encoder.layer.3.attention.output.dense.bias")
    torch.testing.assert_close(heads.layers[3].W_K[5], wk[5 * 32 : 6 * 32].T, rtol=0, atol=0)
    torch.testing.assert_close(heads.layers[3].b_O, bo, rtol=0, atol=0)


def test_offline_guard_restores_environment() -> None:
    before = os.environ.get("HF_HUB_OFFLINE")
    with offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ.get("HF_HUB_OFFLINE") == before


def test_missing_path() -> None:
    with pytest.raises(ValueError, match=r"^path: expected an existing checkpoint"):
        load("/nonexistent/model/dir")


def test_folder_without_weights(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match=r"^path: expected model.safetensors"):
        load(tmp_path)


def test_folder_without_config(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"^path: expected a checkpoint folder with config.json"):
        load(tmp_path)


def test_unknown_architecture(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"^model_type: expected a supported architecture .* got 'xlnet'"):
        load(tmp_path)


def test_corrupt_safetensors(tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match=r"^checkpoint: expected a readable safetensors file"):
        load(tmp_path)


def _bert_state(d: int = 8, H: int = 2, L: int = 1) -> tuple[dict, dict]:
    cfg = {"model_type": "bert", "hidden_size": d, "num_attention_heads": H, "num_hidden_layers": L}
    sd = {}
    for i in range(L):
        a = f"encoder.layer.{i}.attention."
        for n in ("self.query", "self.key", "self.value", "output.dense"):
            sd[a + n + ".weight"] = torch.randn(d, d)
            sd[a + n + ".bias"] = torch.randn(d)
    return sd, cfg


def test_state_dict_roundtrip_and_malformed() -> None:
    sd, cfg = _bert_state()
    heads = load(sd, config=cfg)
    assert heads.n_heads == 2 and heads.d_head == 4
    # y = x W^T: column block h of W^T is head h
    torch.testing.assert_close(
        heads.layers[0].W_Q[1], sd["encoder.layer.0.attention.self.query.weight"][4:].T
    )
    bad = dict(sd)
    bad["encoder.layer.0.attention.self.key.weight"] = torch.randn(8, 7)
    with pytest.raises(ValueError, match=r"expected shape \(8, 8\), got \(8, 7\)"):
        from_state_dict(bad, cfg)
    del bad["encoder.layer.0.attention.self.value.bias"]
    bad["encoder.layer.0.attention.self.key.weight"] = sd["encoder.layer.0.attention.self.key.weight"]
    with pytest.raises(ValueError, match=r"self.value.bias.*malformed"):
        from_state_dict(bad, cfg)
    with pytest.raises(ValueError, match=r"^config: expected the model config"):
        load(sd)
    with pytest.raises(ValueError, match=r"^source: expected"):
        load(3.5)
