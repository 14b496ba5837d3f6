"""Empirical risk minimisation by full-batch Adam (docs/highdim.md C2).

Factorised student ``S = WᵀW/√(pd)`` with the penalty ``λ‖W‖_F²`` written into the loss (``λ = λ̃/√κ``:
the API takes λ̃, see :func:`attnlab.highdim.lam_from_lam_tilde`), and the unfactorised baseline: a
symmetric ``S`` with the Frobenius penalty ``d λ_F ‖S‖_F²``.

Outputs follow docs/highdim.md C2: ``train_loss`` = (data loss + penalty)/d²; ``test_error`` = per-sample
squared error summed over the T² entries against noisy labels (seq2seq: ``‖y − ŷ‖²/d``),
``test_error_clean`` the same against noiseless labels.

Devices: training runs on the device of the training data (or ``device``); the initialisation is drawn on
the generator's device and moved there, so a CPU generator gives the same start on every device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from attnlab.core.seeding import draw_device
from attnlab.core.validation import check_choice, check_int, check_real, check_tensor
from attnlab.highdim.data import TASKS, Dataset, attention, sample
from attnlab.highdim.setting import lam_from_lam_tilde

__all__ = ["TrainConfig", "TrainResult", "train_erm", "evaluate", "predict", "simulate"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser settings. ``rtol``: stop when the relative change of the float64 loss stays below it for
    ``patience`` consecutive steps (after ``min_steps``); ``max_steps`` caps the run.

    ``optimizer``: ``"adam"`` (full-batch Adam at ``lr``, the published protocol) or ``"lbfgs"``
    (limited-memory BFGS with a strong-Wolfe line search, history ``history``; ``lr``, ``patience`` and
    ``min_steps`` are not used; it stops when the loss changes by less than ``rtol`` times the initial loss
    in one iteration; a step is one iteration, which may evaluate the loss more than once:
    ``TrainResult.evaluations`` counts them; no progress callbacks).
    ``dtype``: precision of the data, ``S`` and the logits (``"float32"`` halves the cost of the two large
    matrix products per evaluation); the losses are summed in float64 and the parameters kept in float64
    whatever ``dtype``.
    """

    lr: float = 0.1  # published: 0.1
    rtol: float = 1e-7
    patience: int = 10
    min_steps: int = 100
    max_steps: int = 3000
    rank_tol: float = 1e-3  # eigenvalues of S above this count towards the rank
    optimizer: str = "adam"
    dtype: str = "float64"
    history: int = 20  # L-BFGS memory

    def __post_init__(self) -> None:
        check_real("lr", self.lr, min=0.0, min_open=True)
        check_real("rtol", self.rtol, min=0.0)
        check_int("patience", self.patience, min=1)
        check_int("min_steps", self.min_steps, min=0)
        check_int("max_steps", self.max_steps, min=1)
        check_real("rank_tol", self.rank_tol, min=0.0)
        check_choice("optimizer", self.optimizer, ("adam", "lbfgs"))
        check_choice("dtype", self.dtype, ("float64", "float32"))
        check_int("history", self.history, min=1)

    @classmethod
    def fast(cls, **kw) -> TrainConfig:
        """L-BFGS in float32 with float64 sums, stopping when the loss changes by less than 1e-9 of the
        initial loss in one iteration: on the published setting it reaches a lower training loss than the
        published Adam protocol in about a third of the loss evaluations (bench/bench_highdim.py)."""
        base = dict(optimizer="lbfgs", dtype="float32", rtol=1e-9)
        return cls(**(base | kw))


@dataclass(frozen=True)
class TrainResult:
    """A trained student and its errors (conventions in the module docstring; ``data_loss`` is the
    training loss without the penalty, per d²). ``S`` stays on the training device; ``eigenvalues``
    (ascending) are a CPU array."""

    S: torch.Tensor = field(repr=False)
    train_loss: float
    data_loss: float
    test_error: float
    test_error_clean: float
    steps: int
    converged: bool
    rank: int
    eigenvalues: np.ndarray = field(repr=False)
    #: loss-and-gradient evaluations (= steps for Adam; L-BFGS line searches may take several per step)
    evaluations: int = 0

    def to_dict(self) -> dict:
        return {
            "train_loss": self.train_loss,
            "data_loss": self.data_loss,
            "test_error": self.test_error,
            "test_error_clean": self.test_error_clean,
            "steps": self.steps,
            "evaluations": self.evaluations,
            "converged": self.converged,
            "rank": self.rank,
        }


