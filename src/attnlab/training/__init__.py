"""Training small multi-head transformers and following their heads' geometry along training.

>>> from attnlab import training as tr                                   # doctest: +SKIP
>>> task = tr.TextTask(tr.CharCorpus(tr.shakespeare_text(200_000)), seq_len=32)
>>> mcfg = tr.ModelConfig(n_layers=2, n_heads=4, d_model=32, seq_len=32, vocab_size=task.vocab_size)
>>> run = tr.train(task, mcfg, tr.TrainConfig(steps=200), seed=0)
>>> rows = tr.trajectory(run.records)      # HDI of Q/K/V/OV in three forms per record and layer
"""

from __future__ import annotations

from attnlab.training.data import CharCorpus, CopyTask, NWTask, TextTask, corpus_files, shakespeare_text
from attnlab.training.geometry import FORMS, SUBSPACES, layer_geometry, trajectory
from attnlab.training.model import POSITIONS, ModelConfig, Transformer, export_checkpoint, head_weights
from attnlab.training.setup import make_task, shakespeare_corpus
from attnlab.training.trainer import (
    Record,
    TrainConfig,
    TrainResult,
    learning_rate,
    record_steps,
    task_loss,
    train,
)

__all__ = [
    "FORMS",
    "POSITIONS",
    "SUBSPACES",
    "CharCorpus",
    "CopyTask",
    "ModelConfig",
    "NWTask",
    "Record",
    "TextTask",
    "TrainConfig",
    "TrainResult",
    "Transformer",
    "corpus_files",
    "export_checkpoint",
    "head_weights",
    "layer_geometry",
    "learning_rate",
    "make_task",
    "record_steps",
    "shakespeare_corpus",
    "shakespeare_text",
    "task_loss",
    "train",
    "trajectory",
]
