"""flow.entropy: the rule on synthetic rows, its two controls, the clustered start, one real point."""

import math

import torch

from attnlab.claims.flow.entropy import CLAIM
from attnlab.dynamics import init
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row


def _traj(fall, final, control="", beta=1.0):
    params = {"part": "trajectories", "beta": beta, **({"control": control, "start": "x"} if control else {})}
    m = {
        "fall_fraction": fall,
        "any_fall_fraction": fall,
        "max_drop": 0.01,
        "final_min": final,
        "final_mean": final,
    }
    return Row(f"{control}{beta}", params, "ok", m)


def test_rule_and_controls():
    ident = Row("i", {"part": "identity", "beta": 1.0}, "ok", {"max_rel_err": 1e-13, "states": 40})
    assert CLAIM.decide([ident, _traj(0.0, 0.99)]).status == "holds"
    assert CLAIM.decide([ident, _traj(0.2, 0.99)]).status == "fails"  # falls too often
    assert CLAIM.decide([ident, _traj(0.0, 0.7)]).status == "fails"  # stalls far from log n
    bad = Row("i", {"part": "identity", "beta": 1.0}, "ok", {"max_rel_err": 1e-3, "states": 40})
    assert CLAIM.decide([bad, _traj(0.0, 0.99)]).status == "fails"
    rows = [ident, _traj(0.2, 0.8), _traj(0.0, 1.0, "equiangular-start"), _traj(0.0, 0.8, "two-clusters")]
    pw = resolving_power(CLAIM, rows)
    assert all(c["as_designed"] for c in pw.controls.values()) and not pw.cannot_fail


def test_clusters_init():
    x = init.clusters(batch=3, n=6, d=4, spread=0.0, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(x.norm(dim=-1), torch.ones(3, 6, dtype=torch.float64))
    # spread 0, two antipodal centres: tokens 0, 2, 4 coincide and are opposite to 1, 3, 5
    assert torch.allclose(x[:, 0], x[:, 2]) and torch.allclose(x[:, 1], -x[:, 0])


def test_equiangular_start_never_falls():
    p = next(
        p
        for p in CLAIM.points("quick", overrides={"batch": 2, "t1": 4.0, "n": 8})
        if p.control == "equiangular-start" and p.params["part"] == "trajectories"
    )
    m = CLAIM.run(p).metrics
    assert m["any_fall_fraction"] == 0.0 and m["final_mean"] > m["start_mean"]
    assert math.isfinite(m["final_min"])
