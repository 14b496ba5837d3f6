"""highdim.spectrum: atom and law against their predictions with tolerances from the seeds' spread, the
resolving power of both predictions, the theory side's bulk split, and thin data left inconclusive."""

from __future__ import annotations

import numpy as np

from attnlab.claims.highdim.spectrum import CLAIM
from attnlab.engine.power import resolving_power
from attnlab.engine.protocol import Row
from attnlab.report.figures.highdim import FIGURES


def _rows(seeds=3, d=200, atom=0.35, law_scale=1.0):
    # non-zero eigenvalues drawn from uniform(0, 2·law_scale) (2/3 of them) plus an atom; the predicted
    # law is uniform(0, 2) tabulated, the predicted atom 0.35
    rows = []
    x = np.linspace(0, 2, 101)
    for rep in range(seeds):
        rng = np.random.default_rng(rep)
        k = round(atom * d) + (rep - 1)  # the atom fluctuates by an eigenvalue between seeds
        ev = np.sort(np.concatenate([np.zeros(k), rng.uniform(0, 2 * law_scale, d - k) + 1e-2]))
        m = {"atom_theory": 0.35, "atom_sim": k / d, "pieces": 1}
        arrays = {"eigenvalues": ev, "pred_x": x, "pred_density": np.full_like(x, 0.65 / 2)}
        rows.append(
            Row("x", {"side": "simulation", "d": d, "alpha": 0.1, "rep": rep}, "ok", m, None, 0.0, arrays)
        )
    rows.append(Row("x", {"side": "theory", "alpha": 40.0, "rep": 0}, "ok", {"pieces": 2}))
    return rows


def test_holds_on_draws_from_the_predicted_law_and_reports_the_split():
    v = CLAIM.decide(_rows())
    assert v.status == "holds" and v.numbers["seeds"] == 3 and v.numbers["pieces_a40.0"] == 2
    assert v.numbers["atom_tol"] >= 2 / 200 and v.numbers["ks_max"] <= v.numbers["ks_tol"]
    assert "seeds' own spread" in v.note
    assert FIGURES[CLAIM.id](_rows())["spectrum"].axes[0].get_xlabel()


def test_fails_on_a_wrong_law_or_atom():
    assert CLAIM.decide(_rows(law_scale=1.5)).status == "fails"
    assert CLAIM.decide(_rows(atom=0.25)).status == "fails"


def test_power_on_atom_and_scale():
    pw = resolving_power(CLAIM, _rows())
    # tolerance max(2 SE, 2/d) = 0.01 on an atom of 0.35: a 5% shift (0.0175) flips it
    assert pw.flips["atom"]["+"] is not None and pw.flips["atom"]["+"] <= 0.05
    scale = pw.flips["eigenvalue_scale"]
    assert scale["+"] is not None and scale["+"] <= 0.25 and scale["-"] is not None and scale["-"] <= 0.25


def test_one_seed_is_outside_and_quick_is_the_issue_setting():
    v = CLAIM.decide(_rows(seeds=1))
    assert v.status == "inconclusive" and "seeds" in v.regime
    pts = [p.p for p in CLAIM.points("quick")]
    sim = [p for p in pts if p.side == "simulation"]
    assert {p.d for p in sim} == {200} and len(sim) >= 3 and all(p.alpha <= 1 for p in sim)
    assert {4.0, 40.0} <= {p.alpha for p in pts if p.side == "theory"}


def test_real_points():
    from attnlab.highdim import ks_to_tabulated

    pts = CLAIM.points("quick", overrides={"d": 12, "max_steps": 30})
    sim = next(p for p in pts if p.p.side == "simulation")
    res = CLAIM.run(sim)
    ev = res.arrays["eigenvalues"]
    nz = ev[ev > 1e-3]
    assert res.metrics["atom_sim"] == 1 - nz.size / 12
    # the stored KS is the one the verdict recomputes from the stored arrays (same tabulated law)
    ks = ks_to_tabulated(nz, res.arrays["pred_x"], res.arrays["pred_density"])
    assert abs(res.metrics["ks"] - ks) < 1e-12
    th = next(p for p in pts if p.p.side == "theory" and p.p.alpha == 40.0)
    assert CLAIM.run(th).metrics["pieces"] == 2  # the bulk has split at α = 40
