"""Benchmarks of the real-model diagnostics (run: pytest bench/bench_models.py --benchmark-only -s).

Each benchmark times the project's weights-only ``diagnose`` and a plain reference in the same run
and reports ratio = reference time / project time. The reference is the direct approach: per head
pair ``scipy.linalg.subspace_angles`` and overlaps from per-head SVD bases (Q, K, V, OV), a dense
``d × d`` SVD of ``W_Q W_Kᵀ`` per head, dense ``M_h, V_h`` for the flow defects and ``‖M_g M_h‖_op``.
Targets: MiniLM (72 heads) under 10 s, GPT-2-small-sized random model (144 heads, d 768) under 30 s.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from attnlab.diagnose import diagnose
from attnlab.models import from_state_dict, load


def _reference_layer(WQ, WK, WV, WO, scale) -> None:
    """Naive numpy/scipy diagnostics of one layer (same quantities as diagnose, no batching)."""
    from scipy.linalg import subspace_angles

    H = WQ.shape[0]
    ov = [(WV[h] @ WO[h]).T for h in range(H)]  # dense V_h (d, d)
    for stack in (WQ, WK, WV, ov):
        bases = [np.linalg.svd(W, full_matrices=False)[0][:, : WQ.shape[2]] for W in stack]
        for a in range(H):
            for b in range(a + 1, H):
                np.linalg.norm(bases[a].T @ bases[b]) ** 2
                subspace_angles(bases[a], bases[b])
    Ms = [scale * WQ[h] @ WK[h].T for h in range(H)]
    ops = []
    for h in range(H):
        np.linalg.svd(Ms[h], compute_uv=False)
        np.linalg.norm(Ms[h] - Ms[h].T)
        np.sum(ov[h] * Ms[h])
        ops.append(np.linalg.norm(Ms[h], 2))
    for g in range(H):
        for h in range(H):
            if g != h:
                np.linalg.norm(Ms[g] @ Ms[h], 2)


def _reference(heads, layers: int) -> float:
    t = time.perf_counter()
    for i in range(layers):
        la = heads.layers[i].to(torch.float64)
        _reference_layer(la.W_Q.numpy(), la.W_K.numpy(), la.W_V.numpy(), la.W_O.numpy(), la.scale)
    return time.perf_counter() - t


def _gpt2_small_random():
    """A GPT-2-small-sized attention state dict with random weights (12 layers x 12 heads, d 768)."""
    g = torch.Generator().manual_seed(0)
    d, L = 768, 12
    sd = {}
    for i in range(L):
        sd[f"h.{i}.attn.c_attn.weight"] = 0.02 * torch.randn(d, 3 * d, generator=g)
        sd[f"h.{i}.attn.c_attn.bias"] = 0.02 * torch.randn(3 * d, generator=g)
        sd[f"h.{i}.attn.c_proj.weight"] = 0.02 * torch.randn(d, d, generator=g)
        sd[f"h.{i}.attn.c_proj.bias"] = 0.02 * torch.randn(d, generator=g)
    cfg = {"model_type": "gpt2", "n_embd": d, "n_layer": L, "n_head": 12}
    return from_state_dict(sd, cfg, name="gpt2-small-random")


@pytest.fixture(autouse=True)
def _one_thread():
    """Both sides on one thread (torch and BLAS), so the ratio compares algorithms, not thread counts."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(1):
        yield
    torch.set_num_threads(before)


def _bench(benchmark, heads, ref_layers: int) -> None:
    diagnose(heads)  # warm-up (the bulk-edge null is cached per (d, k))
    benchmark.pedantic(diagnose, args=(heads,), rounds=2, iterations=1)
    ours = benchmark.stats.stats.mean
    ref = _reference(heads, ref_layers) * heads.n_layers / ref_layers
    ratio = ref / ours
    benchmark.extra_info.update(
        {"project_s": ours, "reference_s": ref, "ratio": ratio, "reference_layers_timed": ref_layers}
    )
    print(
        f"\n{heads.name}: diagnose {ours:.2f} s, naive reference {ref:.2f} s "
        f"({ref_layers}/{heads.n_layers} layers timed, scaled), ratio {ratio:.1f}x"
    )


def test_bench_minilm_weights_only(benchmark) -> None:
    _bench(benchmark, load("minilm"), ref_layers=1)  # the naive reference is slow: one layer, scaled


def test_bench_gpt2_small_random(benchmark) -> None:
    _bench(benchmark, _gpt2_small_random(), ref_layers=1)


# ------------------------------------------------------------------------------------------------
# Streaming: `attnlab inspect` on large random checkpoints, measured from outside the process.
# Run: python bench/bench_models.py streaming [tinyllama llama2-7b llama-70b]   (or pytest -k streaming -s)
# The checkpoints are generated here, in a temporary folder, and deleted afterwards (never committed).

