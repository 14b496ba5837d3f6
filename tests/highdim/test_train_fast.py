"""Training by hand-written gradients, Adam and L-BFGS, float32 (docs/highdim.md C2): the gradient against
autograd and finite differences, Adam against torch's, and L-BFGS reaching the float64 Adam minimum."""

import math

import pytest
import torch

from attnlab.core.seeding import generator
from attnlab.highdim import TrainConfig, mp_target, sample, train_erm
from attnlab.highdim.objective import PairProblem, Problem, _matmul, data_loss_grad


@pytest.fixture(scope="module")
def problem():
    d = 16
    g = generator(11)
    S0 = mp_target(d, 0.5, g)
    return sample(S0, 256, 2, 0.5, 1.0, "seq2lab", g), sample(S0, 500, 2, 0.5, 1.0, "seq2lab", g)


def _run(problem, config=None, **cfg):
    tr, te = problem
    return train_erm(tr, te, lam=0.01, config=config or TrainConfig(**cfg), generator=generator(12))


def _autograd_loss(S, X, y, beta, task):
    # the loss written directly from its definition (docs/highdim.md C1, C2), differentiated by autograd
    d = X.shape[-1]
    eye = torch.eye(X.shape[1], dtype=X.dtype)
    Z = (X @ S @ X.transpose(-1, -2) - torch.trace(S) * eye) / math.sqrt(d)
    A = torch.softmax(beta * Z, -1)
    yh = A @ X if task == "seq2seq" else A
    e = ((y - yh) ** 2).sum()
    return e / d if task == "seq2seq" else e


@pytest.mark.parametrize(
    "task,beta,T",
    [("seq2lab", 1.0, 2), ("seq2lab", 2.0, 3), ("seq2seq", 0.7, 3), ("seq2seq", 1.0, 2), ("seq2lab", 0.5, 5)],
)
def test_gradient_matches_autograd_and_finite_differences(task, beta, T):
    d = 9
    g = generator(21)
    S0 = mp_target(d, 0.5, g)
    data = sample(S0, 40, T, 0.3, 1.0, task, g)
    B = torch.randn(d, d, generator=g, dtype=torch.float64)
    S = (B + B.T) / (2 * math.sqrt(d))
    loss, G = data_loss_grad(S.clone(), data.X, data.y, beta, task)
    Sr = S.clone().requires_grad_(True)
    ref = _autograd_loss(Sr, data.X, data.y, beta, task)
    ref.backward()
    # float64 throughout: the two differ by rounding (1e-12 relative is ~1e4 ulps of margin)
    assert float(loss) == pytest.approx(float(ref.detach()), rel=1e-12)
    assert torch.allclose(G, (Sr.grad + Sr.grad.T) / 2, rtol=1e-10, atol=1e-12)
    # central finite difference along a symmetric direction E: dL = ⟨G, E⟩; step 1e-5 leaves a truncation
    # error O(h²) ~ 1e-10 relative against float64 rounding ~1e-11/h: 1e-6 relative is a safe margin
    E = torch.randn(d, d, generator=g, dtype=torch.float64)
    E = (E + E.T) / 2
    h = 1e-5
    fd = (
        float(_autograd_loss(S + h * E, data.X, data.y, beta, task))
        - float(_autograd_loss(S - h * E, data.X, data.y, beta, task))
    ) / (2 * h)
    assert float((G * E).sum()) == pytest.approx(fd, rel=1e-6)


