"""flow.entropy (general reading) and flow.entropy-equiangular (Thm 27): one rule, its branch, controls."""

import math

import torch

from attnlab.claims.flow.entropy import CLAIM
from attnlab.claims.flow.entropy_equiangular import CLAIM as EQUI
from attnlab.dynamics import init
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import CONTROL_KEY, Row


def _traj(rise, fall=0.0, final=0.99, control="", beta=1.0):
    params = {
        "part": "trajectories",
        "beta": beta,
        **({CONTROL_KEY: control, "start": "x"} if control else {}),
    }
    m = {
        "rise_fraction": rise,
        "trajectories": 32,
        "fall_fraction": fall,
        "any_fall_fraction": fall,
        "max_drop": 0.01,
        "final_min": final,
        "final_mean": final,
    }
    return Row(f"{control}{beta}", params, "ok", m)


def test_one_branch_decides_test_and_controls():
    ident = Row("i", {"part": "identity", "beta": 1.0}, "ok", {"max_rel_err": 1e-13, "states": 40})
    v = CLAIM.decide([ident, _traj(1.0)])
    assert v.status == "holds" and v.branch == "rises to log n" and v.parts == {"identity": "holds"}
    assert CLAIM.decide([ident, _traj(0.96)]).status == "holds"  # ≥ 95% rise
    assert CLAIM.decide([ident, _traj(0.8, fall=0.2)]).status == "fails"  # falls too often
    assert CLAIM.decide([ident, _traj(0.9, final=0.7)]).status == "fails"  # stalls far from log n
    bad = Row("i", {"part": "identity", "beta": 1.0}, "ok", {"max_rel_err": 1e-3, "states": 40})
    assert CLAIM.decide([bad, _traj(1.0)]).branch == "identity"
    # the general reading fails on uniform starts; its positive control holds through the same branch
    rows = [ident, _traj(0.8, fall=0.14), _traj(1.0, control="equiangular-start")]
    pw = resolving_power(CLAIM, rows)
    c = pw.controls["equiangular-start"]
    assert pw.base == "fails" and c["got"] == "holds" and c["same_branch"] and not pw.cannot_fail
    # the theorem's claim holds near equiangular; its negative control fails through the same branch
    rows = [_traj(1.0), _traj(0.0, final=0.8, control="two-clusters")]
    pw = resolving_power(EQUI, rows)
    c = pw.controls["two-clusters"]
    assert pw.base == "holds" and c["got"] == "fails" and c["same_branch"] and not pw.cannot_fail


def test_init_clusters_and_jitter():
    g = torch.Generator().manual_seed(0)
    x = init.clusters(batch=3, n=6, d=4, spread=0.0, generator=g)
    assert torch.allclose(x.norm(dim=-1), torch.ones(3, 6, dtype=torch.float64))
    # spread 0, two antipodal centres: tokens 0, 2, 4 coincide and are opposite to 1, 3, 5
    assert torch.allclose(x[:, 0], x[:, 2]) and torch.allclose(x[:, 1], -x[:, 0])
    e = init.equiangular(batch=2, n=5, d=5, gamma=0.0, generator=g)
    j = init.jittered(e, 0.05, generator=g)
    assert torch.allclose(j.norm(dim=-1), torch.ones(2, 5, dtype=torch.float64))
    G = j @ j.transpose(1, 2)  # no longer equiangular, but near: off-diagonal |γ| ≪ 1
    off = G[:, ~torch.eye(5, dtype=torch.bool)]
    assert off.abs().max() < 0.5 and off.std() > 1e-3
    assert torch.equal(init.jittered(e, 0.0, generator=g), e / e.norm(dim=-1, keepdim=True))


def test_equiangular_start_never_falls():
    p = next(
        p
        for p in CLAIM.points("quick", overrides={"batch": 2, "t1": 4.0, "n": 8})
        if p.control == "equiangular-start" and p.params["part"] == "trajectories"
    )
    m = CLAIM.run(p).metrics
    assert m["any_fall_fraction"] == 0.0 and m["final_mean"] > m["start_mean"]
    assert math.isfinite(m["final_min"]) and m["trajectories"] == 2
