"""Identity checks at a state (forward mode) against central differences; the monotone test of a record."""

import numpy as np
import pytest
import torch

from attnlab.dynamics import (
    Heads,
    energy_identity,
    energy_monotone,
    entropy,
    entropy_identity,
    init,
    log_energy,
    trajectory_states,
    velocity,
)
from attnlab.dynamics.space import get_space


def _central(fn, x, v, h=1e-5):
    return (fn(x + h * v) - fn(x - h * v)) / (2 * h)


@pytest.mark.parametrize("space", ["sphere", "flat"])
def test_energy_identity_against_central_difference(space):
    g = torch.Generator().manual_seed(0)
    spec = Heads.random_symmetric(3, 5, generator=g, kind="usa")
    x = init.uniform(batch=4, n=7, d=5, generator=g)
    err, rate = energy_identity(spec, x, 1.3, space)
    assert float(err.max()) < 1e-10  # Thm 11 in float64: rounding only
    v = velocity(spec, x, 1.3, space)
    np.testing.assert_allclose(rate.numpy(), ((v * v).sum((-2, -1)) / 7).numpy(), rtol=1e-14)
    # an independent derivative: central difference of E_multi along v (step 1e-5: O(h²) ~ 1e-10
    # truncation plus ~1e-11 cancellation relative to E); 1e-6 relative is a wide margin
    E = lambda y: torch.logsumexp(log_energy(spec, y, 1.3), -1).exp()  # noqa: E731
    np.testing.assert_allclose(_central(E, x, v).numpy(), rate.numpy(), rtol=1e-6)


def test_energy_identity_fails_outside_the_theorem():
    g = torch.Generator().manual_seed(1)
    spec = Heads.random_symmetric(2, 4, generator=g, kind="usa").perturb_values(0.1, generator=g)
    err, _ = energy_identity(spec, init.uniform(batch=4, n=5, d=4, generator=g), 1.0)
    assert float(err.max()) > 1e-4  # V_h ≠ M_h: the velocity is no longer n·grad E_multi


def test_entropy_identity_against_central_difference():
    g = torch.Generator().manual_seed(2)
    spec = Heads.random_symmetric(2, 4, generator=g, kind="softmax")
    x = init.uniform(batch=3, n=6, d=4, generator=g)
    assert float(entropy_identity(spec, x, 2.0).max()) < 1e-10
    v = get_space("sphere").tangent(x, velocity(spec, x, 2.0))
    fd = _central(lambda y: entropy(spec, y, 2.0), x, v)  # (B, H, n)
    from attnlab.dynamics import entropy_rate

    # central difference, step 1e-5: truncation ~1e-10 relative to the row's largest rate
    scale = fd.abs().amax(-1, keepdim=True)
    assert float(((entropy_rate(spec, x, 2.0, v) - fd).abs() / scale).max()) < 1e-6


def test_trajectory_states_times_and_shapes():
    g = torch.Generator().manual_seed(3)
    spec = Heads.scalar([1.0], d=3, kind="softmax")
    x0 = init.uniform(batch=2, n=4, d=3, generator=g)
    t, X = trajectory_states(spec, x0, 1.0, 1.0, 5)
    np.testing.assert_allclose(t, [0.0, 0.25, 0.5, 0.75, 1.0], atol=1e-12)
    assert X.shape == (5, 2, 4, 3) and torch.equal(X[0], x0)
    with pytest.raises(ValueError, match="n_states"):
        trajectory_states(spec, x0, 1.0, 1.0, 1)


def test_energy_monotone_on_known_records():
    assert energy_monotone(torch.tensor([0.0, 0.5, 0.5, 1.0]))
    assert not energy_monotone(torch.tensor([0.0, 0.5, 0.4]))
    assert energy_monotone(np.array([[0.0, 1.0], [-1e-13, 1.0]]))  # within the 1e-12 slack
    assert not energy_monotone(np.array([[0.0, 1.0], [-1e-11, 1.0]]))
    with pytest.raises(ValueError, match="log_energy_series"):
        energy_monotone(torch.zeros(2, 2, 2))