@pytest.mark.parametrize("factorised,kappa", [(True, 1.0), (True, 0.5), (False, 1.0)])
def test_parameter_gradient_matches_autograd(factorised, kappa):
    # the chain rule from S to the factor W (or B) and the penalty, against autograd on the whole objective
    d = 8
    g = generator(22)
    data = sample(mp_target(d, 0.5, g), 30, 2, 0.5, 1.0, "seq2lab", g)
    p = max(1, round(kappa * d))
    f = Problem(data.X, data.y, "seq2lab", 1.3, factorised, p, 0.07)
    P = torch.randn(p if factorised else d, d, generator=g, dtype=torch.float64)
    value, grad = f(P)
    Pr = P.clone().requires_grad_(True)
    S = Pr.T @ Pr / math.sqrt(p * d) if factorised else (Pr + Pr.T) / (2 * math.sqrt(d))
    pen = 0.07 * (Pr**2).sum() if factorised else d * 0.07 * (S**2).sum()
    total = _autograd_loss(S, data.X, data.y, 1.3, "seq2lab") + pen
    total.backward()
    assert value == pytest.approx(float(total.detach()), rel=1e-12)
    assert torch.allclose(grad, Pr.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("labels", ["softmax", "arbitrary"])
@pytest.mark.parametrize("beta,kappa", [(1.0, 1.0), (1.7, 0.5)])
def test_pair_kernel_matches_autograd(labels, beta, kappa):
    # the closed form at T = 2 (L = ½Σ(2σ − w)² + ½Σε², its gradient through z, S and W) against autograd on
    # the objective written from its definition; "arbitrary" labels (rows not summing to one) exercise the
    # ε term, which softmax labels leave at rounding level. float64: 1e-12 / 1e-10 relative is ~1e4 ulps
    d = 8
    g = generator(24)
    data = sample(mp_target(d, 0.5, g), 30, 2, 0.5, 1.0, "seq2lab", g)
    y = data.y if labels == "softmax" else torch.rand(30, 2, 2, generator=g, dtype=torch.float64)
    p = max(1, round(kappa * d))
    f = PairProblem(data.X, y, beta, p, 0.07)
    P = torch.randn(p, d, generator=g, dtype=torch.float64)
    value, grad = f(P)
    assert f(P, grad=False) == (value, None)
    Pr = P.clone().requires_grad_(True)
    S = Pr.T @ Pr / math.sqrt(p * d)
    total = _autograd_loss(S, data.X, y, beta, "seq2lab") + 0.07 * (Pr**2).sum()
    total.backward()
    assert value == pytest.approx(float(total.detach()), rel=1e-12)
    assert torch.allclose(grad, Pr.grad, rtol=1e-10, atol=1e-12)


def test_float32_pair_kernel_matches_float64_autograd():
    # the T = 2 kernel with float32 data and products (float64 loss sum and parameters) against autograd in
    # float64; margins as in test_float32_parameter_gradient_matches_float64_autograd (float32 resolution
    # 6e-8 over sums of 30 samples and d = 8 terms: ~1e-6 relative; a wrong factor is off by O(1))
    d = 8
    g = generator(25)
    data = sample(mp_target(d, 0.5, g), 30, 2, 0.5, 1.0, "seq2lab", g)
    f32 = PairProblem(data.X.float(), data.y.float(), 1.3, d, 0.07)
    P = torch.randn(d, d, generator=g, dtype=torch.float64)
    value, grad = f32(P)
    assert grad.dtype == torch.float64
    Pr = P.clone().requires_grad_(True)
    total = _autograd_loss(Pr.T @ Pr / d, data.X, data.y, 1.3, "seq2lab") + 0.07 * (Pr**2).sum()
    total.backward()
    assert value == pytest.approx(float(total.detach()), rel=1e-5)
    assert torch.allclose(grad, Pr.grad, rtol=1e-4, atol=1e-5 * float(Pr.grad.abs().max()))


def test_adam_follows_torch_adam(problem):
    # the hand-written Adam against torch.optim.Adam on the same objective (autograd gradients), 50 steps
    # from the same start: equal up to float64 rounding amplified along the steps (1e-8 relative)
    tr, _ = problem
    r = train_erm(tr, None, lam=0.01, config=TrainConfig(max_steps=50, min_steps=50), generator=generator(12))
    d = tr.X.shape[-1]
    W = torch.randn(d, d, generator=generator(12), dtype=torch.float64).requires_grad_(True)
    opt = torch.optim.Adam([W], lr=0.1)
    for _ in range(50):
        opt.zero_grad()
        S = W.T @ W / d
        (_autograd_loss(S, tr.X, tr.y, 1.0, "seq2lab") + 0.01 * (W**2).sum()).backward()
        opt.step()
    assert torch.allclose(r.S, (W.T @ W / d).detach(), rtol=1e-8, atol=1e-10)


def test_lbfgs_reaches_the_adam_minimum(problem):
    # a long float64 Adam run (relative changes below 1e-12 for 20 steps) as the reference minimum; L-BFGS
    # in float32 (float64 sums) stopping at a change below 1e-9 of the initial loss per iteration is
    # within ~1e-6 of the minimum (float32 gradients limit the last digits): 1e-5 is the margin
    adam = _run(problem, rtol=1e-12, patience=20, max_steps=20000, lr=0.05)
    fast = _run(problem, TrainConfig.fast())
    assert adam.converged and fast.converged
    assert fast.train_loss == pytest.approx(adam.train_loss, rel=1e-5)
    assert fast.test_error == pytest.approx(adam.test_error, rel=1e-3)
    assert fast.evaluations >= fast.steps  # line searches evaluate at least once per iteration
    assert fast.evaluations < adam.steps / 5


def test_float32_adam_follows_float64(problem):
    # the same 200 Adam steps from the same start: float32 logits change the loss by rounding only
    # (float32 resolution ~1e-7, amplified along the 200 steps); 1e-4 relative leaves that a wide margin
    a = _run(problem, max_steps=200, min_steps=200)
    b = _run(problem, max_steps=200, min_steps=200, dtype="float32")
    assert b.S.dtype == torch.float64  # parameters stay in float64
    assert b.train_loss == pytest.approx(a.train_loss, rel=1e-4)


def test_config_validation():
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="sgd")
    with pytest.raises(ValueError, match="dtype"):
        TrainConfig(dtype="float16")
    with pytest.raises(ValueError, match="history"):
        TrainConfig(history=0)
    with pytest.raises(ValueError, match="rtol"):
        TrainConfig(rtol=-1.0)
    assert TrainConfig().tolerance == 1e-7 and TrainConfig.fast().tolerance == 1e-9


