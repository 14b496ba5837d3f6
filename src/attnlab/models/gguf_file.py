"""GGUF files (llama.cpp's format) read as a config and a lazy state dict in Hugging Face names.

A GGUF file holds key-value metadata (``general.architecture``, ``{arch}.block_count``,
``{arch}.attention.head_count`` ...) and tensors in ggml order (``shape = [ne0, ne1]``, ``ne0`` the
fastest axis, so a linear weight ``(out, in)`` is stored with ``ne0 = in``). Quantised types store
rows of blocks; they are dequantised to float32 with the ``gguf`` package (``gguf.quants.dequantize``:
Q8_0, Q4_K, Q6_K, IQ*, ...). F32, F16, BF16 and F64 keep their dtype.

Key map (per layer ``i``; only the attention tensors are ever read)::

    blk.{i}.attn_q.weight      -> model.layers.{i}.self_attn.q_proj.weight   (rows un-permuted)
    blk.{i}.attn_k.weight      -> model.layers.{i}.self_attn.k_proj.weight   (rows un-permuted)
    blk.{i}.attn_v.weight      -> model.layers.{i}.self_attn.v_proj.weight
    blk.{i}.attn_output.weight -> model.layers.{i}.self_attn.o_proj.weight
    (``.bias`` likewise; ``attn_q_norm``/``attn_k_norm`` -> ``q_norm``/``k_norm`` for qwen3)

Rotary layout. llama.cpp's converter stores a Llama Q/K projection with its rows permuted so
that rotary pairs are adjacent (ggml's "normal" RoPE rotates ``(2j, 2j+1)``), where Hugging Face
rotates ``(j, j + k/2)`` within each head of size ``k``. Per head, the Hugging Face row
``a·k/2 + j`` (``a ∈ {0, 1}``, ``j < k/2``) is stored at row ``2j + a``. Reading undoes it
exactly: rows ``(H, k/2, 2)`` -> ``(H, 2, k/2)`` (``H`` = query heads for Q, K/V heads for K).
Qwen2 and Qwen3 use the rotate-half ("NEOX") layout in both and are stored unpermuted.

Refused, each with one error: architectures outside :data:`ARCHITECTURES`; RoPE scaling other than
none or linear (``rope_freqs`` factor tensors, YaRN); partial rotary dimensions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["ARCHITECTURES", "GGUFState", "is_gguf", "read_gguf"]

#: GGUF ``general.architecture`` -> (Hugging Face ``model_type``, whether Q/K rows are permuted)
ARCHITECTURES: dict[str, tuple[str, bool]] = {
    "llama": ("llama", True),
    "qwen2": ("qwen2", False),
    "qwen3": ("qwen3", False),
}

_NAMES = {
    "attn_q": "q_proj",
    "attn_k": "k_proj",
    "attn_v": "v_proj",
    "attn_output": "o_proj",
    "attn_q_norm": "q_norm",
    "attn_k_norm": "k_norm",
}
_FLOAT_TYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def is_gguf(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that starts with the GGUF magic ``b"GGUF"``."""
    p = Path(path)
    if not p.is_file():
        return False
    with p.open("rb") as fh:
        return fh.read(4) == b"GGUF"


