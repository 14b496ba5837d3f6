"""Empirical risk minimisation by full-batch Adam or L-BFGS (docs/highdim.md C2).

Factorised student ``S = WᵀW/√(pd)`` with the penalty ``λ‖W‖_F²`` written into the loss (``λ = λ̃/√κ``:
the API takes λ̃, see :func:`attnlab.highdim.lam_from_lam_tilde`), and the unfactorised baseline: a
symmetric ``S`` with the Frobenius penalty ``d λ_F ‖S‖_F²``.

Outputs follow docs/highdim.md C2: ``train_loss`` = (data loss + penalty)/d²; ``test_error`` = per-sample
squared error summed over the T² entries against noisy labels (seq2seq: ``‖y − ŷ‖²/d``),
``test_error_clean`` the same against noiseless labels.

The loss and its gradient in ``S`` are written out by hand (:mod:`attnlab.highdim.objective`: two matrix
products of size n(T − 1) × d × d per evaluation, as the softmax reads only differences of logits within a
row, no autograd graph); the optimisers are written here too (Adam) or driven through scipy (L-BFGS-B), so a
training imports neither torch's autograd optimisers nor their compiler.

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
from attnlab.highdim.objective import PairProblem, Problem
from attnlab.highdim.setting import lam_from_lam_tilde

__all__ = ["TrainConfig", "TrainResult", "train_erm", "evaluate", "predict", "simulate"]


@dataclass(frozen=True)
class TrainConfig:
    """Optimiser settings.

    ``optimizer``: ``"lbfgs"`` (limited-memory BFGS, history ``history``, scipy's L-BFGS-B driver with its
    Moré–Thuente line search; a step is one iteration, which may evaluate the loss more than once:
    ``TrainResult.evaluations`` counts them) or ``"adam"`` (full-batch Adam at ``lr``, the published
    protocol, β = (0.9, 0.999), ε = 1e-8).
    ``rtol``: the stopping tolerance (None: 1e-7 for Adam, 1e-9 for L-BFGS). Adam stops when the relative
    change of the loss stays below it for ``patience`` consecutive steps (after ``min_steps``); L-BFGS stops
    when one iteration lowers the loss by less than ``rtol`` times the initial loss (an upper bound of the
    final one, so at least as strict). ``max_steps`` caps the iterations of either.
    ``dtype``: precision of the data, ``S``, the logits and the two large matrix products per evaluation
    (``"float32"`` halves their cost); the losses are summed in float64, the parameters are float64
    whatever ``dtype``, and the reported losses and errors are evaluated in float64 at the end.
    """

    lr: float = 0.1  # published: 0.1
    rtol: float | None = None
    patience: int = 10
    min_steps: int = 100
    max_steps: int = 3000
    rank_tol: float = 1e-3  # eigenvalues of S above this count towards the rank
    optimizer: str = "adam"
    dtype: str = "float64"
    history: int = 20  # L-BFGS memory
    init_scale: float = 1.0  # W starts N(0, init_scale²) (published: 1)

    def __post_init__(self) -> None:
        check_real("lr", self.lr, min=0.0, min_open=True)
        if self.rtol is not None:
            check_real("rtol", self.rtol, min=0.0)
        check_int("patience", self.patience, min=1)
        check_int("min_steps", self.min_steps, min=0)
        check_int("max_steps", self.max_steps, min=1)
        check_real("rank_tol", self.rank_tol, min=0.0)
        check_choice("optimizer", self.optimizer, ("adam", "lbfgs"))
        check_choice("dtype", self.dtype, ("float64", "float32"))
        check_int("history", self.history, min=1)
        check_real("init_scale", self.init_scale, min=0.0, min_open=True)

    @property
    def tolerance(self) -> float:
        """``rtol``, or the optimiser's default when it is None."""
        if self.rtol is not None:
            return self.rtol
        return DEFAULT_RTOL[self.optimizer]

    @classmethod
    def published(cls, **kw) -> TrainConfig:
        """The published Adam protocol (full batch, lr 0.1, ``W`` drawn ``N(0, 1)``, the penalty in the loss,
        at least 100 steps), stopped at the first step whose relative change of the loss is below 1e-7:
        the published rule stops at the first step whose float32 loss equals the previous one (an absolute
        change below 1e-7 of a sum of about 230), a relative change of about 6e-8. Products in float32 with
        float64 sums and float64 parameters: at d = 100 it stops within 1e-6 (relative) of the training loss
        the published loop reaches, in float64 or float32 (bench/bench_adam.py)."""
        base = dict(optimizer="adam", lr=0.1, dtype="float32", rtol=1e-7, patience=1, min_steps=100)
        return cls(**(base | kw))

    @classmethod
    def fast(cls, **kw) -> TrainConfig:
        """L-BFGS in float32 with float64 sums: on the published setting it reaches a lower training loss
        than the published Adam protocol in about a third of the loss evaluations (bench/bench_highdim.py)."""
        base = dict(optimizer="lbfgs", dtype="float32")
        return cls(**(base | kw))


DEFAULT_RTOL = {"adam": 1e-7, "lbfgs": 1e-9}


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


