"""``attnlab inspect``: JSON against independent numbers, CSV, figures, one-line errors with status 2."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from attnlab.cli.main import main


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_matches_independent_numbers(capsys) -> None:
    from safetensors.numpy import load_file

    from attnlab.models import bundled_model_path

    rc, out, _ = _run(capsys, "inspect", "--json", "--no-text")
    assert rc == 0
    data = json.loads(out)  # exactly one strict-JSON object
    assert (data["model"], data["n_layers"], data["n_heads"], data["d_model"], data["d_head"]) == (
        "all-MiniLM-L6-v2",
        6,
        12,
        384,
        32,
    )
    for key in ("layer", "hdi_k", "hdi_q", "hdi_v", "hdi_null", "hdi_k_z", "mean_angle_k_deg", "qk_rank90"):
        assert all(key in row for row in data["layers"])
    sd = load_file(str(bundled_model_path() / "model.safetensors"))
    layer = 2
    Wq = sd[f"encoder.layer.{layer}.attention.self.query.weight"].astype(np.float64)  # (H*k, d)
    Wk = sd[f"encoder.layer.{layer}.attention.self.key.weight"].astype(np.float64)
    Us = [np.linalg.svd(Wq[h * 32 : (h + 1) * 32].T, full_matrices=False)[0] for h in range(12)]
    s = [np.linalg.norm(Us[a].T @ Us[b]) ** 2 / 32 for a in range(12) for b in range(a + 1, 12)]
    # float64 on the same float32 weights: agreement to ~1e-13
    assert abs(data["layers"][layer]["hdi_q"] - (1 - np.mean(s))) < 1e-9
    ranks = []
    for h in range(12):  # rank holding 90% of the energy of W_Q W_Kᵀ/√32, dense SVD per head
        M = Wq[h * 32 : (h + 1) * 32].T @ Wk[h * 32 : (h + 1) * 32] / np.sqrt(32)  # (d, d)
        e = np.linalg.svd(M, compute_uv=False) ** 2
        ranks.append(int(np.searchsorted(np.cumsum(e) / e.sum(), 0.9) + 1))
    assert abs(data["layers"][layer]["qk_rank90"] - np.mean(ranks)) < 1e-12


@pytest.mark.slow
def test_text_csv_figures(capsys, tmp_path) -> None:
    out_csv = tmp_path / "heads.csv"
    figs = tmp_path / "figs"
    rc, out, _ = _run(capsys, "inspect", "minilm", "--json", "--csv", str(out_csv), "--figures", str(figs))
    assert rc == 0
    data = json.loads(out)
    assert data["token_level"] is True
    assert all(0.0 <= r["entropy_ratio"] <= 1.0 for r in data["layers"])
    for r in data["layers"]:  # the data-metric key HDI with its own null (values: tests/diagnose)
        assert r["hdi_k_data_z"] == pytest.approx(
            (r["hdi_k_data"] - r["hdi_k_data_null"]) / r["hdi_k_data_null_sd"]
        )
    with out_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 72 and {"layer", "head", "overlap_k", "qk_rank90", "radial_form3"} <= set(rows[0])
    names = {p.name for p in figs.iterdir()}
    assert {"overlap_k.png", "angles_k.svg", "qk_spectra.png", "hdi_layers.png"} <= names


def test_table_output(capsys) -> None:
    rc, out, _ = _run(capsys, "inspect", "--no-text")
    assert rc == 0 and "HDI K" in out and "all-MiniLM-L6-v2" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["inspect", "/nonexistent/folder"], "path: expected an existing checkpoint"),
        (["inspect", "--dtype", "float16", "--no-text"], "--dtype: expected float32 or float64"),
    ],
)
def test_bad_input_one_line_status_2(capsys, argv, message) -> None:
    rc, out, err = _run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err


def test_unknown_architecture(capsys, tmp_path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet"}))
    rc, _, err = _run(capsys, "inspect", str(tmp_path))
    assert rc == 2 and err.count("\n") == 1 and "got 'xlnet'" in err


@pytest.fixture(scope="module")
def mqa_folder(tmp_path_factory):
    """A tiny Llama with ONE K/V head (multi-query), saved as transformers does, without a tokenizer."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        intermediate_size=48,
        vocab_size=40,
    )
    folder = tmp_path_factory.mktemp("mqa")
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


