"""The cost of the points left: per claim, from stored runtimes at the run's profile, unknown never 0."""

from __future__ import annotations

import pytest

from attnlab.engine.costs import Estimate, Eta, estimate


def test_an_estimate_prices_each_claim_and_names_the_unknown():
    e = estimate({"slow": 10, "fast": 1000, "new": 5, "done": 0}, {"slow": 60.0, "fast": 0.01, "new": None})
    assert e.cpu_s == pytest.approx(610.0) and e.unknown == {"new": 5}
    assert e.text(workers=2) == "at least 5 min 05 s (+ 5 points of 1 claim(s) never timed)"
    assert Estimate(0.0, {"new": 5}).text(4) == "unknown (5 points of 1 claim(s) never timed)"
    assert Estimate(120.0).text(4) == "about 30 s"


def test_the_eta_is_priced_per_claim_not_by_the_rate_of_points():
    # 100 cheap points are done in a blink; 10 slow ones are left: a rate of points would say "0 s"
    eta = Eta({"cheap": 100, "slow": 10}, {"cheap": 0.001, "slow": 60.0}, workers=2)
    for _ in range(100):
        eta.done("cheap", 0.001)
    assert eta.remaining().cpu_s == pytest.approx(600.0)
    assert eta.text() == "ETA about 5 min 00 s"


def test_the_eta_learns_a_claim_it_had_no_cost_for():
    eta = Eta({"new": 4}, {}, workers=1)
    assert eta.text().startswith("ETA unknown (4 points of 1 claim(s)")
    eta.done("new", 2.0)
    assert eta.cost("new") == 2.0 and eta.text() == "ETA about 6 s"


def test_a_log_line_shows_the_cost_based_eta():
    from attnlab.cli.common import LogTicker

    t = LogTicker("computing", 10, unit="points", every=3600, eta=lambda: "ETA unknown (3 points)")
    try:
        t.update(advance=2)
        assert t.line().endswith(", ETA unknown (3 points)")
    finally:
        t.close()


def test_claim_costs_take_the_store_first_then_the_reference(monkeypatch):
    from attnlab.engine import reference_costs
    from attnlab.engine.costs import claim_costs

    monkeypatch.setattr(reference_costs, "REFERENCE", {"full": {"a": 2.0, "b": 3.0}})
    costs, by_ref = claim_costs({"a": 5.0, "c": 1.0}, "full")
    assert costs == {"a": 5.0, "b": 3.0, "c": 1.0} and by_ref == {"b"}
    assert claim_costs({}, "quick") == ({}, frozenset())


def test_the_reference_table_names_registered_claims_with_positive_costs():
    """A renamed or removed claim would otherwise be priced under a stale name."""
    import math

    from attnlab.claims import all_claims
    from attnlab.engine.reference_costs import REFERENCE

    ids = {c.id for c in all_claims()}
    assert set(REFERENCE) == {"quick", "full"}
    for profile, table in REFERENCE.items():
        assert set(table) <= ids, (profile, sorted(set(table) - ids))
        assert all(math.isfinite(v) and v > 0 for v in table.values()), profile


def test_the_eta_learns_from_cpu_time_and_divides_by_the_cpu_seconds_per_wall_second(monkeypatch):
    """A point measured at 10 s wall but 2 s CPU (a loaded machine) teaches a cost of 2 CPU s; the wall
    time left is that CPU time over the CPU seconds finished per wall second, capped at ``cap``."""
    from attnlab.engine import costs

    clock = [0.0]
    monkeypatch.setattr(costs.time, "monotonic", lambda: clock[0])
    eta = Eta({"a": 11}, {"a": 50.0}, workers=2, cap=8)
    eta.done("a", 10.0, cpu_s=2.0)
    assert eta.cost("a") == 2.0 and eta.remaining().cpu_s == pytest.approx(20.0)
    clock[0] = 1.0  # under 5 s: the assumed parallelism (2 workers)
    assert eta.parallelism() == 2.0
    clock[0] = 10.0  # 2 CPU s in 10 wall s: 0.2 CPU s per wall s (loaded cores) -> 20 / 0.2 = 100 s
    assert eta.parallelism() == pytest.approx(0.2) and eta.text() == "ETA about 1 min 40 s"
    for _ in range(9):  # 4 threads per worker: 20 CPU s in 10 wall s would be 2.0, capped at 8 above
        eta.done("a", 0.5, cpu_s=2.0)
    assert eta.parallelism() == pytest.approx(2.0) and eta.remaining().cpu_s == pytest.approx(2.0)
    assert Eta({"a": 1}, {}, workers=2).cap == 2.0  # no cap given: the workers
    eta2 = Eta({"a": 100}, {"a": 1.0}, workers=1, cap=4)
    eta2.done("a", 1.0, cpu_s=100.0)
    clock[0] = 20.0  # 100 CPU s in 10 wall s would be 10 per s: more than the 4 slots, capped
    assert eta2.parallelism() == 4.0