STREAM_SHAPES = {
    # name: (d_model, heads, kv_heads, layers written, layers of the real model, intermediate, vocab, sparse)
    "tinyllama": (2048, 32, 4, 22, 22, 5632, 32000, False),
    "llama2-7b": (4096, 32, 32, 32, 32, 11008, 32000, True),  # full depth unless ATTNLAB_BENCH_LAYERS
    "llama-70b": (8192, 64, 8, 2, 80, 28672, 32000, True),
}


def _layer_tensors(d: int, H: int, Hkv: int, inter: int) -> list[tuple[str, tuple[int, ...], bool]]:
    """(name suffix, shape, is attention) of one Llama decoder layer."""
    k = d // H
    return [
        ("self_attn.q_proj.weight", (H * k, d), True),
        ("self_attn.k_proj.weight", (Hkv * k, d), True),
        ("self_attn.v_proj.weight", (Hkv * k, d), True),
        ("self_attn.o_proj.weight", (d, H * k), True),
        ("mlp.gate_proj.weight", (inter, d), False),
        ("mlp.up_proj.weight", (inter, d), False),
        ("mlp.down_proj.weight", (d, inter), False),
        ("input_layernorm.weight", (d,), False),
        ("post_attention_layernorm.weight", (d,), False),
    ]


def _layers_written(shape: str) -> int:
    """Layers written for ``shape``: all, unless ATTNLAB_BENCH_LAYERS caps them (then extrapolated)."""
    import os

    L = STREAM_SHAPES[shape][3]
    cap = os.environ.get("ATTNLAB_BENCH_LAYERS")
    return min(L, int(cap)) if cap else L


def write_llama_checkpoint(folder, shape: str, shards: int = 3, seed: int = 0) -> dict:
    """A random Llama-architecture checkpoint in bf16, sharded safetensors with an index, written
    tensor by tensor (never the whole model in memory). ``sparse``: non-attention tensors are holes
    in the files (zeros on read, no disk blocks), attention tensors are random."""
    import json
    import struct
    from pathlib import Path

    d, H, Hkv, L, _, inter, vocab, sparse = STREAM_SHAPES[shape]
    L = _layers_written(shape)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    layer_groups = [list(range(L))[s::shards] for s in range(shards)]
    layer_groups = [sorted(x) for x in layer_groups if x]
    plan: list[list[tuple[str, tuple[int, ...], bool]]] = []
    for gi, layers in enumerate(layer_groups):
        entries = [
            (f"model.layers.{i}.{n}", s, a) for i in layers for n, s, a in _layer_tensors(d, H, Hkv, inter)
        ]
        if gi == 0:
            entries.insert(0, ("model.embed_tokens.weight", (vocab, d), False))
        if gi == len(layer_groups) - 1:
            entries += [("model.norm.weight", (d,), False), ("lm_head.weight", (vocab, d), False)]
        plan.append(entries)
    weight_map, total = {}, 0
    for gi, entries in enumerate(plan):
        fname = f"model-{gi + 1:05d}-of-{len(plan):05d}.safetensors"
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, s, _ in entries:
            n = 2 * int(np.prod(s))
            header[name] = {"dtype": "BF16", "shape": list(s), "data_offsets": [off, off + n]}
            off += n
            weight_map[name] = fname
        hb = json.dumps(header).encode()
        hb += b" " * (-len(hb) % 8)
        with open(folder / fname, "wb") as fh:
            fh.write(struct.pack("<Q", len(hb)) + hb)
            base = fh.tell()
            for name, s, is_attn in entries:
                start = base + header[name]["data_offsets"][0]
                if sparse and not is_attn:
                    continue  # a hole: the file is extended past it below
                fh.seek(start)
                t = (0.02 * torch.randn(s, generator=g)).to(torch.bfloat16)  # one tensor at a time
                fh.write(t.view(torch.int16).numpy().tobytes())
            fh.truncate(base + off)
        total += off
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})
    )
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": d,
        "intermediate_size": inter,
        "num_attention_heads": H,
        "num_key_value_heads": Hkv,
        "num_hidden_layers": L,
        "vocab_size": vocab,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "torch_dtype": "bfloat16",
    }
    (folder / "config.json").write_text(json.dumps(cfg))
    return {"bytes": total, "params": total // 2}


_PLAIN_REFERENCE = r"""
import json, sys, torch
from pathlib import Path
from safetensors import safe_open
torch.set_num_threads(1)
folder = Path(sys.argv[1]); cfg = json.loads((folder / "config.json").read_text())
wm = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
H, Hkv, d = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]; k = d // H
for i in range(cfg["num_hidden_layers"]):
    t = {}
    for n in ("q_proj", "k_proj"):
        key = f"model.layers.{i}.self_attn.{n}.weight"
        with safe_open(str(folder / wm[key]), framework="pt") as f:
            t[n] = f.get_tensor(key).double()
    Ra = torch.linalg.qr(t["q_proj"].T.reshape(d, H, k).permute(1, 0, 2))[1]
    Rb = torch.linalg.qr(t["k_proj"].T.reshape(d, Hkv, k).permute(1, 0, 2))[1]
    sv = torch.linalg.svdvals(Ra @ Rb.repeat_interleave(H // Hkv, 0).transpose(-1, -2))
"""


_LAUNCHER = r"""
import json, os, subprocess, sys, time
t = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = proc.stdout.read()
_, status, ru = os.wait4(proc.pid, 0)
sys.stderr.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "wall_s": time.perf_counter() - t,
                             "cpu_s": ru.ru_utime + ru.ru_stime, "rss_mb": ru.ru_maxrss / 1024}))
sys.stdout.buffer.write(out)
"""


def _measure_child(argv: list[str]) -> dict:
    """Whole-process wall seconds, CPU seconds (user + sys) and peak RSS of one run of ``argv``.

    The run is started by a small launcher process (plain Python, ~10 MB): Linux folds the memory of
    the process that forks into the child's ``ru_maxrss``, so forking from this (large) benchmark
    process would report its size instead of the child's.
    """
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _LAUNCHER, *argv], capture_output=True)
    res = json.loads(proc.stderr.decode().strip().splitlines()[-1])
    res["stdout"] = proc.stdout
    return res


