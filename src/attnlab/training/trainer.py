"""Training a :class:`~attnlab.training.model.Transformer` with AdamW and a cosine schedule, recording
its heads at log-spaced steps.

Determinism and resuming: the initial weights come from a generator seeded with
``derive_seed(seed, "init")``, the batch of step ``t`` from one seeded with
``derive_seed(seed, "batch", t)`` and the validation batches from ``derive_seed(seed, "val")``; the
learning rate is a function of the step. No state outside the model and the optimiser carries from
one step to the next, so a run resumed from :attr:`TrainResult.checkpoint` (model, optimiser, step,
records) follows the uninterrupted trajectory bit for bit on the same device.

Schedule: linear warm-up over ``warmup`` steps to ``lr``, then a cosine decay to
``min_lr_ratio · lr`` at the last step. Weight decay acts on matrices only (not on LayerNorms and
biases). The optional orthogonality penalty adds ``λ · mean_{l, W ∈ {Q, K, V}} overlap(W_l)``, the
mean pairwise weight-form overlap ``‖W_hᵀW_h'‖_F² / (‖W_hᵀW_h‖_F ‖W_h'ᵀW_h'‖_F)`` of each layer's
heads (:func:`attnlab.ensemble.training.weight_overlap_penalty`), which pushes them apart (the
positive control of the training-diversity experiment); ``λ < 0`` pulls them together (the negative one).

A :class:`Record` holds, at one step, the validation loss, the attention weights exported in a
supported checkpoint layout (so :meth:`Record.heads` goes through :mod:`attnlab.models`' converter),
the covariance of the hidden states entering each attention layer and the attention entropy per
head, both on a fixed probe batch of validation data.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from attnlab.core.heads import HeadWeights
from attnlab.core.metric import covariance
from attnlab.core.seeding import derive_seed, generator
from attnlab.core.validation import check_int, check_real
from attnlab.diagnose.entropy import attention_entropy
from attnlab.ensemble.training import weight_overlap_penalty
from attnlab.training.model import ModelConfig, Transformer, export_checkpoint, head_weights

__all__ = ["Record", "TrainConfig", "TrainResult", "learning_rate", "record_steps", "task_loss", "train"]

Progress = Callable[[int, int, float], None]


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation and recording settings."""

    steps: int = 300  # optimiser steps
    batch_size: int = 32  # sequences per step
    lr: float = 3e-3  # peak learning rate
    min_lr_ratio: float = 0.1  # final learning rate / peak
    warmup: int = 20  # linear warm-up steps
    weight_decay: float = 0.1  # AdamW decoupled decay on matrices (0: off)
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # global gradient-norm clip (0: off)
    ortho_penalty: float = 0.0  # λ of the heads' orthogonality penalty (0: off; < 0 pulls heads together)
    records: int = 8  # log-spaced recording steps after step 0
    val_batches: int = 4  # validation batches (fixed per seed)
    probe_batch: int = 16  # sequences of the probe batch (covariance, attention entropy)

    def __post_init__(self) -> None:
        check_int("steps", self.steps, min=1)
        check_int("batch_size", self.batch_size, min=1)
        check_real("lr", self.lr, min=0.0, min_open=True)
        check_real("min_lr_ratio", self.min_lr_ratio, min=0.0, max=1.0)
        check_int("warmup", self.warmup, min=0)
        check_real("weight_decay", self.weight_decay, min=0.0)
        check_real("beta1", self.beta1, min=0.0, max=1.0, max_open=True)
        check_real("beta2", self.beta2, min=0.0, max=1.0, max_open=True)
        check_real("grad_clip", self.grad_clip, min=0.0)
        check_real("ortho_penalty", self.ortho_penalty)
        check_int("records", self.records, min=1)
        check_int("val_batches", self.val_batches, min=1)
        check_int("probe_batch", self.probe_batch, min=1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def learning_rate(step: int, cfg: TrainConfig) -> float:
    """Learning rate of optimiser step ``step`` (0-based): warm-up, then cosine to ``min_lr_ratio·lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = max(1, cfg.steps - 1 - cfg.warmup)
    frac = min(1.0, (step - cfg.warmup) / span)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac)))


def record_steps(steps: int, records: int) -> tuple[int, ...]:
    """Step 0 and ``records`` log-spaced steps in ``[1, steps]`` ending at ``steps`` (duplicates dropped)."""
    check_int("steps", steps, min=1)
    check_int("records", records, min=1)
    pts = np.round(np.geomspace(1, steps, records)).astype(int) if records > 1 else np.array([steps])
    return (0, *(int(p) for p in np.unique(pts)))


@dataclass(frozen=True)
class Record:
    """The model at one step (see the module docstring)."""

    step: int
    val_loss: float
    train_loss: float  # mean training loss over the steps since the previous record (nan at step 0)
    state: Mapping[str, torch.Tensor]  # attention weights in a supported checkpoint layout
    config: Mapping[str, Any]  # that layout's config
    sigma: torch.Tensor  # (L, d, d) covariance of the attention inputs on the probe batch
    entropy: torch.Tensor  # (L, H) mean attention entropy (nats) on the probe batch
    entropy_ratio: torch.Tensor  # (L, H) entropy / log(number of visible keys)

    def heads(self, dtype: torch.dtype = torch.float64) -> HeadWeights:
        """The heads through :func:`attnlab.models.from_state_dict` (the real-model converter)."""
        return head_weights((dict(self.state), dict(self.config)), dtype=dtype, name=f"step {self.step}")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "state": dict(self.state), "config": dict(self.config)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Record:
        return cls(**data)


@dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns."""

    records: tuple[Record, ...]
    model: Transformer
    checkpoint: dict[str, Any]  # resume with train(..., checkpoint=...)
    step: int  # optimiser steps taken
    baseline: float  # the task's baseline loss (unigram entropy, Var y, log vocab)
    train_losses: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (steps,) per step, this call

    @property
    def final_val_loss(self) -> float:
        return self.records[-1].val_loss if self.records else math.nan


def task_loss(task: Any, out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over positions (``task.kind == "lm"``) or squared error at the last position."""
    if task.kind == "lm":
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return F.mse_loss(out[:, -1, 0], target)


def _check_fits(task: Any, cfg: ModelConfig) -> None:
    if task.kind == "lm" and (cfg.vocab_size != task.vocab_size or cfg.d_in):
        raise ValueError(
            f"model_cfg: expected vocab_size = {task.vocab_size} for this task, got {cfg.vocab_size}"
        )
    if task.kind == "regression" and (cfg.d_in != task.d_in or cfg.d_out != 1):
        raise ValueError(
            f"model_cfg: expected d_in = {task.d_in} and d_out = 1 for this task, got {cfg.d_in}, {cfg.d_out}"
        )
    if cfg.seq_len < task.seq_len:
        raise ValueError(f"model_cfg.seq_len: expected >= the task's {task.seq_len}, got {cfg.seq_len}")


def _optimizer(model: Transformer, cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), foreach=True)


def _penalty(model: Transformer) -> torch.Tensor:
    terms = [weight_overlap_penalty(w) for stacks in model.head_stacks() for w in stacks]
    return torch.stack(terms).mean()


@torch.no_grad()
def _record(model, task, val, probe, step: int, train_loss: float) -> Record:
    model.eval()
    losses = [float(task_loss(task, model(x), y)) for x, y in val]
    _, inputs, attns = model(probe, capture=True)
    model.train()
    sigma = torch.stack([covariance(a.reshape(-1, a.shape[-1])) for a in inputs]).cpu()  # (L, d, d)
    ent = [attention_entropy(p) for p in attns]  # each entropy (B, H)
    state, config = export_checkpoint(model)
    return Record(
        step=step,
        val_loss=float(np.mean(losses)),
        train_loss=train_loss,
        state=state,
        config=config,
        sigma=sigma,
        entropy=torch.stack([e.entropy.mean(0) for e in ent]).cpu(),  # (L, H)
        entropy_ratio=torch.stack([e.ratio.mean(0) for e in ent]).cpu(),  # (L, H)
    )


def train(
    task: Any,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
    progress: Progress | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    until: int | None = None,
) -> TrainResult:
    """Train a fresh model (or resume ``checkpoint``) on ``task`` and record it along the way.

    Parameters
    ----------
    task : TextTask, CopyTask or NWTask
        anything with ``kind``, ``seq_len``, ``sample(batch, generator, split)`` and ``baseline()``.
    model_cfg : ModelConfig
        must fit the task (vocabulary or input size, context length).
    cfg : TrainConfig
    seed : int
        root of every random draw of the run.
    device : str or torch.device
    progress : callable ``(step, total, loss)``, optional
        called after every optimiser step (no printing here).
    checkpoint : dict, optional
        :attr:`TrainResult.checkpoint` of an earlier call with the same task, configs and seed.
    until : int, optional
        stop after this many steps in total (``<= cfg.steps``); resume later from the checkpoint.

    Returns
    -------
    TrainResult
    """
    if not isinstance(model_cfg, ModelConfig):
        raise ValueError(f"model_cfg: expected a ModelConfig, got {type(model_cfg).__name__}")
    if not isinstance(cfg, TrainConfig):
        raise ValueError(f"cfg: expected a TrainConfig, got {type(cfg).__name__}")
    seed = check_int("seed", seed, min=0)
    _check_fits(task, model_cfg)
    stop = cfg.steps if until is None else check_int("until", until, min=0, max=cfg.steps)
    dev = torch.device(device)
    model = Transformer(model_cfg, generator(derive_seed(seed, "init"))).to(dev)
    opt = _optimizer(model, cfg)
    records: list[Record] = []
    start = 0
    if checkpoint is not None:
        if (
            checkpoint.get("model_config") != model_cfg.to_dict()
            or checkpoint.get("train_config") != cfg.to_dict()
            or checkpoint.get("seed") != seed
        ):
            raise ValueError(
                "checkpoint: expected one from a run with the same configs and seed, got another"
            )
        model.load_state_dict(checkpoint["model"])
        opt.load_state_dict(copy.deepcopy(checkpoint["optimizer"]))
        start = int(checkpoint["step"])
        records = [Record.from_dict(r) for r in checkpoint["records"]]
        since_ckpt = list(checkpoint.get("since", []))
        if stop < start:
            raise ValueError(f"until: expected at least the checkpoint's step {start}, got {stop}")
    vg = generator(derive_seed(seed, "val"))
    val = [tuple(t.to(dev) for t in task.sample(cfg.batch_size, vg, "val")) for _ in range(cfg.val_batches)]
    probe = task.sample(cfg.probe_batch, vg, "val")[0].to(dev)
    rec_at = set(record_steps(cfg.steps, cfg.records))
    if start == 0 and not records:
        records.append(_record(model, task, val, probe, 0, math.nan))
    model.train()
    losses: list[float] = []
    since: list[float] = since_ckpt if checkpoint is not None else []
    for step in range(start, stop):
        x, y = task.sample(cfg.batch_size, generator(derive_seed(seed, "batch", step)), "train")
        x, y = x.to(dev), y.to(dev)
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, cfg)
        loss = task_loss(task, model(x), y)
        total = loss + cfg.ortho_penalty * _penalty(model) if cfg.ortho_penalty != 0 else loss
        opt.zero_grad(set_to_none=True)
        total.backward()
        if cfg.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        lv = float(loss.detach())
        losses.append(lv)
        since.append(lv)
        if step + 1 in rec_at:
            records.append(_record(model, task, val, probe, step + 1, float(np.mean(since))))
            since = []
        if progress is not None:
            progress(step + 1, cfg.steps, lv)
    ckpt = {
        "model_config": model_cfg.to_dict(),
        "train_config": cfg.to_dict(),
        "seed": seed,
        "step": stop,
        "model": {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()},
        "optimizer": copy.deepcopy(opt.state_dict()),
        "records": [r.to_dict() for r in records],
        "since": list(since),  # training losses since the last record (its train_loss on resume)
    }
    return TrainResult(
        records=tuple(records),
        model=model,
        checkpoint=ckpt,
        step=stop,
        baseline=float(task.baseline()),
        train_losses=np.asarray(losses, dtype=np.float64),
    )