def predict(X: torch.Tensor, S: torch.Tensor, beta: float, task: str) -> torch.Tensor:
    """Student output: ``rowsoftmax(β Z(S))`` (seq2lab) or that times ``X`` (seq2seq)."""
    A = attention(X, S, beta)
    return A @ X if task == "seq2seq" else A


def _sq_err(y: torch.Tensor, yh: torch.Tensor, task: str) -> torch.Tensor:
    e = ((y - yh) ** 2).sum((-1, -2))  # (n,)
    return e / y.shape[-1] if task == "seq2seq" else e


def evaluate(S: torch.Tensor, data: Dataset, beta: float = 1.0) -> tuple[float, float]:
    """``(test_error, test_error_clean)``: mean per-sample error against noisy and clean labels.

    Computed on ``S``'s device (the samples are moved there).
    """
    X, y, yc = (t.to(S.device) for t in (data.X, data.y, data.y_clean))
    yh = predict(X, S, beta, data.task)
    return (
        float(_sq_err(y, yh, data.task).mean()),
        float(_sq_err(yc, yh, data.task).mean()),
    )


def train_erm(
    train: Dataset,
    test: Dataset | None = None,
    *,
    lam: float,
    kappa: float = 1.0,
    beta: float = 1.0,
    factorised: bool = True,
    config: TrainConfig | None = None,
    generator: torch.Generator | None = None,
    progress: Callable[[int, float], None] | None = None,
    device: torch.device | str | None = None,
) -> TrainResult:
    """Train the tied single-head student by full-batch Adam.

    Parameters
    ----------
    train, test : Dataset
        Training and test samples (``test`` None: errors are NaN).
    lam : float
        ``λ̃`` (factorised: nuclear-norm coefficient, weight decay ``λ = λ̃/√κ``); unfactorised: ``λ_F`` of the
        Frobenius penalty ``d λ_F ‖S‖_F²``.
    kappa : float
        Student width ``p/d`` (factorised only).
    beta : float
        Student inverse temperature.
    factorised : bool
        True: ``S = WᵀW/√(pd)``, ``W ~ N(0, 1)``; False: symmetric ``S = (B + Bᵀ)/(2√d)``, ``B = 0`` at start.
    config : TrainConfig
    generator : torch.Generator
        Initialisation randomness (drawn on its device, then moved to the training device).
    progress : callable(step, loss), optional
        Called every 10 steps (e.g. to drive a progress bar).
    device : torch.device or str, optional
        Where Adam and the eigen-decomposition run (None: the device of ``train.X``); the samples are
        moved there.
    """
    cfg = config or TrainConfig()
    lam = check_real("lam", lam, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    beta = check_real("beta", beta, min=0.0, min_open=True)
    task = check_choice("task", train.task, TASKS)
    X = check_tensor("train.X", train.X, ndim=3)
    dev = X.device if device is None else torch.device(device)
    wdt = torch.float32 if cfg.dtype == "float32" else torch.float64
    X = X.to(dev, wdt)
    n, T, d = X.shape
    y = train.y.to(dev, wdt)
    p = max(1, round(kappa * d))
    if factorised:
        wd = lam_from_lam_tilde(lam, kappa)
        where = draw_device(generator, torch.device("cpu"))
        param = torch.randn(p, d, generator=generator, dtype=torch.float64, device=where)
        param = param.to(dev).requires_grad_(True)

        def make_S(P: torch.Tensor) -> torch.Tensor:
            return P.T @ P / math.sqrt(p * d)

        def penalty(P: torch.Tensor) -> torch.Tensor:
            return wd * (P**2).sum()
    else:
        param = torch.zeros(d, d, dtype=torch.float64, device=dev, requires_grad=True)

        def make_S(P: torch.Tensor) -> torch.Tensor:
            return (P + P.T) / (2 * math.sqrt(d))

        def penalty(P: torch.Tensor) -> torch.Tensor:
            return d * lam * (make_S(P) ** 2).sum()

    eye = torch.eye(T, dtype=wdt, device=dev)

    def data_loss_of(P: torch.Tensor) -> torch.Tensor:
        S = make_S(P).to(wdt)
        Z = (X @ S @ X.transpose(-1, -2) - torch.trace(S) * eye) / math.sqrt(d)  # (n, T, T)
        A = torch.softmax(beta * Z, dim=-1)
        yh = A @ X if task == "seq2seq" else A
        return _sq_err(y, yh, task).sum(dtype=torch.float64)  # float64 sum of n terms

    evals = 0

    threads = torch.get_num_threads()

    def closure() -> torch.Tensor:
        nonlocal evals
        evals += 1
        if cfg.optimizer == "lbfgs":
            torch.set_num_threads(threads)
        opt.zero_grad()
        loss = data_loss_of(param) + penalty(param)
        loss.backward()
        if cfg.optimizer == "lbfgs":
            torch.set_num_threads(1)
        return loss.detach()

    prev, calm, steps, converged = math.inf, 0, 0, False
    loss_val = math.inf
    if cfg.optimizer == "lbfgs":
        # one call runs all iterations (a call per iteration would evaluate the loss once more each time);
        # the stopping rule is torch's: a change of the loss between iterations below the tolerance,
        # here rtol times the initial loss (an upper bound of the final one, so at least as strict)
        with torch.no_grad():
            first = float(data_loss_of(param) + penalty(param))
        opt = torch.optim.LBFGS(
            [param],
            lr=1.0,
            max_iter=cfg.max_steps,
            max_eval=cfg.max_steps * 5 // 4,
            history_size=cfg.history,
            tolerance_grad=0.0,
            tolerance_change=cfg.rtol * abs(first),
            line_search_fn="strong_wolfe",
        )
        # the optimiser's own work is dot products and axpys on p·d values: on one thread (thread start-up
        # and contention cost more than they save there); the loss evaluations use every thread
        torch.set_num_threads(1)
        try:
            opt.step(closure)
        finally:
            torch.set_num_threads(threads)
        steps = int(opt.state[param]["n_iter"])
        with torch.no_grad():
            loss_val = float(data_loss_of(param) + penalty(param))
        converged = math.isfinite(loss_val) and steps < cfg.max_steps
    else:
        opt = torch.optim.Adam([param], lr=cfg.lr)
    for steps in range(1, cfg.max_steps + 1) if cfg.optimizer == "adam" else ():
        loss_val = float(closure())
        if not math.isfinite(loss_val):
            break
        opt.step()
        rel = abs(prev - loss_val) / max(abs(loss_val), 1e-300)
        calm = calm + 1 if rel < cfg.rtol else 0
        prev = loss_val
        if progress is not None and steps % 10 == 0:
            progress(steps, loss_val / d**2)
        if steps >= cfg.min_steps and calm >= cfg.patience:
            converged = True
            break
    with torch.no_grad():
        P = param.detach()
        dl = float(data_loss_of(P)) / d**2
        final = dl + float(penalty(P)) / d**2
        S = make_S(P)
        ev = torch.linalg.eigvalsh(S).cpu().numpy()
        te, tc = evaluate(S, test, beta) if test is not None else (math.nan, math.nan)
    return TrainResult(
        S=S,
        train_loss=final,
        data_loss=dl,
        test_error=te,
        test_error_clean=tc,
        steps=steps,
        converged=converged,
        rank=int(np.sum(ev > cfg.rank_tol)),
        eigenvalues=ev,
        evaluations=evals if cfg.optimizer == "lbfgs" else steps,
    )


def simulate(
    d: int,
    alpha: float,
    *,
    kappa0: float = 0.5,
    noise: float = 0.5,
    tokens: int = 2,
    lam: float = 0.01,
    beta: float = 1.0,
    beta0: float = 1.0,
    kappa: float = 1.0,
    task: str = "seq2lab",
    factorised: bool = True,
    n_test: int = 2000,
    target: torch.Tensor | None = None,
    seed: int = 0,
    config: TrainConfig | None = None,
    progress: Callable[[int, float], None] | None = None,
    device: torch.device | str | None = None,
) -> TrainResult:
    """Draw a target (MP(κ0) unless ``target`` is given), ``n = round(α d²)`` training and ``n_test`` test
    sequences, and train (``lam`` is λ̃). One seed drives everything.

    ``device``: where the labels, Adam and the eigen-decomposition run (None: ``target``'s device, CPU
    without one). The random numbers come from CPU generators whatever the device, so only rounding
    depends on it."""
    from attnlab.core.seeding import derive_seed, generator
    from attnlab.highdim.data import mp_target

    d = check_int("d", d, min=2)
    alpha = check_real("alpha", alpha, min=0.0, min_open=True)
    n = max(1, round(alpha * d * d))
    if device is None:
        device = target.device if isinstance(target, torch.Tensor) else "cpu"
    g = generator(derive_seed(seed, "data"))
    if target is None:
        S0 = mp_target(d, kappa0, g, device=device)
    else:
        S0 = check_tensor("target", target, shape=(d, d)).to(device)
    tr = sample(S0, n, tokens, noise, beta0, task, g)
    te = sample(S0, n_test, tokens, noise, beta0, task, g)
    return train_erm(
        tr,
        te,
        lam=lam,
        kappa=kappa,
        beta=beta,
        factorised=factorised,
        config=config,
        generator=generator(derive_seed(seed, "init")),
        progress=progress,
        device=device,
    )
