"""One call from a task's name and a model's shape to a task and a matching model configuration."""

from __future__ import annotations

import functools
from typing import Literal

from attnlab.ensemble.data import RegressionTask
from attnlab.training.data import CharCorpus, NWTask, TextTask, shakespeare_text
from attnlab.training.model import ModelConfig

__all__ = ["shakespeare_corpus", "make_task"]


@functools.lru_cache(maxsize=2)
def shakespeare_corpus() -> CharCorpus:
    """The bundled Shakespeare text as a character corpus (read once per process)."""
    return CharCorpus(shakespeare_text())


def make_task(
    task: Literal["text", "nw"],
    *,
    n_layers: int,
    n_heads: int,
    d_model: int,
    seq_len: int,
    positions: str = "learned",
    nw_dim: int = 4,
    nw_target: str = "sine",
    nw_noise: float = 0.1,
) -> tuple[TextTask | NWTask, ModelConfig]:
    """``(task, model config)``: Shakespeare characters (``"text"``) or paper A's NW regression in context.

    For ``"nw"`` the sequence holds ``seq_len − 1`` context pairs and one query.
    """
    shape = dict(n_layers=n_layers, n_heads=n_heads, d_model=d_model, positions=positions)
    if task == "text":
        t = TextTask(shakespeare_corpus(), seq_len=seq_len)
        return t, ModelConfig(**shape, seq_len=seq_len, vocab_size=t.vocab_size)
    if task == "nw":
        nw = NWTask(RegressionTask(d=nw_dim, target=nw_target, noise=nw_noise), n_context=seq_len - 1)
        return nw, ModelConfig(**shape, seq_len=seq_len, d_in=nw.d_in, d_out=1)
    raise ValueError(f"task: expected 'text' or 'nw', got {task!r}")
