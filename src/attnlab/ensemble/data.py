"""Synthetic regression problems for the NW-ensemble experiments (docs/ensemble.md A2).

``y = f(x) + σ ε`` with ``ε ~ N(0, 1)`` and ``f`` a smooth function of a low-dimensional
projection ``z = (x_1, …, x_m)`` of the input (the first coordinates; every layout is rotation
invariant, so fixing the relevant directions loses nothing). Inputs are ``N(0, I_d)``
(``inputs="gaussian"``) or uniform on the sphere of radius ``√d`` (``inputs="sphere"``, equal norms).

Targets (``m`` relevant coordinates):

``sine``      ``f = sin(2 z_1)``                               (m = 1)
``ridge``     ``f = tanh(2 z_1) + 0.5 z_2² − 0.5``             (m = 2)
``bump``      ``f = 2 exp(−(z_1² + z_2²)/2) − 1``             (m = 2)
``linear``    ``f = z_1``                                      (m = 1)
``radial``    ``f = (‖x‖² − d)/√(2d)``                          (every coordinate: rotation invariant,
              mean 0 and variance 1 under ``N(0, I_d)``; no frame of heads is favoured)
``zero``      ``f = 0``                                        (pure noise: the MSE is all variance)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from attnlab.core.validation import check_choice, check_int, check_real

__all__ = ["INPUTS", "TARGETS", "RegressionTask"]

TARGETS = {"sine": 1, "ridge": 2, "bump": 2, "linear": 1, "radial": 1, "zero": 1}
INPUTS = ("gaussian", "sphere")


@dataclass(frozen=True)
class RegressionTask:
    """A regression model ``y = f(x) + noise · ε`` on ``R^d``.

    Attributes
    ----------
    d : int
        Input dimension (at least the number of relevant coordinates of the target).
    target : str
        One of ``TARGETS`` (see the module docstring).
    noise : float
        Standard deviation ``σ`` of the additive Gaussian noise.
    inputs : str
        ``"gaussian"`` or ``"sphere"``.
    """

    d: int = 4
    target: str = "sine"
    noise: float = 0.5  # σ of the label noise
    inputs: str = "gaussian"

    def __post_init__(self) -> None:
        check_choice("target", self.target, tuple(TARGETS))
        check_int("d", self.d, min=TARGETS[self.target])
        check_real("noise", self.noise, min=0.0)
        check_choice("inputs", self.inputs, INPUTS)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RegressionTask:
        return cls(**data)

    def f(self, X: torch.Tensor) -> torch.Tensor:
        """The regression function at ``X`` (..., d) -> (...)."""
        if self.target == "radial":
            return (X.square().sum(-1) - self.d) / math.sqrt(2 * self.d)
        if self.target == "zero":
            return torch.zeros(X.shape[:-1], dtype=X.dtype, device=X.device)
        z1 = X[..., 0]
        if self.target == "sine":
            return torch.sin(2 * z1)
        if self.target == "linear":
            return z1.clone()
        z2 = X[..., 1]
        if self.target == "ridge":
            return torch.tanh(2 * z1) + 0.5 * z2.square() - 0.5
        return 2 * torch.exp(-(z1.square() + z2.square()) / 2) - 1

    def sample_x(
        self,
        n: int,
        generator: torch.Generator | None = None,
        batch: tuple[int, ...] = (),
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> torch.Tensor:
        """Inputs, shape ``(*batch, n, d)``."""
        n = check_int("n", n, min=1)
        X = torch.randn(*batch, n, self.d, generator=generator, dtype=dtype, device=device)
        if self.inputs == "sphere":
            X = X * (math.sqrt(self.d) / torch.linalg.vector_norm(X, dim=-1, keepdim=True))
        return X

    def sample(
        self,
        n: int,
        generator: torch.Generator | None = None,
        batch: tuple[int, ...] = (),
        dtype: torch.dtype = torch.float64,
        device: str | torch.device = "cpu",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training data ``(X, y)`` of shapes ``(*batch, n, d)`` and ``(*batch, n)``."""
        X = self.sample_x(n, generator, batch, dtype, device)
        eps = torch.randn(X.shape[:-1], generator=generator, dtype=dtype, device=device)  # (*batch, n)
        return X, self.f(X) + self.noise * eps