def _budget_point(n: int) -> dict:
    # D = 4 in heads of d_k in {1, 2, 4} (the divisors of 4 up to d - 1 = 4): three splits
    return {"n": n, "n_cap": 0, "max_d_k": 0, "d": 5, "D": 4, "reps": 2, "queries": 10}


def test_the_size_model_counts_a_budget_sweep_by_hand():
    """Counted by hand: 3 splits x 2 reps x 100 points x 4 head dimensions x (10 queries + 5 inputs)."""
    from attnlab.engine.costs import point_size

    assert point_size("ensemble.budget-law", _budget_point(100)) == 3 * 2 * 100 * 4 * (10 + 5)
    capped = {**_budget_point(1000), "n_cap": 100, "max_d_k": 2}  # n_cap: 100 points; d_k in {1, 2}
    assert point_size("ensemble.many-small-heads", capped) == 2 * 2 * 100 * 4 * (10 + 5)
    sweep = {"setting": [8, 3, 2, "sine", 1.0, 200, 1.5], "reps": 4, "queries": 30, "angles": [0, 45, 90]}
    assert point_size("ensemble.variance-needs-decorrelation", sweep) == 3 * 4 * 200 * 6 * (30 + 8)
    at_origin = {**sweep, "queries_at": "origin"}  # one query instead of 30
    assert point_size("ensemble.variance-needs-decorrelation", at_origin) == 3 * 4 * 200 * 6 * (1 + 8)
    assert point_size("ensemble.decorrelation-optimal", {"setting": [8, 3, 2, "bump", 0.5, 500, 1.5]}) is None


def test_a_claim_with_a_size_model_is_priced_point_by_point_on_a_synthetic_grid(monkeypatch):
    """Priced at k = 1e-3 CPU s per unit, points at n = 100 and 1000 cost 36 and 360 CPU s: the points
    left are priced at their mean, 198, not at the table's whole-grid constant; a stored runtime wins."""
    from attnlab.engine import reference_costs
    from attnlab.engine.costs import claim_costs

    monkeypatch.setattr(reference_costs, "REFERENCE", {"full": {"ensemble.budget-law": 99.0, "x": 2.0}})
    monkeypatch.setattr(reference_costs, "PER_SIZE", {"full": {"ensemble.budget-law": 1e-3}})
    left = {"ensemble.budget-law": [_budget_point(100), _budget_point(1000)], "x": [{}]}
    costs, by_ref = claim_costs({}, "full", left)
    assert costs == {"ensemble.budget-law": pytest.approx(198.0), "x": 2.0}
    assert by_ref == {"ensemble.budget-law", "x"}
    assert estimate({"ensemble.budget-law": 2, "x": 3}, costs).cpu_s == pytest.approx(36 + 360 + 6)
    assert claim_costs({}, "full")[0]["ensemble.budget-law"] == 99.0  # no points given: the table
    assert claim_costs({"ensemble.budget-law": 5.0}, "full", left)[0]["ensemble.budget-law"] == 5.0


def test_the_reference_constant_of_a_modelled_claim_is_its_model_over_its_whole_full_grid():
    """The table's constant must be k times the mean size over the claim's current full grid (written to
    4 significant digits: 0.1%); a grid changed without refitting the table fails here."""
    from attnlab.claims import all_claims
    from attnlab.engine.costs import SIZE_MODELS, point_size
    from attnlab.engine.reference_costs import PER_SIZE, REFERENCE

    claims = {c.id: c for c in all_claims()}
    assert set(PER_SIZE["full"]) <= set(SIZE_MODELS) and PER_SIZE["full"]
    for cid, k in PER_SIZE["full"].items():
        sizes = [point_size(cid, p.params) for p in claims[cid].points("full", 0, None, "cpu")]
        assert REFERENCE["full"][cid] == pytest.approx(k * sum(sizes) / len(sizes), rel=1e-3), cid
