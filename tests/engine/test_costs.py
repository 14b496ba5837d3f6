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
