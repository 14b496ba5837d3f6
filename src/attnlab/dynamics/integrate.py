"""Integrators and the one entry point :func:`simulate`.

The vector field (``attnlab.dynamics.field``) is a plain function ``x -> x'``; an integrator takes a
step with it and the space retracts the result onto the manifold:

- ``euler``: ``x <- retract(x + dt f(x))`` (Euler with renormalisation: the baseline of published code);
- ``rk4``: classical Runge–Kutta of order 4, then retraction;
- ``adaptive``: Dormand–Prince 5(4) with embedded error estimate and step-size control, retraction
  after every accepted step (one step size for the whole batch).

:class:`Record` says what to keep: the recording interval, which observables, and whether to keep
the full trajectory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from attnlab.core.validation import check_choice, check_int, check_real, check_tensor
from attnlab.dynamics import observables as obs
from attnlab.dynamics.field import vector_field
from attnlab.dynamics.model import Heads
from attnlab.dynamics.space import Space, get_space

__all__ = ["METHODS", "OBSERVABLES", "Record", "Solution", "simulate", "euler_step", "rk4_step", "dopri_step"]

METHODS = ("euler", "rk4", "adaptive")
#: Observable groups a :class:`Record` may ask for, and the arrays each adds to ``Solution.observables``.
OBSERVABLES = {
    "energy": ("log_energy", "log_energy_total"),  # (T, B, H), (T, B)
    "energy_rate": ("energy_rel_rate", "energy_rel_rate_total"),  # (T, B, H), (T, B): (dE/dt)/E
    "clusters": ("cluster_fraction", "n_clusters"),  # (T, B) each
    "gamma": ("gamma",),  # (T, B): mean off-diagonal inner product
    "entropy": ("entropy",),  # (T, B, H): mean over queries of the attention entropy
}

Field = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Record:
    """What :func:`simulate` keeps.

    Parameters
    ----------
    every : float, optional
        Time between records (rounded to a whole number of steps for fixed-step methods);
        None records only the start and the end.
    observables : tuple of str
        Keys of :data:`OBSERVABLES`.
    trajectory : bool
        Keep the tokens at every recorded time (memory T * B * n * d).
    threshold : float
        Inner-product threshold of the cluster statistics.
    """

    every: float | None = None
    observables: tuple[str, ...] = ("energy", "clusters")
    trajectory: bool = False
    threshold: float = 0.999

    def __post_init__(self) -> None:
        if self.every is not None:
            check_real("every", self.every, min=0.0, min_open=True)
        for o in self.observables:
            check_choice("observables", o, tuple(OBSERVABLES))


@dataclass(frozen=True)
class Solution:
    """The result of :func:`simulate`.

    ``t`` (T,) recorded times; ``x`` (B, n, d) final tokens; ``observables`` maps names to tensors
    with leading time axis (T, B, ...); ``trajectory`` (T, B, n, d) or None; ``steps`` accepted steps,
    ``rejected`` rejected steps (adaptive), ``evaluations`` of the vector field.
    """

    t: torch.Tensor
    x: torch.Tensor
    observables: dict[str, torch.Tensor] = field(default_factory=dict)
    trajectory: torch.Tensor | None = None
    steps: int = 0
    rejected: int = 0
    evaluations: int = 0
    method: str = "rk4"
    space: str = "sphere"

    def __repr__(self) -> str:
        B, n, d = self.x.shape
        return (
            f"Solution(method={self.method!r}, space={self.space!r}, B={B}, n={n}, d={d}, "
            f"t1={float(self.t[-1]):.4g}, records={len(self.t)}, steps={self.steps}, "
            f"observables={sorted(self.observables)})"
        )


# ---------------------------------------------------------------------------------------- steppers
def euler_step(fn: Field, space: Space, x: torch.Tensor, dt: float) -> torch.Tensor:
    """One explicit Euler step followed by retraction (renormalisation on the sphere)."""
    return space.retract(x + dt * fn(x))


def rk4_step(fn: Field, space: Space, x: torch.Tensor, dt: float) -> torch.Tensor:
    """One classical RK4 step (four evaluations) followed by retraction."""
    k1 = fn(x)
    k2 = fn(x + 0.5 * dt * k1)
    k3 = fn(x + 0.5 * dt * k2)
    k4 = fn(x + dt * k3)
    return space.retract(x + (dt / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4))


# Dormand–Prince 5(4) tableau
_DP_A = (
    (),
    (1 / 5,),
    (3 / 40, 9 / 40),
    (44 / 45, -56 / 15, 32 / 9),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
)
_DP_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_DP_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)


def dopri_step(
    fn: Field, x: torch.Tensor, dt: float, k1: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One Dormand–Prince step: (5th-order solution, error estimate, last stage for FSAL)."""
    ks = [fn(x) if k1 is None else k1]
    for a in _DP_A[1:]:
        inc = sum(ai * ki for ai, ki in zip(a, ks) if ai != 0.0)
        ks.append(fn(x + dt * inc))
    x5 = x + dt * sum(b * k for b, k in zip(_DP_B5, ks) if b != 0.0)
    err = dt * sum((b5 - b4) * k for b5, b4, k in zip(_DP_B5, _DP_B4, ks))
    return x5, err, ks[-1]


