"""Hugging Face hub ids (``ORG/NAME``) resolved from the local cache, and the opt-in download.

The cache is where ``huggingface_hub`` keeps models: ``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else
``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``; a model lives in
``models--ORG--NAME/`` with ``refs/main`` naming the commit whose files are in ``snapshots/<commit>/``.
Resolving reads that layout and never touches the network; :func:`download` is the only function here
that does, and only ``attnlab inspect --download`` calls it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["cache_dir", "download", "is_hub_id", "resolve"]

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: files fetched by :func:`download`: the config, the weights and the tokenizer, nothing else
DOWNLOAD_PATTERNS = (
    "*.json",
    "*.safetensors",
    "tokenizer.model",
    "spiece.model",
    "sentencepiece.bpe.model",
    "vocab.txt",
    "merges.txt",
)


def is_hub_id(source: object) -> bool:
    """Whether ``source`` reads as ``ORG/NAME`` and is not an existing local path."""
    return isinstance(source, str) and bool(_HUB_ID.match(source)) and not Path(source).exists()


def cache_dir() -> Path:
    """The Hugging Face hub cache folder of this environment (read at call time)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "huggingface" / "hub"


def _snapshot(repo_id: str, cache: Path) -> Path | None:
    root = cache / ("models--" + repo_id.replace("/", "--"))
    ref = root / "refs" / "main"
    if ref.is_file():
        snap = root / "snapshots" / ref.read_text().strip()
        return snap if (snap / "config.json").is_file() else None
    snaps = [s for s in (root / "snapshots").glob("*") if (s / "config.json").is_file()]
    return max(snaps, key=lambda s: s.stat().st_mtime) if snaps else None


def resolve(repo_id: str) -> Path:
    """The local snapshot folder of ``repo_id``; one clear error when it is not in the cache."""
    cache = cache_dir()
    snap = _snapshot(repo_id, cache)
    if snap is None:
        raise ValueError(
            f"model: expected {repo_id!r} in the local Hugging Face cache ({cache}) or a local path, got "
            "neither (not downloaded; attnlab never downloads unless asked: attnlab inspect --download)"
        )
    return snap


def download(repo_id: str) -> Path:
    """Fetch the config, weights and tokenizer of ``repo_id`` into the cache (network; opt-in only)."""
    if not _HUB_ID.match(repo_id):
        raise ValueError(f"--download: expected a hub id ORG/NAME, got {repo_id!r}")
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ValueError(
            "--download: expected network access to the Hugging Face Hub, got HF_HUB_OFFLINE set in the "
            "environment"
        )
    import huggingface_hub
    from huggingface_hub import constants

    saved = constants.HF_HUB_OFFLINE  # fixed when the package was first imported (attnlab imports it offline)
    constants.HF_HUB_OFFLINE = False
    try:
        path = huggingface_hub.snapshot_download(
            repo_id, cache_dir=str(cache_dir()), allow_patterns=list(DOWNLOAD_PATTERNS)
        )
        if not any(Path(path).glob("*.safetensors")):  # older repositories: torch files only
            path = huggingface_hub.snapshot_download(
                repo_id, cache_dir=str(cache_dir()), allow_patterns=["pytorch_model*.bin"]
            )
    except Exception as exc:  # network, authorisation and missing-repository errors alike
        raise ValueError(
            f"--download: expected {repo_id!r} to download from the Hugging Face Hub, got "
            f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        ) from None
    finally:
        constants.HF_HUB_OFFLINE = saved
    return Path(path)
