"""The config-flag matrix: every attention-relevant config field at a non-default value, in float64.

Each variant of ``tinymodels.FLAG_VARIANTS`` is a tiny random model in float64 with eager attention,
saved with ``save_pretrained`` and read back through the offline, streamed loader; the attention
probabilities recomputed from ``HeadWeights`` must equal the model's own ``output_attentions`` and the
attention block outputs its output projection. Each ``REFUSED_VARIANTS`` entry is refused by
``load`` and by ``attnlab inspect`` (status 2) with one line naming the field and its value.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
import torch

from attnlab.models import load
from attnlab.models.trace import trace

transformers = pytest.importorskip("transformers")
from tinymodels import FLAG_VARIANTS, REFUSED_VARIANTS, _base, build_variant  # noqa: E402

# Both sides compute in float64 (~1e-16 per operation) except where the reference itself rounds to
# float32: its RoPE tables (cos/sin from float32 angles: ~6e-8 relative, scores of O(10) move
# probabilities by ≲1e-6), the softmax of GPT-BigCode, OPT, ViT and MPT (taken in float32: ~6e-8 relative
# on probabilities) and GPT-Neo's q and k (cast to float32). Block outputs sum 4 heads of O(1)
# values: 10× the probability bound. Otherwise 1e-10 leaves room for summation order over d ≤ 36
# coordinates and 12 keys.
# A reference that runs in float32 only gets the float32 bounds of test_families.py.
EXACT = (1e-10, 1e-9)
ROUNDED = (2e-6, 2e-5)
SINGLE = (1e-5, 1e-4)
FLOAT32_REFERENCE = ("gpt_bigcode", "opt", "vit", "gpt_neo", "mpt")


def _tolerances(heads, model) -> tuple[float, float]:
    if next(model.parameters()).dtype == torch.float32:
        return SINGLE
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
    p_tol, out_tol = _tolerances(heads, model)
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i].double(), rtol=0, atol=p_tol)
        torch.testing.assert_close(out.output, tr.outputs[i].to(out.output.dtype), rtol=0, atol=out_tol)


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


# ------------------------------------------------------------------------------------------------
# the matrix in docs/models.md against the installed transformers

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "models.md"
COLUMNS = ("tested", "refused", "sizes", "rope", "outside")
#: config fields the reference derives from another field that the variants set
ALIASES = {
    ("gpt_neo", "attention_layers"): "attention_types",
    ("modernbert", "sliding_window"): "local_attention",
}
SIZES = {
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "n_head",
    "n_embd",
    "dim",
    "n_heads",
    "d_kv",
    "d_model",
    "num_heads",
    "num_kv_heads",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "n_layers",
    "attention_heads",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
}


def _config_reads(node: ast.AST) -> set[str]:
    """Names ``X`` in ``config.X``, ``self.config.X`` and ``getattr(config, "X", ...)`` under ``node``."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and isinstance(sub.value, (ast.Name, ast.Attribute)):
            base = sub.value.id if isinstance(sub.value, ast.Name) else sub.value.attr
            if base == "config":
                out.add(sub.attr)
        if isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "getattr" and len(sub.args) >= 2:
            a0, a1 = sub.args[:2]
            base = a0.id if isinstance(a0, ast.Name) else getattr(a0, "attr", None)
            if base == "config" and isinstance(a1, ast.Constant) and isinstance(a1.value, str):
                out.add(a1.value)
    return out


def attention_path_fields(model_type: str) -> set[str]:
    """Config fields read in ``model_type``'s transformers modeling module by the attention, rotary,
    layer and block classes, the base model classes (masks, layer types) and module functions."""
    cfg_cls = transformers.AutoConfig.for_model(model_type).__class__
    module = importlib.import_module(cfg_cls.__module__.replace(".configuration_", ".modeling_"))
    tree = ast.parse(inspect.getsource(module))
    fields: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            fields |= _config_reads(node)
        elif isinstance(node, ast.ClassDef):
            n = node.name
            if any(w in n for w in ("Attention", "Rotary", "Layer", "Block")) or (
                n.endswith("Model") and "PreTrained" not in n
            ):
                fields |= _config_reads(node)
    return fields


