"""The problem of paper C (docs/highdim.md C1–C2) and the conversion between λ and λ̃.

The regularisation parameter of everything in :mod:`attnlab.highdim` is ``λ̃`` (``lam``), the coefficient of
the nuclear norm in ``d λ̃ Tr S``; the weight-decay coefficient ``λ`` of ``λ‖W‖²`` is ``λ̃/√κ``
(:func:`lam_from_lam_tilde`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from attnlab.core.validation import check_int, check_real
from attnlab.highdim.targets import DiscreteSpectrum, MarchenkoPastur

__all__ = ["Setting", "lam_from_lam_tilde", "lam_tilde_from_lam"]


def lam_from_lam_tilde(lam_tilde: float, kappa: float = 1.0) -> float:
    """Weight-decay coefficient ``λ`` (penalty ``λ‖W‖²``) for the nuclear-norm coefficient ``λ̃``.

    ``λ‖W‖_F² = λ √(pd) Tr S = d λ̃ Tr S`` with ``λ̃ = √κ λ`` (docs/highdim.md C2). This is the one place the
    conversion is done.
    """
    lam_tilde = check_real("lam_tilde", lam_tilde, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    return lam_tilde / math.sqrt(kappa)


def lam_tilde_from_lam(lam: float, kappa: float = 1.0) -> float:
    """Inverse of :func:`lam_from_lam_tilde`: ``λ̃ = √κ λ``."""
    lam = check_real("lam", lam, min=0.0)
    kappa = check_real("kappa", kappa, min=0.0, min_open=True)
    return lam * math.sqrt(kappa)


@dataclass(frozen=True)
class Setting:
    """A problem of docs/highdim.md C1–C2 at ``d → ∞`` (or finite d through a discrete ``target``).

    Parameters
    ----------
    kappa0 : float
        Target rank ratio ``p0/d`` (used when ``target`` is None: Marchenko–Pastur target).
    noise : float
        Label-noise variance ``Δ``.
    tokens : int
        Sequence length ``T``.
    lam : float
        ``λ̃``, the nuclear-norm coefficient (``λ = λ̃/√κ`` is the weight decay, see
        :func:`lam_from_lam_tilde`).
    beta, beta0 : float
        Inverse temperatures of student and target.
    kappa : float
        Student width ``p/d`` (the theory is independent of κ as long as κ ≥ the rank fraction).
    target : DiscreteSpectrum or None
        A finite-d target spectrum (e.g. :func:`~attnlab.highdim.power_law_spectrum`); None for MP(κ0).
    """

    kappa0: float = 0.5
    noise: float = 0.5
    tokens: int = 2
    lam: float = 0.01
    beta: float = 1.0
    beta0: float = 1.0
    kappa: float = 1.0
    target: DiscreteSpectrum | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_real("kappa0", self.kappa0, min=0.0, min_open=True)
        check_real("noise", self.noise, min=0.0)
        check_int("tokens", self.tokens, min=2)
        check_real("lam", self.lam, min=0.0)
        check_real("beta", self.beta, min=0.0, min_open=True)
        check_real("beta0", self.beta0, min=0.0)
        check_real("kappa", self.kappa, min=0.0, min_open=True)
        if self.target is not None and not isinstance(self.target, DiscreteSpectrum):
            raise ValueError(f"target: expected a DiscreteSpectrum or None, got {type(self.target).__name__}")

    @property
    def spectrum(self) -> MarchenkoPastur | DiscreteSpectrum:
        """The target law μ0."""
        return self.target if self.target is not None else MarchenkoPastur(self.kappa0)

    @property
    def q0(self) -> float:
        """``Q0 = Tr S0²/d``."""
        return self.spectrum.q0

    @property
    def K(self) -> int:
        """Flat dimension ``T(T+1)/2``."""
        return self.tokens * (self.tokens + 1) // 2

    @property
    def weight_decay(self) -> float:
        """``λ`` of the penalty ``λ‖W‖²`` for this ``λ̃`` and ``κ``."""
        return lam_from_lam_tilde(self.lam, self.kappa)

    def to_dict(self) -> dict:
        """Plain JSON-able fields; ``target`` as the list of its eigenvalues (or None)."""
        d = asdict(self)
        d.pop("target")
        d["target"] = None if self.target is None else self.target.eigenvalues.tolist()
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Setting:
        """Inverse of :meth:`to_dict` (missing keys take their defaults; ``target`` is a list of
        eigenvalues, a :class:`DiscreteSpectrum` or None)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"data: expected a mapping of Setting fields, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"data: expected keys among {', '.join(sorted(known))}, got unknown key {unknown[0]!r}"
            )
        kw = dict(data)
        t = kw.get("target")
        if t is not None and not isinstance(t, DiscreteSpectrum):
            arr = np.asarray(t, dtype=float) if isinstance(t, (list, tuple, np.ndarray)) else None
            if arr is None:
                got = type(t).__name__
                raise ValueError(
                    f"target: expected a list of eigenvalues, a DiscreteSpectrum or None, got {got}"
                )
            kw["target"] = DiscreteSpectrum(arr)
        return cls(**kw)
