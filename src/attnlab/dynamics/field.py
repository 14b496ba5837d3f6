"""The vector field of multi-head self-attention dynamics (docs/flow.md B1), chunked over queries.

Head outputs, for tokens ``x`` of shape (B, n, d), scores ``s_ij = <x_i, M_h x_j>`` and values
``V_h x_j``:

- ``usa``:     ``f_i^h = (1/n) sum_j exp(β s_ij) V_h x_j``
  (computed as ``exp(m_i) * sum_j exp(β s_ij - m_i)``)
- ``softmax``: ``f_i^h = sum_j softmax_j(β s_ij) V_h x_j``  (fused attention kernel, or chunked log-sum-exp)
- ``relu``:    ``f_i^h = (1/n) sum_j ReLU(β s_ij) V_h x_j``

The velocity is ``v_i = c * sum_h f_i^h`` (c = 1 or 1/H, times 1 or 1/n), projected by the space.
Scores are never formed for all queries at once: at most ``chunk`` queries per block, so memory is
O(B H chunk n) rather than O(B H n^2).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlab.core.validation import check_int, check_real, check_tensor
from attnlab.dynamics.model import Heads
from attnlab.dynamics.space import Space, get_space

__all__ = ["head_outputs", "velocity", "vector_field", "auto_chunk", "projections"]

#: Bytes allowed for one block of scores (B, H, chunk, n) when ``chunk`` is automatic.
SCORE_BLOCK_BYTES = 64 * 2**20


def auto_chunk(B: int, H: int, n: int, itemsize: int = 8, budget: int = SCORE_BLOCK_BYTES) -> int:
    """Queries per block so that a block of scores (B, H, chunk, n) fits in ``budget`` bytes."""
    return max(1, min(n, budget // max(1, B * H * n * itemsize)))


def projections(spec: Heads, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Queries ``q_i^h = M_h^T x_i`` and values ``y_j^h = V_h x_j`` of shape (B, H, n, d) each.

    With these, ``s_ij = <q_i^h, x_j>`` and ``f_i^h = sum_j w_ij y_j^h``.
    """
    q = torch.einsum("bnd,hde->bhne", x, spec.M)  # (B, H, n, d): row i = x_i^T M_h
    y = torch.einsum("bnd,hed->bhne", x, spec.V)  # (B, H, n, d): row j = (V_h x_j)^T
    return q, y


def head_outputs(
    spec: Heads,
    x: torch.Tensor,
    beta: float,
    *,
    chunk: int | None = None,
    fused: bool = True,
) -> torch.Tensor:
    """Per-head outputs ``f_i^h`` of shape (B, H, n, d).

    Parameters
    ----------
    spec : Heads
        The heads (kind decides the weights).
    x : torch.Tensor, shape (B, n, d)
        Tokens.
    beta : float
        Inverse temperature, >= 0.
    chunk : int, optional
        Queries per block (default: automatic, blocks of scores under 64 MiB).
    fused : bool
        Use the fused attention kernel for the ``softmax`` kind (memory O(n) per head).

    Raises
    ------
    ValueError
        When the ``usa`` field exceeds the range of ``x``'s dtype (e^{β s} overflows).
    """
    x = check_tensor("x", x, ndim=3)
    if x.shape[-1] != spec.d:
        raise ValueError(f"x: expected last dimension d = {spec.d} (that of the heads), got {x.shape[-1]}")
    beta = check_real("beta", beta, min=0.0)
    B, n, d = x.shape
    q, y = projections(spec, x)  # (B, H, n, d) each
    if spec.kind == "softmax" and fused and beta > 0.0:
        k = x[:, None].expand(B, spec.H, n, d)  # (B, H, n, d)
        return F.scaled_dot_product_attention(q, k, y, scale=beta)
    c = auto_chunk(B, spec.H, n, x.element_size()) if chunk is None else check_int("chunk", chunk, min=1)
    xt = x.transpose(1, 2)[:, None]  # (B, 1, d, n)
    out = torch.empty_like(y)
    for i0 in range(0, n, c):
        s = beta * (q[:, :, i0 : i0 + c] @ xt)  # (B, H, c, n)
        if spec.kind == "relu":
            out[:, :, i0 : i0 + c] = (torch.relu(s) @ y) / n
        elif spec.kind == "softmax":
            out[:, :, i0 : i0 + c] = torch.softmax(s, dim=-1) @ y
        else:  # usa
            m = s.amax(dim=-1, keepdim=True)  # (B, H, c, 1)
            scale = torch.exp(m) / n
            if not bool(torch.isfinite(scale).all()):
                raise ValueError(
                    f"beta: expected beta * max score below {math.log(torch.finfo(x.dtype).max):.0f} "
                    f"for the usa field in {x.dtype} (it overflows), got beta*score = {float(m.max()):.4g}; "
                    "use kind='softmax', a smaller beta or float64"
                )
            out[:, :, i0 : i0 + c] = (torch.exp(s - m) @ y) * scale
    return out


def velocity(
    spec: Heads,
    x: torch.Tensor,
    beta: float,
    space: str | Space = "sphere",
    *,
    chunk: int | None = None,
    fused: bool = True,
    f: torch.Tensor | None = None,
) -> torch.Tensor:
    """The flow's velocity ``x_i' `` of shape (B, n, d) (docs/flow.md B1).

    ``f`` may pass precomputed head outputs (B, H, n, d).
    """
    sp = get_space(space)
    if f is None:
        f = head_outputs(spec, x, beta, chunk=chunk, fused=fused)
    n = x.shape[1]
    v = f.sum(dim=1) * (spec.head_factor() * spec.velocity_factor(n))  # (B, n, d)
    return sp.tangent(x, v)


