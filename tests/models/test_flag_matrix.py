"""The config-flag matrix: every attention-relevant config field at a non-default value, in float64.

Each variant of ``tinymodels.FLAG_VARIANTS`` is a tiny random model in float64 with eager attention,
saved with ``save_pretrained`` and read back through the offline, streamed loader; the attention
probabilities recomputed from ``HeadWeights`` must equal the model's own ``output_attentions`` and the
attention block outputs its output projection. Each ``REFUSED_VARIANTS`` entry is refused by
``load`` and by ``attnlab inspect`` (status 2) with one line naming the field and its value.
"""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.models import load
from attnlab.models.trace import trace

transformers = pytest.importorskip("transformers")
from tinymodels import FLAG_VARIANTS, REFUSED_VARIANTS, build_variant  # noqa: E402

# Both sides compute in float64 (~1e-16 per operation) except where the reference itself rounds to
# float32: its RoPE tables (cos/sin from float32 angles: ~6e-8 relative, scores of O(10) move
# probabilities by ≲1e-6), the softmax of GPT-BigCode, OPT and ViT (taken in float32: ~6e-8 relative
# on probabilities) and GPT-Neo's q and k (cast to float32). Block outputs sum 4 heads of O(1)
# values: 10× the probability bound. Otherwise 1e-10 leaves room for summation order over d ≤ 36
# coordinates and 12 keys.
EXACT = (1e-10, 1e-9)
ROUNDED = (2e-6, 2e-5)
FLOAT32_REFERENCE = ("gpt_bigcode", "opt", "vit", "gpt_neo")


def _tolerances(heads) -> tuple[float, float]:
    layer_ropes = any(layer.rope is not None for layer in heads.layers)
    if heads.rope is not None or layer_ropes or heads.model_type in FLOAT32_REFERENCE:
        return ROUNDED
    return EXACT


@pytest.mark.parametrize("name", sorted(FLAG_VARIANTS))
def test_flag_variant_matches_transformers(name: str, tmp_path) -> None:
    model, inputs = build_variant(name)
    model.save_pretrained(tmp_path)
    heads = load(tmp_path, stream=True, dtype=torch.float64)
    tr = trace(model, **inputs)
    assert len(tr.inputs) == heads.n_layers
    p_tol, out_tol = _tolerances(heads)
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i].double(), rtol=0, atol=p_tol)
        torch.testing.assert_close(out.output, tr.outputs[i], rtol=0, atol=out_tol)


@pytest.mark.parametrize("name", sorted(REFUSED_VARIANTS))
def test_refused_variant_is_named(name: str, tmp_path, capsys) -> None:
    from attnlab.cli.main import main

    model, _ = build_variant(name)
    model.save_pretrained(tmp_path)
    message = REFUSED_VARIANTS[name][2]
    with pytest.raises(ValueError, match=message):
        load(tmp_path)
    capsys.readouterr()
    assert main(["inspect", str(tmp_path), "--json", "--no-text"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    field = name.split("/")[1].split("=")[0]
    assert field in err and re.search(message, err)