def test_init_scale_scales_the_start(problem):
    # one Adam step of length ~1e-12 leaves the start: S = WᵀW/√(pd) scales by init_scale²
    tr, _ = problem
    runs = [
        train_erm(
            tr,
            None,
            lam=0.01,
            config=TrainConfig(lr=1e-12, max_steps=1, min_steps=1, init_scale=s),
            generator=generator(12),
        )
        for s in (1.0, 0.1)
    ]
    assert torch.allclose(runs[1].S, 0.01 * runs[0].S, rtol=1e-9)
    with pytest.raises(ValueError, match="init_scale"):
        TrainConfig(init_scale=0.0)


def test_float32_parameter_gradient_matches_float64_autograd():
    # the factorised chain formed in float32 (S = WᵀW/c and 2WG/c from W rounded to float32) against
    # autograd in float64: float32 resolution is 6e-8; a sum over 30 samples and d = 8 terms keeps the
    # relative error near 1e-6, so 1e-4 is a wide margin while a wrong factor (2, c, λ) is off by O(1)
    d = 8
    g = generator(23)
    data = sample(mp_target(d, 0.5, g), 30, 2, 0.5, 1.0, "seq2lab", g)
    f32 = Problem(data.X.float(), data.y.float(), "seq2lab", 1.3, True, d, 0.07)
    P = torch.randn(d, d, generator=g, dtype=torch.float64)
    value, grad = f32(P)
    assert grad.dtype == torch.float64  # the parameters' gradient stays in float64
    Pr = P.clone().requires_grad_(True)
    total = _autograd_loss(Pr.T @ Pr / d, data.X, data.y, 1.3, "seq2lab") + 0.07 * (Pr**2).sum()
    total.backward()
    assert value == pytest.approx(float(total.detach()), rel=1e-5)
    assert torch.allclose(grad, Pr.grad, rtol=1e-4, atol=1e-5 * float(Pr.grad.abs().max()))


