"""Training in float32 and by L-BFGS (docs/highdim.md C2): the same minimum as float64 Adam, sooner."""

import pytest
import torch

from attnlab.core.seeding import generator
from attnlab.highdim import TrainConfig, mp_target, sample, train_erm


@pytest.fixture(scope="module")
def problem():
    d = 16
    g = generator(11)
    S0 = mp_target(d, 0.5, g)
    return sample(S0, 256, 2, 0.5, 1.0, "seq2lab", g), sample(S0, 500, 2, 0.5, 1.0, "seq2lab", g)


def _run(problem, config=None, **cfg):
    tr, te = problem
    return train_erm(tr, te, lam=0.01, config=config or TrainConfig(**cfg), generator=generator(12))


def test_lbfgs_reaches_the_adam_minimum(problem):
    # a long float64 Adam run (relative changes below 1e-12 for 20 steps) as the reference minimum; L-BFGS
    # in float32 (float64 sums) stops within 1e-9 of the initial loss per iteration, so its training loss
    # is within ~1e-5 of the minimum (float32 gradients limit the last digits): 1e-4 is the margin
    adam = _run(problem, rtol=1e-12, patience=20, max_steps=20000, lr=0.05)
    fast = _run(problem, TrainConfig.fast())
    assert adam.converged and fast.converged
    assert fast.train_loss == pytest.approx(adam.train_loss, rel=1e-4)
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