def stream_benchmark(shape: str, repeats: int = 3, reference: bool = True) -> dict:
    """Generate ``shape``, run ``attnlab inspect FOLDER --json --no-text`` ``repeats`` times (median),
    and the plain one-layer-at-a-time reference once; report both and the ratio."""
    import json
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    d, H, Hkv, _, L_real, *_ = STREAM_SHAPES[shape]
    L = _layers_written(shape)
    tmp = Path(
        tempfile.mkdtemp(prefix=f"attnlab-bench-{shape}-", dir="/work" if Path("/work").is_dir() else None)
    )
    try:
        free = shutil.disk_usage(tmp).free
        attn_bytes = L * 2 * (2 * d * d + 2 * d * (d // H) * Hkv)
        if free < 3 * attn_bytes:
            return {
                "shape": shape,
                "skipped": f"free disk {free / 1e9:.1f} GB < {3 * attn_bytes / 1e9:.1f} GB needed",
            }
        t = time.perf_counter()
        info = write_llama_checkpoint(tmp, shape)
        gen_s = time.perf_counter() - t
        exe = str(Path(sys.executable).parent / "attnlab")
        runs = [_measure_child([exe, "inspect", str(tmp), "--json", "--no-text"]) for _ in range(repeats)]
        for r in runs:
            if r["rc"] != 0:
                raise RuntimeError(f"inspect failed on {shape}: rc {r['rc']}")
        data = json.loads(runs[0]["stdout"])
        med = {key: float(np.median([r[key] for r in runs])) for key in ("wall_s", "cpu_s", "rss_mb")}
        out = {
            "shape": shape,
            "params_on_disk": info["params"],
            "disk_bytes_allocated": sum(p.stat().st_blocks * 512 for p in tmp.iterdir()),
            "generate_s": gen_s,
            "layers": L,
            "repeats": repeats,
            "inspect": med,
            "inspect_runs": [{k: r[k] for k in ("wall_s", "cpu_s", "rss_mb")} for r in runs],
            "hdi_k_layer0": data["layers"][0]["hdi_k"],
        }
        if reference:
            ref = _measure_child([sys.executable, "-c", _PLAIN_REFERENCE, str(tmp)])
            out["plain_reference"] = {k: ref[k] for k in ("wall_s", "cpu_s", "rss_mb")}
            out["ratio_wall_reference_over_inspect"] = ref["wall_s"] / med["wall_s"]
        if L_real != L:
            out["extrapolated_to_layers"] = L_real
            out["extrapolated_wall_s"] = med["wall_s"] * L_real / L
            out["note"] = (
                f"{L} of {L_real} layers written; resident memory is one layer plus a fixed overhead, so the "
                f"peak RSS stands for the full depth and the time scales with the layer count (extrapolated)"
            )
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("shape", list(STREAM_SHAPES))
def test_bench_streaming(shape: str) -> None:
    res = stream_benchmark(shape, repeats=3)
    print("\n" + ", ".join(f"{k}={v}" for k, v in res.items()))


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) > 1 and sys.argv[1] == "streaming":
        for shape in sys.argv[2:] or list(STREAM_SHAPES):
            reps = int(__import__("os").environ.get("REPEATS", "3"))  # whole-process medians of 3
            print(json.dumps(stream_benchmark(shape, repeats=reps)), flush=True)
