"""Nothing lost: damaged, empty, foreign and read-only stores, the writer lock, orphan workers,
and a report built from the store alone."""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.engine import run_claims
from attnlab.engine.runner import StoreLocked, store_lock
from attnlab.engine.store import SCHEMA_VERSION, Store, StoreError

HERE = Path(__file__).resolve().parent


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture()
def stored(tmp_path, testclaims):
    """A real store with the test claims' quick points."""
    run_claims(testclaims.CLAIMS, out=tmp_path, backend="serial", threads=1)
    return tmp_path


def test_damaged_truncated_and_empty_stores_are_refused_untouched(tmp_path, stored):
    db = stored / "attnlab.sqlite"
    with sqlite3.connect(db) as con:  # fold the WAL in so that truncation cuts real pages
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cases = {
        "garbage": b"this is not a database" * 100,
        "truncated": db.read_bytes()[: db.stat().st_size // 3],
        "empty": b"",
    }
    for name, data in cases.items():
        bad = tmp_path / name / "attnlab.sqlite"
        bad.parent.mkdir()
        bad.write_bytes(data)
        before = _digest(bad)
        with pytest.raises(StoreError) as e:
            with Store(bad) as s:  # a truncated file may open; reading it must then fail cleanly
                s.all_points()
        msg = str(e.value)
        assert "\n" not in msg and str(bad) in msg, msg
        assert _digest(bad) == before, f"{name}: the store was modified"
        assert not (bad.parent / "attnlab.sqlite-wal").exists() or name == "truncated"


def test_a_store_of_a_newer_schema_is_refused(tmp_path, stored):
    db = stored / "attnlab.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(
        StoreError, match=rf"schema version {SCHEMA_VERSION + 1}, this attnlab reads up to {SCHEMA_VERSION}"
    ):
        Store(db)


def test_read_only_store_never_writes(stored):
    db = stored / "attnlab.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = (_digest(db), sorted(p.name for p in stored.iterdir()))
    with Store(db, readonly=True) as s:
        assert len(s.all_points()) == 14 and s.latest_verdicts()
    assert (_digest(db), sorted(p.name for p in stored.iterdir())) == before


def test_second_writer_is_refused_with_one_line(tmp_path, testclaims):
    with store_lock(tmp_path):
        with pytest.raises(StoreLocked, match=r"^--out: expected a store no other run is writing to"):
            run_claims(testclaims.CLAIMS[:1], out=tmp_path, backend="serial", threads=1)
    assert run_claims(testclaims.CLAIMS[:1], out=tmp_path, backend="serial", threads=1).computed == 8


def test_report_is_built_from_the_store_alone(tmp_path, monkeypatch):
    """With the claim registry emptied, the report still shows the stored verdicts and power."""
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_powerclaims")
    import attnlab_powerclaims as pc

    run_claims(pc.CLAIMS, out=tmp_path, backend="serial", threads=1)
    run_claims(pc.CLAIMS[:1], out=tmp_path, backend="serial", threads=1, overrides={"test.mean": {"mu": 1.2}})
    import attnlab.claims as registry
    from attnlab.report import build_report

    monkeypatch.setattr(registry, "_modules", lambda: [])
    monkeypatch.delenv("ATTNLAB_EXTRA_CLAIMS")
    assert registry.all_claims() == []
    rep = build_report(tmp_path)
    by = {o.id: o for o in rep.outcomes}
    assert by["test.mean"].verdict.status == "holds" and "controls 2/2" in by["test.mean"].power.label
    assert by["test.mean"].verdict.note.endswith("within 3% of 1.000")  # prose rendered at decision time
    assert by["test.vacuous"].power.cannot_fail
    (var,) = rep.variants
    assert var.title == "test.mean [mu=1.2]" and var.verdict.status == "fails"
    html = rep.html.read_text()
    assert "cannot fail" in html and "Verdict board" in html
    assert "test.mean [mu=1.2]" in html.replace("<wbr>", "")  # the board may wrap ids after dots
    assert "shifted" in html and "a mean of 1.5 is 50% off the prediction" in html
    assert "Not testable from the statements" in html and "a remark on the mean" in html


def test_power_command_reads_the_store(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from attnlab.cli.main import app

    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("ATTNLAB_EXTRA_CLAIMS", "attnlab_powerclaims")
    import attnlab_powerclaims as pc

    run_claims(pc.CLAIMS, out=tmp_path, backend="serial", threads=1)
    res = CliRunner().invoke(app, ["claims", "power", "--all", "--out", str(tmp_path), "--json"])
    assert res.exit_code == 0, res.output
    import json

    d = {c["id"]: c for c in json.loads(res.stdout)["claims"]}
    assert d["test.vacuous"]["cannot_fail"] and d["test.vacuous"]["label"] == "cannot fail"
    assert d["test.mean"]["controls"]["shifted"]["got"] == "fails"


@pytest.mark.slow
def test_workers_exit_when_the_driver_is_killed(tmp_path):
    """SIGKILL the driver of a process-pool run: its workers must not outlive it."""
    psutil = pytest.importorskip("psutil")
    from clitools import cli_env

    proc = subprocess.Popen(
        [sys.executable, "-m", "attnlab.cli.main", "claims", "run", "test.value", "--out", str(tmp_path),
         "--backend", "process", "--workers", "2", "--set", "sleep=20"],
        env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    driver = psutil.Process(proc.pid)

    def workers() -> list:
        """The driver's pool workers (spawned interpreters); short-lived children (git) are skipped."""
        out = []
        for k in driver.children(recursive=True):
            try:
                if "spawn_main" in " ".join(k.cmdline()):
                    out.append(k)
            except (psutil.Error, OSError):  # it ended while we looked
                continue
        return out

    deadline = time.time() + 60
    kids: list = []
    while time.time() < deadline and len(kids) < 2:
        kids = workers()
        time.sleep(0.5)
    assert len(kids) >= 2, "the workers never started"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gone, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive, f"{len(alive)} process(es) outlived the driver: {[p.pid for p in alive]}"
