"""The command line: strict JSON on stdout, one-line errors with status 2, the run commands."""

from __future__ import annotations

import csv

from clitools import parse_json, run_cli


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("attnlab ")


def test_claims_list_json_lists_every_registered_claim():
    r = run_cli("claims", "list", "--json")
    assert r.returncode == 0, r.stderr
    data = parse_json(r.stdout)
    ids = [c["id"] for c in data["claims"]]
    assert "ensemble.nw-identity" in ids and "test.value" in ids
    assert len(ids) == len(set(ids))
    for c in data["claims"]:
        assert c["kind"] in ("identity", "theorem", "finding")
        assert c["points"]["quick"] >= 1 and c["points"]["full"] >= 1


def test_claims_run_json_then_cached_then_results_export(tmp_path):
    out = tmp_path / "res"
    r = run_cli("claims", "run", "test.value", "--out", str(out), "--backend", "serial", "--json")
    assert r.returncode == 0, r.stderr
    d = parse_json(r.stdout)
    assert d["summary"]["computed"] == 8 and d["claim"]["verdict"] == "holds"
    r2 = run_cli("claims", "run", "test.value", "--out", str(out), "--backend", "serial", "--json")
    assert parse_json(r2.stdout)["summary"] == {
        **d["summary"],
        "cached": 8,
        "computed": 0,
        "wall_s": parse_json(r2.stdout)["summary"]["wall_s"],
        "per_claim": {"test.value": {"points": 8, "cached": 8}},
    }
    lst = parse_json(run_cli("results", "list", "--out", str(out), "--json").stdout)
    assert lst["points"] == 8 and lst["groups"][0]["claim_id"] == "test.value"
    path = tmp_path / "rows.csv"
    r3 = run_cli("results", "export", "--csv", str(path), "--out", str(out), "--json")
    assert r3.returncode == 0, r3.stderr
    assert parse_json(r3.stdout)["rows"] == 8
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 8 and {"point_id", "param.x", "metric.value", "status"} <= set(rows[0])


def test_failed_point_json_is_strict(tmp_path):
    r = run_cli("claims", "run", "test.flaky", "--out", str(tmp_path), "--backend", "serial", "--json")
    assert r.returncode == 0, r.stderr
    d = parse_json(r.stdout)
    assert d["claim"]["failed"] == 1 and d["claim"]["verdict"] == "fails"


def test_emit_json_replaces_non_finite_with_null_and_note(capsys):
    from attnlab.cli.common import emit_json

    emit_json({"a": float("inf"), "b": [1.0, float("nan")], "note": "x"})
    d = parse_json(capsys.readouterr().out)
    assert d["a"] is None and d["b"] == [1.0, None]
    assert d["note"].startswith("x; a is inf") and "b[1] is nan" in d["note"]