def test_published_adam_stops_at_the_first_calm_step_after_100(problem):
    """``TrainConfig.published`` in float64 against torch's Adam with autograd on the same objective: torch's
    loss trajectory gives the first step after 100 whose relative change is below 1e-7; ours must stop
    there, at the same loss (the two trajectories agree to rounding, 1e-8 relative over 50 steps in
    test_adam_follows_torch_adam; a step earlier or later moves the loss by about 1e-7 relative, so 1e-9
    tells the stopping step)."""
    tr, _ = problem
    d = tr.X.shape[-1]
    r = train_erm(tr, None, lam=0.01, config=TrainConfig.published(dtype="float64"), generator=generator(12))
    W = torch.randn(d, d, generator=generator(12), dtype=torch.float64).requires_grad_(True)
    opt = torch.optim.Adam([W], lr=0.1)
    losses = []
    for _ in range(2000):
        opt.zero_grad()
        loss = _autograd_loss(W.T @ W / d, tr.X, tr.y, 1.0, "seq2lab") + 0.01 * (W**2).sum()
        loss.backward()
        losses.append(float(loss.detach()))
        opt.step()  # the step is taken, then the change of the loss is read (as in the published loop)
        if len(losses) >= 100 and abs(losses[-1] - losses[-2]) / abs(losses[-1]) < 1e-7:
            break
    assert r.converged and r.steps == len(losses) > 100
    S = (W.T @ W / d).detach()
    final = float(_autograd_loss(S, tr.X, tr.y, 1.0, "seq2lab") + 0.01 * (W.detach() ** 2).sum()) / d**2
    assert r.train_loss == pytest.approx(final, rel=1e-9)
    # in float32 (the published default): the same protocol, the loss within float32's reach of it
    # (rounding changes the step at which the relative change first drops below 1e-7 by a few steps,
    # each moving the loss by ~1e-7 relative: 1e-5 is the margin)
    r32 = train_erm(tr, None, lam=0.01, config=TrainConfig.published(), generator=generator(12))
    assert r32.converged and r32.train_loss == pytest.approx(r.train_loss, rel=1e-5)


@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_matmul_agrees_with_torch_mm(dtype, rtol):
    # the Adam kernel's products by numpy on the CPU (objective._matmul) against torch.mm: the same sums in
    # another order, so equal to rounding (float64: 1e-12 relative of the largest entry is ~1e4 ulps over
    # sums of 300 terms; float32 1e-5 likewise); into ``out`` the result is written there and returned
    g = generator(26)
    A = torch.randn(300, 40, generator=g, dtype=torch.float64).to(dtype)
    B = torch.randn(40, 30, generator=g, dtype=torch.float64).to(dtype)
    ref = torch.mm(A, B)
    got = _matmul(A, B)
    assert got.dtype == dtype and got.shape == (300, 30)
    assert torch.allclose(got, ref, rtol=0, atol=rtol * float(ref.abs().max()))
    out = torch.empty(300, 30, dtype=dtype)
    assert _matmul(A, B, out=out) is out
    assert torch.allclose(out, ref, rtol=0, atol=rtol * float(ref.abs().max()))


def test_matmul_off_the_cpu_keeps_torch():
    # on another device (here the meta device, shapes only) the products stay torch's, into ``out`` as asked
    A, B = torch.empty(300, 40, device="meta"), torch.empty(40, 30, device="meta")
    assert _matmul(A, B).shape == (300, 30) and _matmul(A, B).device.type == "meta"
    out = torch.empty(300, 30, device="meta")
    assert _matmul(A, B, out=out) is out
