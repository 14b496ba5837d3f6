"""GGUF files against transformers' own GGUF loader as the oracle.

Tiny GGUF files are written here from tiny random Llamas with the ``gguf`` package's writer, in the
layout llama.cpp's converter produces (metadata keys, ``blk.i.*`` names, Q/K rows permuted so
rotary pairs are adjacent, norms in F32). ``transformers`` reads them back independently
(``from_pretrained(folder, gguf_file=...)``, its own un-permutation); attnlab reads them through
``models.load`` (streamed) and ``attnlab inspect``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attnlab.models import load
from attnlab.models.trace import trace

transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")
T = gguf.GGMLQuantizationType


def _llama(d: int, L: int, H: int, H_kv: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(
        hidden_size=d,
        num_hidden_layers=L,
        num_attention_heads=H,
        num_key_value_heads=H_kv,
        intermediate_size=2 * d,
        vocab_size=40,
        max_position_embeddings=64,
        rope_theta=500.0,
        rms_norm_eps=1e-5,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def _permute_for_ggml(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama.cpp's converter: per head, Hugging Face row ``a·k/2 + j`` goes to row ``2j + a``."""
    return w.reshape(n_heads, 2, w.shape[0] // n_heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _encode(arr: np.ndarray, qtype: T) -> tuple[np.ndarray, dict]:
    if qtype == T.F32:
        return arr.astype(np.float32), {}
    if qtype == T.F16:
        return arr.astype(np.float16), {}
    return gguf.quants.quantize(arr.astype(np.float32), qtype), {"raw_dtype": qtype}


def _byte_level_tokens(text: str, vocab: int) -> list[str]:
    """A GPT-2 byte-level vocabulary of the characters of ``text`` (one token each), three specials first
    and fillers up to ``vocab``: a GGUF tokenizer small enough for a 40-token model."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    shift = {b: chr(256 + n) for n, b in enumerate(b for b in range(256) if b not in printable)}
    char = {b: chr(b) for b in printable} | shift
    toks = ["<unk>", "<s>", "</s>", *sorted({char[b] for b in text.encode()}), "th"]
    assert len(toks) <= vocab
    return toks + [f"<extra_{i}>" for i in range(vocab - len(toks))]


def _write_gguf(
    path,
    model: torch.nn.Module,
    qtype: T,
    attn: dict | None = None,
    arch: str = "llama",
    tokens: list[str] | None = None,
) -> None:
    """Write ``model`` as llama.cpp does; ``attn`` optionally gives raw (encoded) attention tensors;
    ``tokens`` a byte-level BPE tokenizer (llama.cpp's ``gpt2`` model) stored in the file."""
    c = model.config
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    w = gguf.GGUFWriter(str(path), arch)
    if tokens is not None:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
        w.add_token_scores([0.0] * len(tokens))
        w.add_token_merges(["t h"])
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    permuted = arch == "llama"  # llama.cpp permutes Q/K rows for Llama only (Qwen: rotate-half as stored)
    w.add_name("tiny-llama")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    k = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    w.add_rope_dimension_count(k)
    w.add_key_length(k)
    w.add_value_length(k)
    w.add_vocab_size(c.vocab_size)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])
    w.add_tensor("output.weight", sd["lm_head.weight"])
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        w.add_tensor(f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        for g, hf in (
            ("ffn_gate", "mlp.gate_proj"),
            ("ffn_up", "mlp.up_proj"),
            ("ffn_down", "mlp.down_proj"),
        ):
            w.add_tensor(f"blk.{i}.{g}.weight", sd[p + hf + ".weight"])
        for g, hf, heads in (
            ("attn_q", "q_proj", c.num_attention_heads),
            ("attn_k", "k_proj", c.num_key_value_heads),
            ("attn_v", "v_proj", None),
            ("attn_output", "o_proj", None),
        ):
            heads = heads if permuted else None
            if attn is not None:
                data, kw = attn[(i, g)]
            else:
                arr = sd[p + f"self_attn.{hf}.weight"]
                data, kw = _encode(_permute_for_ggml(arr, heads) if heads else arr, qtype)
            w.add_tensor(f"blk.{i}.{g}.weight", data, **kw)
            if p + f"self_attn.{hf}.bias" in sd:
                b = sd[p + f"self_attn.{hf}.bias"]
                w.add_tensor(f"blk.{i}.{g}.bias", _permute_for_ggml(b, heads) if heads else b)
        for g, hf in (("attn_q_norm", "q_norm"), ("attn_k_norm", "k_norm")):
            if p + f"self_attn.{hf}.weight" in sd:
                w.add_tensor(f"blk.{i}.{g}.weight", sd[p + f"self_attn.{hf}.weight"])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _oracle(folder, name: str) -> torch.nn.Module:
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32, attn_implementation="eager"
    ).eval()


