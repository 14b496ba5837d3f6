"""The run commands end to end, in process: typed --set, variants, dry run, power, read-only stores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

HERE = Path(__file__).resolve().parent


@pytest.fixture()
def cli(tmp_path, monkeypatch):
    from attnlab.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_powerclaims")
    monkeypatch.setenv("PYTHONPATH", str(HERE))
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def run(*argv: str):
        with runner.isolation() as (out, err, _):
            code = main([str(a) for a in argv])
            sys.stdout.flush()
            sys.stderr.flush()
            return code, out.getvalue().decode(), err.getvalue().decode()

    return run


def test_mistyped_set_is_status_2_and_stores_nothing(cli, tmp_path):
    for args, msg in (
        (["--set", "n=abc"], "--set n: expected int, got 'abc'"),
        (["--set", "rep=0"], "--set rep: expected an integer >= 1"),
        (["--set", "nosuch=1"], "--set: expected a parameter of"),
        (["--set", "mode=c"], "--set mode: expected one of 'a', 'b', got 'c'"),
    ):
        code, out, err = cli("claims", "run", "test.mean", "--out", "r", "--backend", "serial", *args)
        assert code == 2, (args, err)
        assert msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r" / "attnlab.sqlite").exists()


def test_override_is_a_titled_variant_beside_the_verdict(cli):
    code, out, err = cli("claims", "run", "test.mean", "--out", "r", "--backend", "serial", "--json")
    assert code == 0 and json.loads(out)["claim"]["variant"] == ""
    code, out, err = cli("claims", "run", "test.mean", "--out", "r", "--backend", "serial", "--set", "mu=1.2")
    assert code == 0 and "test.mean (quick; variant mu=1.2)" in out
    code, out, err = cli("report", "--out", "r", "--json")
    d = json.loads(out)
    assert [c["verdict"] for c in d["claims"] if c["id"] == "test.mean"] == ["holds"]
    assert [(v["variant"], v["verdict"]) for v in d["variants"]] == [("mu=1.2", "fails")]


def test_reproduce_json_carries_the_variant_a_set_ran(cli):
    # a --set run is a variant: its verdict must reach the one JSON object, not only report.md
    code, out, err = cli("reproduce", "--only", "test.mean", "--out", "r", "--backend", "serial", "--json")
    assert code == 0 and json.loads(out)["variants"] == [], err
    code, out, err = cli(
        "reproduce", "--only", "test.mean", "--out", "r", "--backend", "serial", "--set", "mu=1.2", "--json"
    )
    d = json.loads(out)
    assert code == 0 and d["summary"]["variants"] == {"test.mean": "mu=1.2"}, err
    assert [c["verdict"] for c in d["claims"] if c["id"] == "test.mean"] == ["holds"]
    got = [(v["id"], v["variant"], v["verdict"]) for v in d["variants"]]
    assert got == [("test.mean", "mu=1.2", "fails")]


def test_dry_run_counts_points_and_estimates_from_stored_runtimes(cli):
    code, out, _ = cli("reproduce", "--only", "test.", "--out", "r", "--dry-run", "--json")
    d = json.loads(out)
    assert (
        code == 0
        and d["points"] == 6 + 2
        and d["to_compute"] == 8
        and d["unknown"] == ["test.mean", "test.vacuous"]
    )
    assert not Path("r/attnlab.sqlite").exists()  # a dry run writes nothing
    cli("claims", "run", "test.mean", "--out", "r", "--backend", "serial")
    code, out, _ = cli("reproduce", "--only", "test.", "--out", "r", "--dry-run", "--json", "--set", "rep=4")
    d = json.loads(out)
    mean = {c["id"]: c for c in d["claims"]}["test.mean"]
    # test and two controls, 4 replicates each; replicates 0 and 1 of each are stored
    assert mean["points"] == 4 * 3 and mean["stored"] == 2 * 3 and mean["to_compute"] == 6
    assert mean["estimate_cpu_s"] == pytest.approx(mean["mean_runtime_s"] * 6)


def test_power_command_table_and_errors(cli):
    code, out, err = cli("claims", "power", "--all", "--out", "nowhere")
    assert code == 2 and "--out: expected a folder holding attnlab.sqlite" in err
    cli("reproduce", "--only", "test.", "--out", "r", "--backend", "serial")
    code, out, err = cli("claims", "power", "test.mean", "--out", "r")
    assert code == 0 and "controls 2/2" in out
    code, out, err = cli("claims", "power", "--out", "r")
    assert code == 2 and "one claim id or --all" in err


def test_power_names_a_stored_run_of_an_older_claim_version_stale(cli):
    # rows measured by an older version of a claim may lack what the present rule reads: power says the run
    # is stale instead of re-deciding it (a crash, or a verdict the stored rows never supported)
    import sqlite3

    cli("claims", "run", "test.mean", "--out", "r", "--backend", "serial")
    with sqlite3.connect("r/attnlab.sqlite") as con:
        con.execute("UPDATE verdicts SET version = version - 1 WHERE claim_id = 'test.mean'")
    code, out, err = cli("claims", "power", "--all", "--out", "r", "--json")
    entry = {c["id"]: c for c in json.loads(out)["claims"]}["test.mean"]
    assert code == 0 and entry["label"] == "stale" and entry["verdict"] is None
    assert "re-run it" in entry["reason"] and entry["stored_version"] == entry["version"] - 1
    code, out, err = cli("claims", "power", "test.mean", "--out", "r")
    assert code == 0 and "stale" in out