# ---------------------------------------------------------------------------------------- recording
def _observe(
    spec: Heads, x: torch.Tensor, beta: float, space: Space, fn: Field, rec: Record
) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    if "energy" in rec.observables or "energy_rate" in rec.observables:
        if beta <= 0:
            raise ValueError("beta: expected beta > 0 to record the energy, got 0")
        if "energy_rate" in rec.observables:
            er = obs.energy_rates(spec, x, beta, fn(x))
            out["energy_rel_rate"] = er.rel
            out["energy_rel_rate_total"] = er.rel_total
            if "energy" in rec.observables:
                out["log_energy"] = er.log_E
                out["log_energy_total"] = er.log_E_total
        else:
            le = obs.log_energy(spec, x, beta)
            out["log_energy"] = le
            out["log_energy_total"] = torch.logsumexp(le, -1)
    if "clusters" in rec.observables:
        out["cluster_fraction"] = obs.cluster_fraction(x, rec.threshold)
        out["n_clusters"] = obs.n_clusters(x, rec.threshold).to(x.dtype)
    if "gamma" in rec.observables:
        out["gamma"] = obs.mean_gamma(x)
    if "entropy" in rec.observables:
        out["entropy"] = obs.entropy(spec, x, beta).mean(-1)
    return out


class _Recorder:
    def __init__(self, spec, beta, space, fn, rec):
        self.args = (spec, beta, space, fn, rec)
        self.rec = rec
        self.t: list[float] = []
        self.obs: dict[str, list[torch.Tensor]] = {}
        self.traj: list[torch.Tensor] = []

    def __call__(self, t: float, x: torch.Tensor) -> None:
        spec, beta, space, fn, rec = self.args
        self.t.append(t)
        with torch.no_grad():
            for k, v in _observe(spec, x, beta, space, fn, rec).items():
                self.obs.setdefault(k, []).append(v.detach())
        if rec.trajectory:
            self.traj.append(x.detach().clone())

    def finish(self, x, **kw) -> Solution:
        return Solution(
            t=torch.tensor(self.t, dtype=torch.float64),
            x=x,
            observables={k: torch.stack(v) for k, v in self.obs.items()},
            trajectory=torch.stack(self.traj) if self.traj else None,
            **kw,
        )


# ---------------------------------------------------------------------------------------- simulate
def _small_steps(small, sphere: bool, method: str, x, h: float, mark_steps, recorder, n_eval):  # noqa: ANN001
    """Fixed steps of a small problem in numpy (the field's small-size path, see ``dynamics.field``):
    the same RK4 / Euler updates and retraction as :func:`rk4_step` / :func:`euler_step`, without
    torch's per-operation dispatch. Records see torch tensors, as on the general path."""
    import numpy as np

    def f(a):  # noqa: ANN001, ANN202
        n_eval[0] += 1
        return small.numpy(a)

    def retract(a):  # noqa: ANN001, ANN202
        return a / np.sqrt((a * a).sum(axis=-1, keepdims=True)) if sphere else a

    a = x.detach().numpy().copy()
    i = 0
    for target in mark_steps:
        while i < target:
            if method == "euler":
                a = retract(a + h * f(a))
            else:
                k1 = f(a)
                k2 = f(a + (0.5 * h) * k1)
                k3 = f(a + (0.5 * h) * k2)
                k4 = f(a + h * k3)
                a = retract(a + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4))
            i += 1
        x = torch.from_numpy(a.copy())
        recorder(i * h, x)
    return x