@pytest.mark.parametrize("qtype", [T.F32, T.F16, T.BF16, T.Q8_0])
def test_gguf_attention_matches_transformers_gguf_loader(qtype, tmp_path, capsys) -> None:
    model = _llama(32, 2, 4, 2, seed=1)
    _write_gguf(tmp_path / "m.gguf", model, qtype)
    ref = _oracle(tmp_path, "m.gguf")
    heads = load(tmp_path / "m.gguf", stream=True)
    assert (heads.n_layers, heads.n_heads, heads.n_kv_heads, heads.d_head) == (2, 4, 2, 8)
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    tr = trace(ref, ids)
    for i in range(heads.n_layers):
        layer, p = heads.layers[i], f"model.layers.{i}.self_attn."
        sd = ref.state_dict()
        # the weights transformers dequantised and un-permuted itself, to the last bit
        wq = sd[p + "q_proj.weight"].reshape(4, 8, 32).transpose(1, 2)  # (H, d, k)
        wk = sd[p + "k_proj.weight"].reshape(2, 8, 32).transpose(1, 2)  # (H_kv, d, k)
        torch.testing.assert_close(layer.W_Q.float(), wq, rtol=0, atol=0)
        torch.testing.assert_close(layer.W_K.float(), wk, rtol=0, atol=0)
        # float32 softmax over 9 keys: 1e-5 absolute, the families' acceptance bound
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i], rtol=0, atol=1e-5)
    if qtype in (T.F32, T.F16):  # lossless (F16: the model's weights are exact in float16 only up to
        # rounding, so compare F32 with the original model, F16 with its float16 round trip)
        orig = model if qtype == T.F32 else model.half().float()
        torch.testing.assert_close(
            heads.layers[1].W_Q.float(),
            orig.model.layers[1].self_attn.q_proj.weight.detach().reshape(4, 8, 32).transpose(1, 2),
            rtol=0,
            atol=0,
        )
    capsys.readouterr()
    from attnlab.cli.main import main

    rc = main(["inspect", str(tmp_path / "m.gguf"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["model_type"] == "llama" and len(data["layers"]) == 2
    assert data["token_level"] is False and "GGUF" in data["note"]


def test_q4_k_heads_are_the_dequantised_tensors(tmp_path) -> None:
    """Q4_K (rows of 256): random valid super-blocks; HeadWeights against transformers' model weights and
    against the gguf package's dequantisation with the rows put back by hand."""
    d, H, H_kv, k = 256, 4, 2, 64
    model = _llama(d, 1, H, H_kv, seed=2)
    rng = np.random.default_rng(0)
    block, size = gguf.GGML_QUANT_SIZES[T.Q4_K]  # 256 values in 144 bytes

    def q4k(rows: int) -> np.ndarray:
        raw = rng.integers(0, 256, size=(rows, d // block, size), dtype=np.uint8)
        scales = rng.uniform(0.001, 0.01, size=(rows, d // block, 2)).astype(np.float16)  # d, dmin
        raw[..., :4] = scales.view(np.uint8).reshape(rows, d // block, 4)
        return raw.reshape(rows, -1)

    attn = {(0, g): (q4k(r), {"raw_dtype": T.Q4_K}) for g, r in (("attn_q", H * k), ("attn_k", H_kv * k))}
    attn |= {(0, "attn_v"): (q4k(H_kv * k), {"raw_dtype": T.Q4_K})}
    attn |= {(0, "attn_output"): (q4k(d), {"raw_dtype": T.Q4_K})}
    _write_gguf(tmp_path / "q.gguf", model, T.Q4_K, attn)
    heads = load(tmp_path / "q.gguf", stream=True)
    ref = _oracle(tmp_path, "q.gguf").state_dict()
    layer = heads.layers[0]
    p = "model.layers.0.self_attn."
    torch.testing.assert_close(
        layer.W_Q, ref[p + "q_proj.weight"].reshape(H, k, d).transpose(1, 2), rtol=0, atol=0
    )
    torch.testing.assert_close(
        layer.W_K, ref[p + "k_proj.weight"].reshape(H_kv, k, d).transpose(1, 2), rtol=0, atol=0
    )
    torch.testing.assert_close(layer.W_O, ref[p + "o_proj.weight"].T.reshape(H, k, d), rtol=0, atol=0)
    # second reading: the gguf package's dequantisation, rows un-permuted by the inverse of the writer's map
    deq = gguf.quants.dequantize(attn[(0, "attn_k")][0], T.Q4_K)  # (H_kv·k, d) in ggml row order
    hf = deq.reshape(H_kv, k // 2, 2, d).swapaxes(1, 2).reshape(H_kv * k, d)
    assert np.array_equal(_permute_for_ggml(hf, H_kv), deq)  # the inverse really inverts the writer's map
    torch.testing.assert_close(
        layer.W_K, torch.from_numpy(hf).reshape(H_kv, k, d).transpose(1, 2), rtol=0, atol=0
    )


def test_gguf_refusals(tmp_path) -> None:
    w = gguf.GGUFWriter(str(tmp_path / "x.gguf"), "mamba")
    w.add_block_count(1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(
        ValueError, match=r"^general.architecture: expected a GGUF architecture .* got 'mamba'"
    ):
        load(tmp_path / "x.gguf")


@pytest.mark.parametrize("arch", ["qwen2", "qwen3"])
def test_gguf_qwen_matches_transformers_gguf_loader(arch, tmp_path) -> None:
    """Qwen2 (q/k/v biases) and Qwen3 (per-head RMS q/k norm): stored unpermuted by llama.cpp."""
    cls = {"qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}
    cls["qwen3"] = (transformers.Qwen3Config, transformers.Qwen3ForCausalLM)
    torch.manual_seed(4)
    cfg = cls[arch][0](
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8 if arch == "qwen2" else 128,  # transformers' GGUF reader keeps Qwen3's default 128
        intermediate_size=64,
        vocab_size=40,
        max_position_embeddings=64,
        rope_theta=500.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
    )
    model = cls[arch][1](cfg).eval()
    with torch.no_grad():  # random biases / norm weights, so that a dropped or misplaced one shows
        for name, prm in model.named_parameters():
            if name.endswith(("_proj.bias", "q_norm.weight", "k_norm.weight")):
                prm.copy_(torch.randn(prm.shape) * 0.5 + (1.0 if "norm" in name else 0.0))
    _write_gguf(tmp_path / "m.gguf", model, T.F32, arch=arch)
    ref = _oracle(tmp_path, "m.gguf")
    heads = load(tmp_path / "m.gguf", stream=True)
    assert heads.model_type == arch and heads.n_kv_heads == 2
    ids = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    tr, tr_orig = trace(ref, ids), trace(model, ids)
    for i in range(heads.n_layers):
        out = heads.forward(i, tr.inputs[i])
        torch.testing.assert_close(out.probs, tr.attentions[i], rtol=0, atol=1e-5)  # as above
        torch.testing.assert_close(tr.attentions[i], tr_orig.attentions[i], rtol=0, atol=1e-5)


def test_gguf_linear_rope_scaling_matches_the_original_model(tmp_path) -> None:
    """``llama.rope.scaling.type = linear``: attention of the GGUF heads against the source model itself."""
    torch.manual_seed(5)
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        vocab_size=40,
        max_position_embeddings=64,
        rope_scaling={"rope_type": "linear", "factor": 3.0},
        rope_theta=500.0,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    src = tmp_path / "lin.gguf"
    _write_gguf(src, model, T.F32)
    # rewrite with the scaling keys llama.cpp's converter adds (the writer above leaves them out)
    reader = gguf.GGUFReader(str(src))
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama")
    for key, field in reader.fields.items():
        if key.startswith(("llama.", "general.name")):
            val = field.contents()
            vtype = field.types[0]
            w.add_key_value(key, val, vtype)
    w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
    w.add_rope_scaling_factor(3.0)
    for t in reader.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=tuple(reversed(t.shape.tolist())))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    heads = load(tmp_path / "m.gguf", stream=True)
    ids = torch.randint(0, 40, (1, 12), generator=torch.Generator().manual_seed(1))
    tr = trace(model, ids)
    out = heads.forward(0, tr.inputs[0])
    torch.testing.assert_close(out.probs, tr.attentions[0], rtol=0, atol=1e-5)  # float32, as above


def test_gguf_token_level_diagnostics_use_the_files_tokenizer(tmp_path, capsys) -> None:
    """inspect traces a GGUF file with its own tokenizer and transformers' GGUF loader: the tokens are
    those transformers' tokenizer gives from the file, and the data-metric HDI sees all of them."""
    from attnlab.cli.main import main
    from attnlab.diagnose import SENTENCES

    model = _llama(32, 2, 4, 2, seed=1)
    _write_gguf(tmp_path / "m.gguf", model, T.F16, tokens=_byte_level_tokens("".join(SENTENCES), 40))
    tok = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="m.gguf")
    n_tokens = sum(len(tok(s)["input_ids"]) for s in SENTENCES)
    assert all(0 <= i < 40 for s in SENTENCES for i in tok(s)["input_ids"])
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "m.gguf"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["token_level"] is True and "tokenizer" not in data.get("note", "")
    assert all(row["data_tokens"] == n_tokens for row in data["layers"])
    assert all(0 < row["entropy_ratio"] <= 1 for row in data["layers"])


def test_gguf_without_tokenizer_skips_token_level_with_a_note(tmp_path, capsys) -> None:
    from attnlab.cli.main import main

    _write_gguf(tmp_path / "m.gguf", _llama(32, 2, 4, 2, seed=1), T.F32)
    capsys.readouterr()
    assert main(["inspect", str(tmp_path / "m.gguf"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["token_level"] is False and "without tokenizer.ggml.tokens" in data["note"]