def documented_matrix() -> dict[str, dict[str, set[str]]]:
    """``{model_type: {column: fields}}`` from the table between the flag-matrix markers of docs/models.md."""
    text = DOCS.read_text()
    block = text.split("<!-- flag-matrix:begin -->")[1].split("<!-- flag-matrix:end -->")[0]
    rows: dict[str, dict[str, set[str]]] = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS) + 1 or cells[0] in ("model_type", "") or set(cells[0]) <= set("-:"):
            continue
        mt = cells[0].strip("`")
        rows[mt] = {
            col: {f.strip().strip("`") for f in cell.split(",") if f.strip() and f.strip() != "—"}
            for col, cell in zip(COLUMNS, cells[1:])
        }
    return rows


def _variant_keys(table: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for entry in table.values():
        mt = _base(entry[0])[0]
        out.setdefault(mt, set()).update(entry[1])
    return out


def test_docs_matrix_lists_every_field_transformers_reads() -> None:
    """A field that a new transformers release starts reading (or stops reading) fails here until the
    table in docs/models.md classifies it, and every tested or refused field has its variant."""
    from attnlab.models import architectures

    rows = documented_matrix()
    tested, refused = _variant_keys(FLAG_VARIANTS), _variant_keys(REFUSED_VARIANTS)
    problems = []
    for mt in architectures()["supported"]:
        if mt not in rows:
            problems.append(f"{mt}: no row")
            continue
        row = rows[mt]
        listed = set().union(*row.values())
        read = attention_path_fields(mt)
        if listed != read:
            new, gone = sorted(read - listed), sorted(listed - read)
            problems.append(f"{mt}: not listed {new}, no longer read {gone}")
        for f in row["tested"]:
            if ALIASES.get((mt, f), f) not in tested.get(mt, set()):
                problems.append(f"{mt}: {f} marked tested without a FLAG_VARIANTS entry")
        for f in row["refused"]:
            if f not in refused.get(mt, set()):
                problems.append(f"{mt}: {f} marked refused without a REFUSED_VARIANTS entry")
        if not row["sizes"] <= SIZES:
            problems.append(f"{mt}: sizes {sorted(row['sizes'] - SIZES)} are not head counts or widths")
    pinned = re.search(r"^transformers==(\S+)", (ROOT / "constraints.txt").read_text(), re.M)
    where = (
        f"the table is checked against transformers {pinned.group(1)} (constraints.txt); "
        f"installed: {transformers.__version__}"
    )
    assert not problems, "\n".join([*problems, where])


def test_scanner_sees_flags_read_in_the_model_and_attention_classes() -> None:
    """The scan can find what the table must classify: flags read in the attention class, in the base
    model's mask logic and in the config-driven block layout."""
    assert {"use_bidirectional_attention", "attn_logit_softcapping", "query_pre_attn_scalar"} <= (
        attention_path_fields("gemma3_text")
    )
    assert {"alibi", "multi_query", "new_decoder_architecture"} <= attention_path_fields("falcon")
    assert "is_decoder" in attention_path_fields("bert")


def render_matrix() -> str:
    """The table's rows as classified from the variants (a starting point when transformers changes)."""
    from attnlab.models import architectures

    tested, refused = _variant_keys(FLAG_VARIANTS), _variant_keys(REFUSED_VARIANTS)
    lines = ["| model_type | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for mt in architectures()["supported"]:
        read = attention_path_fields(mt)
        t = {f for f in read if ALIASES.get((mt, f), f) in tested.get(mt, set())} - SIZES
        r = read & refused.get(mt, set())
        s = (read & SIZES) - t - r
        rope = {"max_position_embeddings"} & read - t if "rope_parameters" in read else set()
        rest = read - t - r - s - rope
        cells = [", ".join(f"`{f}`" for f in sorted(c)) or "—" for c in (t, r, s, rope, rest)]
        lines.append(f"| `{mt}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":  # print the rows for docs/models.md
    print(render_matrix())
