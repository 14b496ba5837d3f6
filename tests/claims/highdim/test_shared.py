"""The paper-C claims' shared theory side: a seed-independent state evolution is computed once per process
and reused by the other seeds and by controls that change only the simulation, with results equal to a
fresh computation."""

from __future__ import annotations

import dataclasses

import pytest

from attnlab.claims.highdim import _common, emergence, tokens
from attnlab.engine.points import Point


@pytest.fixture(autouse=True)
def _empty_memo():
    _common._SHARED.clear()
    yield
    _common._SHARED.clear()


def test_shared_computes_once_per_key_and_forgets_the_oldest(monkeypatch):
    calls = []

    def compute(x):
        calls.append(x)
        return [x]

    a = _common.shared(("k", 1), lambda: compute(1))
    assert _common.shared(("k", 1), lambda: compute(99)) is a  # the stored value, not recomputed
    assert _common.shared(("k", 2), lambda: compute(2)) == [2]
    assert calls == [1, 2]
    monkeypatch.setattr(_common, "SHARED_SIZE", 2)
    _common.shared(("k", 3), lambda: compute(3))  # evicts ("k", 1), the least recently used
    _common.shared(("k", 1), lambda: compute(1))
    assert calls == [1, 2, 3, 1]


def _point(mod, seed: int, **params) -> Point:
    return Point(mod.CLAIM.id, "quick", params, seed, mod.CLAIM.version, "cpu", mod.Params)


def test_a_seed_sharing_the_theory_gets_the_numbers_of_a_fresh_run():
    # a small emergence point (d = 12): the second seed reuses the first seed's state evolution; run again
    # with an empty memo it must give the same numbers exactly (the state evolution is deterministic and
    # seed-independent, so any difference would mean the key missed an input or the value was modified)
    kw = dict(alpha=0.2, d=12, gamma=1.0, noise=0.1, lam=0.01, modes=2, nodes=256, draws=2, max_steps=300)
    emergence.run(_point(emergence, 1, **kw))
    assert len(_common._SHARED) == 1
    warm = emergence.run(_point(emergence, 2, **kw))
    assert len(_common._SHARED) == 1  # shared, not solved again
    _common._SHARED.clear()
    cold = emergence.run(_point(emergence, 2, **kw))
    assert warm.metrics == cold.metrics
    for name in cold.arrays:
        assert (warm.arrays[name] == cold.arrays[name]).all()
    emergence.run(_point(emergence, 2, **{**kw, "alpha": 0.3}))  # another α is another key
    assert len(_common._SHARED) == 2


def test_a_control_changing_the_erm_only_shares_the_theory_row_and_a_changed_theory_does_not(monkeypatch):
    from attnlab.engine.points import Result

    calls = []

    def fake(point):  # stands in for theory_vs_adam.run (its state evolution is costly at T = 5)
        calls.append(point.p)
        return Result(metrics={"se_test_error": 0.1 * len(calls)})

    monkeypatch.setattr(tokens.tva, "run", fake)
    base = dict(side="theory", tokens=3, alpha=0.12, d=100, lam=0.01)
    r1 = tokens.run(_point(tokens, 0, **base))
    r1.metrics["se_test_error"] = -1.0  # a caller modifying its copy does not reach the shared value
    r2 = tokens.run(_point(tokens, 0, **base, sim_lam_scale=2.0))  # doubled_lam's theory row
    assert len(calls) == 1 and r2.metrics == {"se_test_error": 0.1}
    r3 = tokens.run(_point(tokens, 0, **{**base, "lam": 0.02}))  # the theory's own λ̃ changed
    assert len(calls) == 2 and r3.metrics == {"se_test_error": 0.2}
    assert dataclasses.replace(calls[0], lam=0.02) == calls[1]
