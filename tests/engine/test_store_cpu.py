"""The CPU time of each point: written beside the wall runtime, read by the cost estimates, and stores
written before it (schema 2, no column) still open, read and upgrade without losing a point."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from attnlab.engine import run_claims
from attnlab.engine import store as store_mod
from attnlab.engine.records import StoredPoint
from attnlab.engine.store import SCHEMA_VERSION, Store


def _point(
    i: int, runtime_s: float, cpu_s: float | None, claim: str = "t.a", version: int = 1
) -> StoredPoint:
    return StoredPoint(
        point_id=f"p{i}", claim_id=claim, profile="quick", params={"x": i}, seed=i, version=version,
        status="ok", metrics={"v": float(i)}, error=None, provenance={}, runtime_s=runtime_s, host="h",
        started="", ended="", arrays={}, cpu_s=cpu_s,
    )  # fmt: skip


def _v2_store(path) -> None:
    """A store as schema 2 wrote it: the same tables without ``points.cpu_s``, one point (wall 4 s)."""
    schema = store_mod._SCHEMA.replace(",\n    cpu_s      REAL\n", "\n")
    assert "cpu_s" not in schema  # the column really is absent
    con = sqlite3.connect(path)
    con.executescript(schema)
    con.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    con.execute(
        "INSERT INTO points VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        ("old", "t.a", "quick", '{"x":0}', 0, 1, "ok", '{"v":0.0}', None, "{}", 4.0, "h", "", ""),
    )
    con.commit()
    con.close()


def test_the_cpu_time_is_written_and_the_estimate_reads_it_before_the_wall_time(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        s.write_point(_point(1, runtime_s=5.0, cpu_s=2.0))  # a loaded machine: wall 2.5x the CPU time
        s.write_point(_point(2, runtime_s=3.0, cpu_s=1.0))
        s.write_point(_point(3, runtime_s=7.0, cpu_s=None, claim="t.b"))  # not measured: the wall time
        assert s.mean_runtimes("quick") == pytest.approx({"t.a": 1.5, "t.b": 7.0})
        rows = {r["point_id"]: r for r in s.all_points()}
        assert (rows["p1"]["cpu_s"], rows["p1"]["runtime_s"], rows["p3"]["cpu_s"]) == (2.0, 5.0, None)
    with Store(tmp_path / "s.sqlite", readonly=True) as s:
        assert s.mean_runtimes("quick") == pytest.approx({"t.a": 1.5, "t.b": 7.0})


def test_a_worker_records_the_cpu_time_of_its_points(tmp_path, testclaims):
    run_claims(testclaims.CLAIMS[:1], out=tmp_path, backend="serial", threads=1)
    with Store(tmp_path / "attnlab.sqlite", readonly=True) as s:
        pts = s.all_points()
    assert pts and all(p["cpu_s"] is not None and p["cpu_s"] >= 0 for p in pts)


def test_a_schema_2_store_is_read_as_it_is_and_upgraded_when_written(tmp_path):
    db = tmp_path / "attnlab.sqlite"
    _v2_store(db)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with Store(db, readonly=True) as s:  # read-only: the old layout, costs from the wall runtime
        assert s.mean_runtimes("quick") == {"t.a": 4.0}
        assert [(p["point_id"], p["cpu_s"]) for p in s.all_points()] == [("old", None)]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest  # never modified by a reader
    with Store(db) as s:  # written: upgraded in place, the old point kept with no CPU time
        s.write_point(_point(1, runtime_s=9.0, cpu_s=2.0))
        # the measured CPU time is preferred over the old row's wall time (inflated under load)
        assert s.mean_runtimes("quick") == pytest.approx({"t.a": 2.0})
    con = sqlite3.connect(db)
    cols = [r[1] for r in con.execute("PRAGMA table_info(points)")]
    version = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
    rows = dict(con.execute("SELECT point_id, cpu_s FROM points"))
    con.close()
    assert "cpu_s" in cols and version == str(SCHEMA_VERSION) == "3" and rows == {"old": None, "p1": 2.0}


def test_the_estimate_prices_a_claim_from_its_current_version_and_falls_back_on_older_ones(tmp_path):
    with Store(tmp_path / "s.sqlite") as s:
        s.write_point(_point(1, runtime_s=30.0, cpu_s=20.0, version=1))  # the old version cost 20 s a point
        s.write_point(_point(2, runtime_s=40.0, cpu_s=None, version=1))
        s.write_point(_point(3, runtime_s=3.0, cpu_s=2.0, version=2))
        s.write_point(_point(4, runtime_s=5.0, cpu_s=4.0, version=2))
        s.write_point(_point(5, runtime_s=8.0, cpu_s=None, claim="t.b", version=1))
        s.write_point(_point(6, runtime_s=6.0, cpu_s=5.0, claim="t.b", version=1))
        # no versions given: every version pooled, CPU rows preferred: (20 + 2 + 4) / 3
        assert s.mean_runtimes("quick") == pytest.approx({"t.a": 26.0 / 3, "t.b": 5.0})
        # t.a at version 2: only its points; t.b has none at version 3, so its older points price it
        got = s.mean_runtimes("quick", {"t.a": 2, "t.b": 3})
        assert got == pytest.approx({"t.a": 3.0, "t.b": 5.0})
        # a claim whose current version has only wall times is priced from them, not from an older CPU row
        s.write_point(_point(7, runtime_s=9.0, cpu_s=None, claim="t.b", version=3))
        assert s.mean_runtimes("quick", {"t.b": 3}) == pytest.approx({"t.a": 26.0 / 3, "t.b": 9.0})