def vector_field(
    spec: Heads,
    beta: float,
    space: str | Space = "sphere",
    *,
    chunk: int | None = None,
    fused: bool = True,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The autonomous vector field ``x -> x'`` as a closure (what the integrators consume)."""
    sp = get_space(space)
    beta = check_real("beta", beta, min=0.0)
    small = (
        _SmallField(spec, beta, sp)
        if chunk is None and type(sp) in (Space, type(get_space("sphere")), type(get_space("flat")))
        else None
    )

    def fn(x: torch.Tensor) -> torch.Tensor:
        if small is not None and small.applies(x):
            return small(x)
        return velocity(spec, x, beta, sp, chunk=chunk, fused=fused)

    fn.small = small  # type: ignore[attr-defined] - the integrators' small-size path uses it
    return fn


#: Largest B·H·n² (entries of all score matrices) evaluated by the small-size path.
SMALL_SCORES = 64 * 64 * 16


class _SmallField:
    """The field of small problems (CPU, B·H·n² <= SMALL_SCORES, no autograd) in numpy on the tensors'
    own memory: the same formulas as :func:`head_outputs` and :func:`velocity`, without torch's
    per-operation dispatch, which dominates below n ~ 64 (one evaluation at n = 32, d = 3 costs a few
    numpy calls instead of ~20 torch calls)."""

    def __init__(self, spec: Heads, beta: float, space: Space):
        self.spec, self.beta = spec, beta
        self.sphere = space.name == "sphere"
        self._mats: dict[tuple, tuple] = {}  # (dtype, n) -> matrices, factor
        # largest exponent whose exp is finite, less a margin for the sums and the row scale
        self._safe = {t: math.log(torch.finfo(t).max) - 2.0 for t in (torch.float32, torch.float64)}

    def applies(self, x: torch.Tensor) -> bool:
        if (
            x.device.type != "cpu"
            or x.requires_grad
            or x.ndim != 3
            or x.dtype not in (torch.float32, torch.float64)
        ):
            return False
        B, n, d = x.shape
        return d == self.spec.d and B * self.spec.H * n * n <= SMALL_SCORES

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.numpy(x.detach().numpy()))  # shares x's memory, no copy

    def numpy(self, xa):  # noqa: ANN001, ANN201 - numpy arrays (B, n, d) in and out
        """The velocity of tokens ``xa`` (a numpy array (B, n, d)) as a numpy array."""
        import numpy as np

        B, n, d = xa.shape
        key = (xa.dtype, n)
        if key not in self._mats:
            dtype = torch.float64 if xa.dtype == np.float64 else torch.float32
            M = self.spec.M.detach().to("cpu", dtype).numpy()  # (H, d, d)
            Vt = self.spec.V.detach().to("cpu", dtype).transpose(1, 2).contiguous().numpy()  # (H, d, d)
            factor = self.spec.head_factor() * self.spec.velocity_factor(n)
            if self.spec.H == 1:  # one head: plain 2-D products per configuration
                M, Vt = M[0], Vt[0]
            self._mats[key] = (M, Vt, factor, dtype)
        M, Vt, factor, dtype = self._mats[key]
        if self.spec.H == 1:
            xb, xt, axis = xa, xa.transpose(0, 2, 1), None  # (B, n, d), (B, d, n)
        else:
            xb, xt, axis = xa[:, None], xa.transpose(0, 2, 1)[:, None], 1  # (B, 1, n, d), (B, 1, d, n)
        q = xb @ M  # rows x_i^T M_h
        y = xb @ Vt  # rows (V_h x_j)^T
        s = q @ xt  # scores, (B, [H,] n, n)
        if self.beta != 1.0:
            s *= self.beta
        kind = self.spec.kind
        if kind == "relu":
            f = (np.maximum(s, 0.0) @ y) / n
        elif float(s.max()) < self._safe[dtype] - math.log(n):  # e^s and its row sums stay finite
            w = np.exp(s)
            f = (w / w.sum(axis=-1, keepdims=True)) @ y if kind == "softmax" else (w @ y) / n
        else:  # large scores: shift by the row maximum, as head_outputs does
            m = s.max(axis=-1, keepdims=True)
            w = np.exp(s - m)
            if kind == "softmax":
                f = (w / w.sum(axis=-1, keepdims=True)) @ y
            else:  # usa
                if float(m.max()) >= self._safe[dtype]:
                    raise ValueError(
                        f"beta: expected beta * max score below {math.log(torch.finfo(dtype).max):.0f} "
                        f"for the usa field in {dtype} (it overflows), got beta*score = "
                        f"{float(m.max()):.4g}; use kind='softmax', a smaller beta or float64"
                    )
                f = (w @ y) * (np.exp(m) / n)
        v = f if axis is None else f.sum(axis=1)
        if factor != 1.0:
            v = v * factor
        if self.sphere:
            v = v - (xa * v).sum(axis=-1, keepdims=True) * xa
        return v if v.dtype == xa.dtype else v.astype(xa.dtype)