def simulate(
    spec: Heads,
    x0: torch.Tensor,
    *,
    beta: float,
    t1: float,
    method: str = "rk4",
    dt: float = 0.05,
    space: str | Space = "sphere",
    record: Record | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-10,
    max_steps: int = 1_000_000,
    chunk: int | None = None,
    fused: bool = True,
    times: Sequence[float] | None = None,
) -> Solution:
    """Integrate the multi-head dynamics from ``x0`` (B, n, d) over [0, t1].

    Parameters
    ----------
    spec : Heads
        Heads (kind, combination, velocity scale); moved to ``x0``'s device and dtype.
    x0 : torch.Tensor, shape (B, n, d)
        Initial tokens (unit norm on the sphere).
    beta : float
        Inverse temperature (>= 0).
    t1 : float
        Final time (> 0).
    method : {"euler", "rk4", "adaptive"}
        Integrator (see module docstring).
    dt : float
        Step of the fixed-step methods (adjusted down so that a whole number of steps reaches t1),
        first trial step of ``adaptive``.
    space : "sphere", "flat" or a Space
    record : Record, optional
        What to keep (default: energy and clusters at the start and the end).
    rtol, atol : float
        Tolerances of the adaptive method (mixed RMS norm over tokens, max over the batch).
    max_steps : int
        Guard for the adaptive method.
    chunk : int, optional
        Queries per block of scores (see :func:`attnlab.dynamics.field.head_outputs`).
    fused : bool
        Use the fused attention kernel for the softmax kind.
    times : sequence of float, optional
        Explicit recording times in (0, t1] (overrides ``record.every``; fixed-step methods round them
        to steps).

    Returns
    -------
    Solution
    """
    x0 = check_tensor("x0", x0, ndim=3)
    beta = check_real("beta", beta, min=0.0)
    t1 = check_real("t1", t1, min=0.0, min_open=True)
    dt = check_real("dt", dt, min=0.0, min_open=True)
    method = check_choice("method", method, METHODS)
    max_steps = check_int("max_steps", max_steps, min=1)
    sp = get_space(space)
    rec = record or Record()
    if x0.shape[-1] != spec.d:
        raise ValueError(f"x0: expected last dimension d = {spec.d} (that of the heads), got {x0.shape[-1]}")
    if sp.name == "sphere":
        norms = torch.linalg.vector_norm(x0, dim=-1)
        if float((norms - 1).abs().max()) > 1e-6:
            raise ValueError(
                f"x0: expected unit-norm tokens on the sphere, got norms in "
                f"[{float(norms.min()):.4g}, {float(norms.max()):.4g}]"
            )
    spec = spec.to(device=x0.device, dtype=x0.dtype)
    base_fn = vector_field(spec, beta, sp, chunk=chunk, fused=fused)
    n_eval = [0]

    def fn(x: torch.Tensor) -> torch.Tensor:
        n_eval[0] += 1
        return base_fn(x)

    if times is not None:
        marks = sorted(check_real("times", t, min=0.0, max=t1) for t in times)
        marks = [t for t in marks if t > 0] + ([t1] if not marks or marks[-1] < t1 else [])
    elif rec.every is not None:
        k = max(1, int(math.floor(t1 / rec.every + 1e-9)))
        marks = [rec.every * (i + 1) for i in range(k) if rec.every * (i + 1) < t1 - 1e-12] + [t1]
    else:
        marks = [t1]
    recorder = _Recorder(spec, beta, sp, base_fn, rec)
    x = x0
    recorder(0.0, x)
    with torch.no_grad():
        if method in ("euler", "rk4"):
            nsteps = max(1, int(math.ceil(t1 / dt - 1e-9)))
            h = t1 / nsteps
            step = euler_step if method == "euler" else rk4_step
            mark_steps = sorted({max(1, min(nsteps, int(round(m / h)))) for m in marks})
            small = getattr(base_fn, "small", None)
            if small is not None and small.applies(x) and sp.name in ("sphere", "flat"):
                x = _small_steps(small, sp.name == "sphere", method, x, h, mark_steps, recorder, n_eval)
                return recorder.finish(x, steps=nsteps, evaluations=n_eval[0], method=method, space=sp.name)
            i = 0
            for target in mark_steps:
                while i < target:
                    x = step(fn, sp, x, h)
                    i += 1
                recorder(i * h, x)
            return recorder.finish(x, steps=nsteps, evaluations=n_eval[0], method=method, space=sp.name)
        # adaptive Dormand–Prince 5(4)
        t, h, steps, rejected = 0.0, dt, 0, 0
        k1 = None
        for m in marks:
            while t < m - 1e-12 * max(1.0, m):
                hh = min(h, m - t)
                x5, err, k_last = dopri_step(fn, x, hh, k1)
                scale = atol + rtol * torch.maximum(x.abs(), x5.abs())
                e = torch.sqrt(
                    ((err / scale) ** 2).mean(dim=(-2, -1))
                ).max()  # RMS per member, max over batch
                e = float(e)
                if not math.isfinite(e):
                    raise ValueError("dt: the adaptive step produced non-finite values; lower dt or beta")
                if e <= 1.0:
                    t += hh
                    xr = sp.retract(x5)
                    # FSAL: the last stage is f(x5); reuse it only when retraction left x unchanged
                    k1 = k_last if sp.name == "flat" else None
                    x = xr
                    steps += 1
                else:
                    rejected += 1
                fac = 0.9 * (e if e > 0 else 1e-10) ** (-0.2)
                h = hh * min(5.0, max(0.2, fac))
                if steps + rejected > max_steps:
                    raise ValueError(f"max_steps: expected enough steps to reach t1, got {max_steps}")
            recorder(t, x)
        return recorder.finish(
            x, steps=steps, rejected=rejected, evaluations=n_eval[0], method=method, space=sp.name
        )
