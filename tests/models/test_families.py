"""Every supported decoder family and RoPE variant against transformers as the oracle.

Each tiny random model is saved with ``save_pretrained`` and read back through the offline loader
(streamed, as ``inspect`` reads it); the attention probabilities recomputed from ``HeadWeights``
must match the model's own ``output_attentions`` and the attention block outputs its output
projection, in float32.
"""

from __future__ import annotations

import json

import pytest
import torch

from attnlab.models import load
from attnlab.models.trace import trace

transformers = pytest.importorskip("transformers")
from tinymodels import FAMILY_CONFIGS, ROPE_VARIANTS, build_family  # noqa: E402

# float32 throughout: probabilities are softmax outputs in [0, 1] accumulated over ~10 keys with
# ~1e-7 rounding per operation; 1e-5 (absolute) is the acceptance bound, 1e-4 on block outputs of
# size O(1) summed over 4 heads and d_head ≤ 12 coordinates.
P_TOL, OUT_TOL = 1e-5, 1e-4


def _compare(model: torch.nn.Module, folder, n: int) -> None:
    heads = load(folder, stream=True)
    ids = torch.randint(0, 40, (2, n), generator=torch.Generator().manual_seed(3))
    tr = trace(model, ids)
    assert len(tr.inputs) == heads.n_layers
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i], rtol=0, atol=P_TOL)
        torch.testing.assert_close(out.output, tr.outputs[i], rtol=0, atol=OUT_TOL)


@pytest.mark.parametrize("name", sorted(FAMILY_CONFIGS))
def test_family_matches_transformers(name: str, tmp_path, capsys) -> None:
    from attnlab.cli.main import main

    model = build_family(name)
    model.save_pretrained(tmp_path)
    _compare(model, tmp_path, FAMILY_CONFIGS[name][2])
    capsys.readouterr()
    rc = main(["inspect", str(tmp_path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert (
        rc == 0 and data["model_type"] == FAMILY_CONFIGS[name][0] and len(data["layers"]) == data["n_layers"]
    )
    assert data["token_level"] is False  # no tokenizer saved: skipped, with a note
    nonbilinear = name in (
        "qwen3",
        "qwen3_moe",
        "gemma2",
        "gemma3_text",
        "olmo2",
        "stablelm",
        "cohere",
        "deepseek_v2",
        "deepseek_v3",
    )
    assert data["scores_bilinear"] is (not nonbilinear)
    assert ("not a bilinear form" in data["note"]) is nonbilinear


def test_windows_are_read_per_layer(tmp_path) -> None:
    expect = {
        "mistral-window": [(3, 0), (3, 0)],
        "qwen2-window": [None, (3, 0)],
        "gemma3_text": [(3, 0), None, (3, 0)],
    }
    for name, windows in expect.items():
        build_family(name).save_pretrained(tmp_path / name)
        heads = load(tmp_path / name)
        assert [layer.window for layer in heads.layers] == windows, name


@pytest.mark.parametrize("variant", sorted(ROPE_VARIANTS))
@pytest.mark.parametrize("layout", ["rope_parameters", "rope_scaling"])
def test_rope_variant_matches_transformers(variant: str, layout: str, tmp_path) -> None:
    model = build_family("llama", rope=dict(ROPE_VARIANTS[variant]))
    model.save_pretrained(tmp_path)
    if layout == "rope_scaling":  # the transformers-4 layout: rope_scaling beside a top-level rope_theta
        cfg = json.loads((tmp_path / "config.json").read_text())
        rp = cfg.pop("rope_parameters")
        cfg["rope_theta"] = rp.pop("rope_theta")
        cfg["rope_scaling"] = rp
        (tmp_path / "config.json").write_text(json.dumps(cfg))
        model = transformers.AutoModel.from_pretrained(tmp_path, attn_implementation="eager").eval()
    _compare(model, tmp_path, 12)
    heads = load(tmp_path, stream=True)
    assert heads.rope is not None and heads.rope.rope_type == variant


def test_a_dropped_stage_is_detected(tmp_path) -> None:
    """The comparison can fail: without the soft-cap stage Gemma 2's probabilities differ."""
    import dataclasses

    model = build_family("gemma2")
    model.save_pretrained(tmp_path)
    heads = load(tmp_path)
    ids = torch.randint(0, 40, (1, 12), generator=torch.Generator().manual_seed(3))
    tr = trace(model, ids)
    bare = dataclasses.replace(heads.layers[0], softcap=None)
    assert (
        bare.forward(tr.inputs[0], causal=True, rope=heads.rope).probs - tr.attentions[0]
    ).abs().max() > 1e-3


def test_unknown_rope_type_is_refused(tmp_path) -> None:
    model = build_family("llama")
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["rope_parameters"] = {"rope_type": "su-magic", "rope_theta": 10.0}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="rope_type: expected one of .* got 'su-magic'"):
        load(tmp_path)


from tinymodels import ENCODER_CONFIGS, build_encoder  # noqa: E402


@pytest.mark.parametrize("name", sorted(ENCODER_CONFIGS))
def test_encoder_and_fused_families_match_transformers(name: str, tmp_path, capsys) -> None:
    from attnlab.cli.main import main

    model, inputs = build_encoder(name)
    model.save_pretrained(tmp_path)
    heads = load(tmp_path, stream=True)
    tr = trace(model, **inputs)
    assert len(tr.inputs) == heads.n_layers
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i], rtol=0, atol=P_TOL)
        torch.testing.assert_close(out.output, tr.outputs[i], rtol=0, atol=OUT_TOL)
    capsys.readouterr()
    assert main(["inspect", str(tmp_path), "--json", "--no-text"]) == 0
    assert json.loads(capsys.readouterr().out)["n_layers"] == heads.n_layers


@pytest.mark.parametrize(
    "config, message",
    [
        ({"model_type": "deberta-v2"}, r"got 'deberta-v2' \(disentangled attention"),
        ({"model_type": "olmo", "clip_qkv": 8.0}, r"config.clip_qkv: expected none"),
        ({"model_type": "falcon", "alibi": True}, r"config.alibi: expected false"),
        ({"model_type": "bert", "position_embedding_type": "relative_key"}, r"position_embedding_type"),
        ({"model_type": "mamba"}, r"expected a model with attention layers, got 'mamba' \(a state-space"),
        ({"model_type": "rwkv"}, r"got 'rwkv' \(a recurrent model .*: no attention layers\)"),
    ],
)
def test_refused_features_are_named(config: dict, message: str, tmp_path) -> None:
    base = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 1, "n_head": 2, "n_layer": 1}
    (tmp_path / "config.json").write_text(json.dumps({**base, **config}))
    from safetensors.torch import save_file

    save_file({"layers.0.self_attn.q_proj.weight": torch.zeros(8, 8)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=message):
        load(tmp_path)
