"""``reproduce --dry-run`` prices points from runtimes stored at the same profile; unknown is never 0."""

from __future__ import annotations

import json


def test_dry_run_prices_full_points_only_from_full_runtimes(cli):
    """A quick store does not price the full profile (its points cost more): those claims are unknown."""
    r = cli("reproduce", "--only", "test.value", "--out", "r", "--dry-run")
    code, out = r.code, r.stdout
    assert code == 0 and "estimate: unknown" in out and " 0 CPU s" not in out, out
    cli("claims", "run", "test.value", "--out", "r", "--backend", "serial")
    out = cli(
        "reproduce", "--only", "test.value", "--out", "r", "--dry-run", "--json", "--profile", "full"
    ).stdout
    d = json.loads(out)
    assert d["unknown"] == ["test.value"] and d["estimate_cpu_s"] is None and d["to_compute"] > 0
    out = cli("reproduce", "--only", "test.value", "--out", "r", "--dry-run", "--json").stdout
    d = json.loads(out)
    assert d["unknown"] == [] and d["to_compute"] == 0 and d["estimate_cpu_s"] == 0


def test_a_claim_never_run_here_is_priced_at_the_reference_cost(cli):
    """No store at all: a claim of the reference table is priced from it (and says so), not unknown."""
    from attnlab.engine.reference_costs import REFERENCE

    cid = "flow.beta-star-onset"
    d = json.loads(
        cli("reproduce", "--only", cid, "--out", "r", "--dry-run", "--json", "--profile", "full").stdout
    )
    (row,) = d["claims"]
    assert row["cost_source"] == "reference" and row["mean_runtime_s"] == REFERENCE["full"][cid]
    assert d["unknown"] == [] and d["estimate_cpu_s"] == round(REFERENCE["full"][cid] * row["to_compute"], 1)
    out = cli("reproduce", "--only", cid, "--out", "r", "--dry-run", "--profile", "full").stdout
    assert "(ref)" in out and "reference machine" in out
