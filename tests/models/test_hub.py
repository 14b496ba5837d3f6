"""Hub ids ``ORG/NAME`` read from the local Hugging Face cache; the network only with ``--download``."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnlab.models import hub, load

transformers = pytest.importorskip("transformers")
from tinymodels import build_family  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _put_in_cache(cache, repo_id: str, model) -> None:
    """The layout huggingface_hub writes: models--ORG--NAME/{refs/main, snapshots/<commit>/...}."""
    root = cache / ("models--" + repo_id.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(COMMIT)
    model.save_pretrained(root / "snapshots" / COMMIT)


@pytest.fixture
def no_network(monkeypatch):
    import huggingface_hub

    def refuse(*args, **kwargs):  # any download attempt fails the test
        raise AssertionError(f"network: snapshot_download called with {args} {kwargs}")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)


@pytest.mark.parametrize("variable", ["HF_HOME", "HF_HUB_CACHE"])
def test_hub_id_is_read_from_the_local_cache(variable, tmp_path, monkeypatch, capsys, no_network) -> None:
    from huggingface_hub import scan_cache_dir

    from attnlab.cli.main import main

    cache = tmp_path / "hf" / "hub" if variable == "HF_HOME" else tmp_path / "elsewhere"
    monkeypatch.setenv(variable, str(tmp_path / "hf" if variable == "HF_HOME" else cache))
    monkeypatch.delenv("HF_HUB_CACHE" if variable == "HF_HOME" else "HF_HOME", raising=False)
    monkeypatch.chdir(tmp_path)  # "tiny-org/llama" is not a local path here
    model = build_family("llama")
    _put_in_cache(cache, "tiny-org/llama", model)
    # huggingface_hub's own reader of the cache finds the same snapshot
    (repo,) = scan_cache_dir(cache).repos
    (rev,) = repo.revisions
    assert repo.repo_id == "tiny-org/llama" and hub.resolve("tiny-org/llama") == rev.snapshot_path
    heads = load("tiny-org/llama", dtype=torch.float64)
    ref = load(rev.snapshot_path, dtype=torch.float64)
    assert heads.name == "tiny-org/llama"
    torch.testing.assert_close(heads.layers[1].W_K, ref.layers[1].W_K, rtol=0, atol=0)
    capsys.readouterr()
    assert main(["inspect", "tiny-org/llama", "--json", "--no-text"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "tiny-org/llama"


def test_absent_hub_id_is_one_line_and_never_downloads(tmp_path, monkeypatch, capsys, no_network) -> None:
    from attnlab.cli.main import main

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["inspect", "Qwen/Qwen2.5-0.5B", "--no-text"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'Qwen/Qwen2.5-0.5B' in the local Hugging Face cache" in err and "--download" in err


def test_download_only_when_asked(tmp_path, monkeypatch, capsys) -> None:
    """--download calls the hub client (here a stand-in that fills the cache) and then reads the cache."""
    import huggingface_hub

    from attnlab.cli.main import main

    cache = tmp_path / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)
    model = build_family("qwen3")
    calls = []

    def fake_download(repo_id, *, cache_dir, allow_patterns, **kw):
        calls.append((repo_id, cache_dir, tuple(allow_patterns), huggingface_hub.constants.HF_HUB_OFFLINE))
        if not (cache / "models--tiny-org--qwen3").exists():
            _put_in_cache(cache, repo_id, model)
        return str(hub.resolve(repo_id))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    assert main(["inspect", "tiny-org/qwen3", "--json", "--no-text"]) == 2  # not cached, not asked
    assert calls == []
    capsys.readouterr()
    assert main(["inspect", "tiny-org/qwen3", "--json", "--no-text", "--download"]) == 0
    assert json.loads(capsys.readouterr().out)["model_type"] == "qwen3"
    assert len(calls) == 1 and calls[0][:2] == ("tiny-org/qwen3", str(cache))
    assert calls[0][3] is False  # the client was allowed online for the call
    assert "*.safetensors" in calls[0][2] and not any(p.endswith(".bin") for p in calls[0][2])
    assert main(["inspect", "tiny-org/qwen3", "--json", "--no-text", "--download"]) == 0
    assert len(calls) == 1  # cached now: no second download
    shutil.rmtree(cache)


def test_download_respects_an_offline_environment(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="--download: expected network access .* HF_HUB_OFFLINE"):
        hub.download("tiny-org/absent")
