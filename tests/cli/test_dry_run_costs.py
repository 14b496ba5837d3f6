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