def unpermute_rows(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's rotary row permutation of a Q/K weight ``(n_heads·k, ...)`` or bias ``(n_heads·k,)``.

    Stored row ``2j + a`` of a head is the Hugging Face row ``a·k/2 + j`` (module docstring).
    """
    rows = w.shape[0]
    if rows % (2 * n_heads):
        raise ValueError(f"gguf: expected Q/K rows divisible by 2·heads = {2 * n_heads}, got {rows}")
    half = rows // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)


class GGUFState(Mapping[str, torch.Tensor]):
    """The attention tensors of a GGUF file under Hugging Face names, read (and dequantised) on access.

    Each access opens the file, reads that one tensor's bytes and closes it again: no mapping of the
    file stays resident, so memory holds only what the caller keeps.
    """

    def __init__(self, path: Path, infos: Mapping[str, tuple[int, int, Any, tuple[int, ...]]], permute: dict):
        self._path = path
        self._infos = dict(infos)  # hf key -> (offset, n_bytes, ggml type, torch shape)
        self._permute = dict(permute)  # hf key -> heads whose rows to un-permute

    def __getitem__(self, key: str) -> torch.Tensor:
        from gguf import GGMLQuantizationType, dequantize

        offset, n_bytes, qtype, shape = self._infos[key]
        with self._path.open("rb") as fh:
            fh.seek(offset)
            raw = np.frombuffer(fh.read(n_bytes), dtype=np.uint8)
        if raw.size != n_bytes:
            raise ValueError(f"gguf: expected {n_bytes} bytes for {key!r}, got {raw.size} (truncated file)")
        name = GGMLQuantizationType(qtype).name
        if name in _FLOAT_TYPES:
            arr = raw.view(_FLOAT_TYPES[name]).reshape(shape)
            t = torch.from_numpy(arr.copy())
        elif name == "BF16":
            t = torch.from_numpy(raw.view(np.int16).copy()).view(torch.bfloat16).reshape(shape)
        else:
            try:
                arr = dequantize(raw.reshape(int(np.prod(shape[:-1])), -1), qtype)  # (rows, ne0) float32
            except NotImplementedError:
                raise ValueError(
                    f"gguf[{key!r}]: expected a type the gguf package dequantises, got {name}"
                ) from None
            t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).reshape(shape)
        heads = self._permute.get(key)
        return unpermute_rows(t, heads) if heads else t

    def __iter__(self) -> Iterator[str]:
        return iter(self._infos)

    def __len__(self) -> int:
        return len(self._infos)


def _field(fields: Mapping[str, Any], key: str, default: Any = None) -> Any:
    f = fields.get(key)
    if f is None:
        return default
    val = f.contents()
    return val


def read_gguf(path: str | os.PathLike) -> tuple[dict[str, Any], GGUFState]:
    """The Hugging Face config (a dict) and the lazy attention state of a GGUF file."""
    from gguf import GGUFReader

    p = Path(path)
    try:
        reader = GGUFReader(str(p), "r")
    except Exception as exc:  # the gguf package raises several error types on a bad header
        raise ValueError(f"path: expected a readable GGUF file, got {str(p)!r} ({exc})") from None
    fields = reader.fields
    arch = str(_field(fields, "general.architecture", ""))
    if arch not in ARCHITECTURES:
        raise ValueError(
            f"general.architecture: expected a GGUF architecture read exactly ({', '.join(ARCHITECTURES)}), "
            f"got {arch!r}"
        )
    model_type, permuted = ARCHITECTURES[arch]

    def meta(key: str, default: Any = None) -> Any:
        return _field(fields, f"{arch}.{key}", default)

    d = int(meta("embedding_length"))
    H = int(meta("attention.head_count"))
    H_kv = int(meta("attention.head_count_kv", H))
    k = int(meta("attention.key_length", d // H))
    rot = meta("rope.dimension_count", k)
    if int(rot) != k:
        raise ValueError(f"{arch}.rope.dimension_count: expected the head size {k} (full rotary), got {rot}")
    scaling = str(meta("rope.scaling.type", "none"))
    names = {t.name for t in reader.tensors}
    if "rope_freqs.weight" in names:
        raise ValueError(
            "gguf: expected no rope_freqs tensor (per-frequency RoPE factors are not reproduced)"
        )
    config: dict[str, Any] = {
        "model_type": model_type,
        "hidden_size": d,
        "num_hidden_layers": int(meta("block_count")),
        "num_attention_heads": H,
        "num_key_value_heads": H_kv,
        "head_dim": k,
        "rope_theta": float(meta("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(meta("context_length", 2048)),
        "rms_norm_eps": float(meta("attention.layer_norm_rms_epsilon", 1e-6)),
        "attention_bias": "blk.0.attn_q.bias" in names,
        "_name_or_path": str(_field(fields, "general.name", "") or p.stem),
    }
    if scaling == "linear":
        config["rope_scaling"] = {"rope_type": "linear", "factor": float(meta("rope.scaling.factor"))}
    elif scaling != "none":
        raise ValueError(f"{arch}.rope.scaling.type: expected none or linear, got {scaling!r}")
    if model_type == "qwen2":
        config["use_sliding_window"] = False
    infos, permute = {}, {}
    for t in reader.tensors:
        parts = t.name.split(".")
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in _NAMES:
            continue  # only attention tensors are ever read
        key = f"model.layers.{parts[1]}.self_attn.{_NAMES[parts[2]]}.{parts[3]}"
        shape = tuple(int(s) for s in reversed(t.shape.tolist()))  # ggml [ne0, ne1] -> torch (ne1, ne0)
        infos[key] = (int(t.data_offset), int(t.n_bytes), int(t.tensor_type), shape)
        if permuted and parts[2] in ("attn_q", "attn_k"):
            permute[key] = H if parts[2] == "attn_q" else H_kv
    del reader  # drops the file mapping: tensors are read one at a time later
    return config, GGUFState(p, infos, permute)