def _adam(f: Problem, P: torch.Tensor, cfg: TrainConfig, progress) -> tuple[torch.Tensor, int, bool]:
    """Full-batch Adam (Kingma & Ba, bias-corrected moments) with the relative-change stopping rule."""
    b1, b2, eps, tol = 0.9, 0.999, 1e-8, cfg.tolerance
    P = P.clone()  # updated in place
    m, v, denom = torch.zeros_like(P), torch.zeros_like(P), torch.empty_like(P)
    prev, calm, steps, converged = math.inf, 0, 0, False
    for steps in range(1, cfg.max_steps + 1):
        loss, g = f(P)
        if not math.isfinite(loss):
            break
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        torch.div(v, 1 - b2**steps, out=denom).sqrt_().add_(eps)
        P.addcdiv_(m, denom, value=-cfg.lr / (1 - b1**steps))
        rel = abs(prev - loss) / max(abs(loss), 1e-300)
        calm = calm + 1 if rel < tol else 0
        prev = loss
        if progress is not None and steps % 10 == 0:
            progress(steps, loss / f.d**2)
        if steps >= cfg.min_steps and calm >= cfg.patience:
            converged = True
            break
    return P, steps, converged


def _lbfgs(f: Problem, P: torch.Tensor, cfg: TrainConfig, progress) -> tuple[torch.Tensor, int, int, bool]:
    """L-BFGS (scipy's L-BFGS-B without bounds) on the loss scaled by its initial value, so that scipy's
    test ``(f_k − f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) <= ftol`` is a change of ``rtol`` times that value."""
    from scipy.optimize import minimize
    from threadpoolctl import threadpool_limits

    shape, dev = P.shape, P.device
    f0 = max(abs(f(P, grad=False)[0]), 1e-300)
    evals = [1]

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        evals[0] += 1
        loss, g = f(torch.from_numpy(x).view(shape).to(dev))
        return loss / f0, (g / f0).reshape(-1).cpu().numpy()

    def callback(intermediate_result) -> None:
        it[0] += 1
        if progress is not None and it[0] % 10 == 0:
            progress(it[0], intermediate_result.fun * f0 / f.d**2)

    it = [0]
    # the optimiser's own work is dot products and axpys on p·d values in numpy's and scipy's BLAS: on one
    # thread (their spinning threads contended with torch's and cost ~8× the time at d = 100 on two cores);
    # the loss evaluations keep torch's threads
    with threadpool_limits(1, user_api="blas"):
        res = minimize(
            fun,
            P.reshape(-1).cpu().numpy(),
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options=dict(
                maxiter=cfg.max_steps,
                maxfun=cfg.max_steps * 5,
                maxcor=cfg.history,
                ftol=cfg.tolerance,
                gtol=0.0,
            ),
        )
    P = torch.from_numpy(res.x).view(shape).to(dev)
    # converged: stopped by the change of the loss (status 0); not by the step or evaluation cap (1) nor
    # by a line search that found no lower point (2)
    return P, int(res.nit), evals[0], bool(res.status == 0 and np.isfinite(res.fun))


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
    """Train the tied single-head student by full-batch Adam or L-BFGS (``config.optimizer``).

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
        Where the training and the eigen-decomposition run (None: the device of ``train.X``); the samples
        are moved there.
    """
    cfg = config or TrainConfig()
    lam = check_real("lam", lam, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    beta = check_real("beta", beta, min=0.0, min_open=True)
    task = check_choice("task", train.task, TASKS)
    X64 = check_tensor("train.X", train.X, ndim=3)
    dev = X64.device if device is None else torch.device(device)
    wdt = torch.float32 if cfg.dtype == "float32" else torch.float64
    X64, y64 = X64.to(dev, torch.float64), train.y.to(dev, torch.float64)
    n, T, d = X64.shape
    p = max(1, round(kappa * d))
    if factorised:
        where = draw_device(generator, torch.device("cpu"))
        P0 = torch.randn(p, d, generator=generator, dtype=torch.float64, device=where).to(dev)
        if cfg.init_scale != 1.0:
            P0.mul_(cfg.init_scale)
        reg = lam_from_lam_tilde(lam, kappa)
    else:
        P0 = torch.zeros(d, d, dtype=torch.float64, device=dev)
        reg = lam
    # Adam at T = 2 (the published protocol) evaluates the closed form; L-BFGS and the other students keep
    # data_loss_grad, whose rounding the stored L-BFGS results were computed with
    if cfg.optimizer == "adam" and factorised and task == "seq2lab" and T == 2:
        f = PairProblem(X64.to(wdt), y64.to(wdt), beta, p, reg)
    else:
        f = Problem(X64.to(wdt), y64.to(wdt), task, beta, factorised, p, reg)
    if cfg.optimizer == "lbfgs":
        P, steps, evals, converged = _lbfgs(f, P0, cfg, progress)
    else:
        P, steps, converged = _adam(f, P0, cfg, progress)
        evals = steps
    exact = f if wdt == torch.float64 else Problem(X64, y64, task, beta, factorised, p, reg)
    final = exact(P, grad=False)[0] / d**2  # reported in float64
    S = exact.S(P)
    dl = final - exact.penalty(P) / d**2
    with torch.no_grad():
        ev = torch.linalg.eigvalsh(S).cpu().numpy()
        te, tc = evaluate(S, test, beta) if test is not None else (math.nan, math.nan)
    return TrainResult(
        S=S,
        train_loss=final,
        data_loss=dl,
        test_error=te,
        test_error_clean=tc,
        steps=steps,
        converged=converged and math.isfinite(final),
        rank=int(np.sum(ev > cfg.rank_tol)),
        eigenvalues=ev,
        evaluations=evals,
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