def test_one_kv_head_does_not_crash(capsys, mqa_folder) -> None:
    rc, out, err = _run(capsys, "inspect", str(mqa_folder))
    assert rc == 0 and "HDI K" in out and "internal error" not in err
    assert "at least 2 heads" in err
    # no tokenizer in the folder: said once, nothing computed on made-up ids, no transformers report
    assert "no tokenizer" in err and err.count("note:") == 3 and len(err) < 600
    rc, out, _ = _run(capsys, "inspect", str(mqa_folder), "--json")
    data = json.loads(out)
    assert rc == 0 and data["token_level"] is False and data["n_kv_heads"] == 1
    assert data["layers"][0]["hdi_k"] is None and data["layers"][0]["hdi_q"] is not None


def test_compare_models(capsys, mqa_folder, tmp_path) -> None:
    rc, out, _ = _run(
        capsys, "inspect", "minilm", str(mqa_folder), "--no-text", "--json", "--figures", str(tmp_path)
    )
    assert rc == 0
    data = json.loads(out)
    assert [m["model"] for m in data["models"]] == ["all-MiniLM-L6-v2", mqa_folder.name]
    assert [m["n_layers"] for m in data["models"]] == [6, 2]
    assert (tmp_path / "compare.png").is_file()
    rc, out, _ = _run(capsys, "inspect", "minilm", str(mqa_folder), "--no-text")
    assert rc == 0 and out.count("all-MiniLM-L6-v2") == 6 and "per-layer comparison" in out


def test_list_architectures(capsys) -> None:
    rc, out, _ = _run(capsys, "inspect", "--list-architectures", "--json")
    data = json.loads(out)
    assert rc == 0 and {"bert", "llama", "qwen3", "gemma2"} <= set(data["supported"])
    assert "deberta-v2" in data["refused"] and data["refused"]["deberta-v2"]


def _no_load(monkeypatch) -> None:
    """Loading a model now would mean the output paths were not checked first."""
    import attnlab.models

    def fail(*a, **k):
        raise AssertionError("the model was loaded before the output paths were checked")

    monkeypatch.setattr(attnlab.models, "load", fail)


def _a_file(path):
    path.write_text("")
    return path


@pytest.mark.parametrize(
    "option, make, message",
    [
        ("--csv", lambda t: t, "--csv: expected a file, not a folder"),
        ("--csv", lambda t: t / "missing" / "x.csv", "--csv: expected a file in an existing folder"),
        ("--csv", lambda t: "/proc/x.csv", "--csv: expected a writable file"),
        ("--figures", lambda t: _a_file(t / "f.png"), "--figures: expected a folder"),
        ("--figures", lambda t: "/proc/figs", "--figures: expected a writable folder"),
    ],
)
def test_output_paths_checked_before_loading(capsys, monkeypatch, tmp_path, option, make, message) -> None:
    _no_load(monkeypatch)
    rc, out, err = _run(capsys, "inspect", "minilm", "--no-text", option, str(make(tmp_path)))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "missing").exists()


def test_compare_csv_has_a_model_column(capsys, mqa_folder, tmp_path) -> None:
    out_csv = tmp_path / "both.csv"
    rc, out, _ = _run(
        capsys, "inspect", "minilm", str(mqa_folder), "--no-text", "--json", "--csv", str(out_csv)
    )
    assert rc == 0 and json.loads(out)["csv"] == str(out_csv)
    with out_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    # 6 layers × 12 heads of MiniLM, then 2 layers × 4 heads of the tiny Llama, in one table
    assert [r["model"] for r in rows] == ["all-MiniLM-L6-v2"] * 72 + [mqa_folder.name] * 8
    assert rows[72]["layer"] == "0" and rows[-1]["head"] == "3" and rows[-1]["overlap_k"] == ""


def test_large_model_allocator_trims_after_each_layer(monkeypatch, mqa_folder) -> None:
    """The allocator's per-layer hook (malloc_trim for models whose float64 stack exceeds 64 MB) runs once
    after every layer and the caller's progress still sees every layer; small models get no hook."""
    from attnlab.cli import inspect as insp

    if insp._allocator_for(1 << 20) is not None:  # small: heap settings only (also restores them below)
        pytest.fail("a model with a 1 MB stack got a per-layer hook")
    calls: list[str] = []
    monkeypatch.setattr(insp, "_allocator_for", lambda stack_bytes: lambda: calls.append("trim"))
    seen: list[tuple[int, int]] = []
    diag = insp.run_inspect(str(mqa_folder), text=False, progress=lambda i, n: seen.append((i, n)))
    assert calls == ["trim", "trim"] and seen == [(1, 2), (2, 2)] and len(diag.layers) == 2
