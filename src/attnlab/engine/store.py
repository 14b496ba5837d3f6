"""The results store: SQLite (standard library, WAL mode) at ``<out>/attnlab.sqlite``.

Tables
------
points     one row per computed point: claim id, profile, canonical params (JSON, sorted keys),
           point id = sha256(claim id, canonical params, seed, claim version), seed, version,
           status (``ok`` | ``failed``), metrics (JSON), error, provenance (JSON), runtime (wall s),
           host, start and end times (UTC, ISO 8601), and the worker's CPU seconds for the point
           (``cpu_s``, schema 3; NULL in rows written before it).
artifacts  named arrays for figures: (point id, name, compressed npz blob).
runs       one row per invocation of a claim: which point ids it asked for, the root seed, the
           overrides and the profile.
verdicts   one row per finished run: the claim's metadata as it was (kind, paper, statement, version),
           the variant (its ``--set`` overrides; '' for the profile's own setting), status, deciding
           numbers, tolerance, note, regime and resolving power. The report reads these alone, so a
           store's report stays the same after the claim's code changes.
meta       the schema version.

Schema versions: 2, the tables above without ``points.cpu_s``; 3 adds that column. A store of an older
schema is read as it is (its points have no CPU time: costs fall back to the wall runtime) and, when
opened for writing, upgraded in place (``ALTER TABLE ... ADD COLUMN``, old rows keep NULL); a store of
a newer schema is refused.

Only the driver process writes (worker processes and Ray tasks return rows to it), one
transaction per point, so an interrupted run keeps every point that finished.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnlab.core.seeding import canonical_json
from attnlab.engine.protocol import Row
from attnlab.engine.protocol import jsonable as _jsonable
from attnlab.engine.records import RunRecord, StoredPoint, StoredVerdict, now_utc, pack_arrays, unpack_array
from attnlab.engine.store_errors import StoreError, StoreFull, check_wal_of, writes

__all__ = ["SCHEMA_VERSION", "Store", "StoreError", "StoreFull", "StoredPoint", "RunRecord", "StoredVerdict"]

#: Bumped when a table changes; a store written by another schema is refused with a clear line.
SCHEMA_VERSION = 3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    point_id   TEXT PRIMARY KEY,
    claim_id   TEXT NOT NULL,
    profile    TEXT NOT NULL,
    params     TEXT NOT NULL,
    seed       INTEGER NOT NULL,
    version    INTEGER NOT NULL,
    status     TEXT NOT NULL,
    metrics    TEXT,
    error      TEXT,
    provenance TEXT,
    runtime_s  REAL,
    host       TEXT,
    started    TEXT,
    ended      TEXT,
    cpu_s      REAL
);
CREATE INDEX IF NOT EXISTS points_claim ON points(claim_id, profile);
CREATE TABLE IF NOT EXISTS artifacts (
    point_id TEXT NOT NULL,
    name     TEXT NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (point_id, name)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    claim_id   TEXT NOT NULL,
    profile    TEXT NOT NULL,
    root_seed  INTEGER NOT NULL,
    overrides  TEXT NOT NULL,
    point_ids  TEXT NOT NULL,
    backend    TEXT,
    started    TEXT,
    ended      TEXT
);
CREATE TABLE IF NOT EXISTS verdicts (
    run_id      INTEGER PRIMARY KEY,
    claim_id    TEXT NOT NULL,
    variant     TEXT NOT NULL,
    profile     TEXT NOT NULL,
    version     INTEGER NOT NULL,
    claim       TEXT NOT NULL,
    status      TEXT NOT NULL,
    numbers     TEXT NOT NULL,
    tolerance   TEXT,
    note        TEXT,
    regime      TEXT,
    power       TEXT,
    points      INTEGER,
    failed      INTEGER,
    missing     INTEGER,
    runtime_s   REAL,
    created     TEXT
);
CREATE INDEX IF NOT EXISTS verdicts_claim ON verdicts(claim_id, variant);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class Store:
    """The SQLite results store of one output directory.

    Parameters
    ----------
    path : str or Path
        The database file (``<out>/attnlab.sqlite``); its folder is created if needed.
    readonly : bool
        Open for reading only (``results``, ``report --out elsewhere``): works on an archived copy in
        a read-only folder, and never writes, not even the WAL's side files.

    A damaged or truncated file, an empty (0-byte) file and a store of another schema version are
    refused with :class:`StoreError`; the file is never modified.
    """

    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        exists = self.path.exists()
        if exists and self.path.is_dir():
            raise StoreError(f"store: expected a SQLite file, got a folder {str(self.path)!r}")
        if exists and self.path.stat().st_size == 0:
            raise StoreError(
                f"store: {str(self.path)!r} is empty (0 bytes), not an attnlab store; "
                "remove it to start a new one"
            )
        if exists:
            check_wal_of(self.path)
        if readonly:
            if not exists:
                raise StoreError(f"store: expected an attnlab store, no file at {str(self.path)!r}")
            import os

            # in a folder we may not write to (an archived copy), SQLite may not create the WAL's
            # shared-memory file either, and without a log (no run writing, every point in the file)
            # reading creates no side file: read the file as immutable then
            wal = self.path.with_name(self.path.name + "-wal")
            writable = os.access(self.path.parent, os.W_OK) and os.access(self.path, os.W_OK)
            quiet = not writable or not wal.exists()
            uri = self.path.resolve().as_uri() + ("?mode=ro&immutable=1" if quiet else "?mode=ro")
            self._con = sqlite3.connect(uri, uri=True, timeout=60.0, isolation_level=None)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._con = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
        try:
            tables = {r[0] for r in self._con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if exists and tables and "points" not in tables:
                raise StoreError(f"store: {str(self.path)!r} is a SQLite file but not an attnlab store")
            version = None
            if "meta" in tables:
                row = self._con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
                version = int(row[0]) if row else None
            if version is not None and version > SCHEMA_VERSION:
                raise StoreError(
                    f"store: {str(self.path)!r} has schema version {version}, this attnlab reads "
                    f"up to {SCHEMA_VERSION}; upgrade attnlab or use another --out"
                )
            if not readonly:
                self._con.execute("PRAGMA journal_mode=WAL")
                self._con.execute("PRAGMA synchronous=NORMAL")
                self._con.executescript(_SCHEMA)
                if "cpu_s" not in self._columns("points"):  # schema 2 -> 3: old rows keep NULL
                    self._con.execute("ALTER TABLE points ADD COLUMN cpu_s REAL")
                self._con.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                )
            self._tables = tables | ({"verdicts", "meta", "runs", "artifacts"} if not readonly else set())
            #: whether the points carry their CPU time (schema >= 3; an older store read as it is does not)
            self._has_cpu = "cpu_s" in self._columns("points")
        except sqlite3.DatabaseError as e:
            self._con.close()
            raise StoreError(
                f"store: {str(self.path)!r} is damaged or not a SQLite file ({e}); it was left as it is: "
                "move it aside and rerun to start a new store, or restore a copy"
            ) from None
        except StoreError:
            self._con.close()
            raise

    def _columns(self, table: str) -> set[str]:
        return {r[1] for r in self._con.execute(f"PRAGMA table_info({table})")}

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- points -----------------------------------------------------------------------------
    def done_ids(self, point_ids: Iterable[str], statuses: Sequence[str] = ("ok",)) -> set[str]:
        """The subset of ``point_ids`` already stored with one of ``statuses``."""
        ids = list(point_ids)
        found: set[str] = set()
        marks = ",".join("?" * len(statuses))
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = (
                f"SELECT point_id FROM points WHERE status IN ({marks}) "
                f"AND point_id IN ({','.join('?' * len(chunk))})"
            )
            found.update(r[0] for r in self._con.execute(q, [*statuses, *chunk]))
        return found

    def write_point(self, p: StoredPoint) -> None:
        """Write one point and its arrays in one transaction (replacing an earlier one)."""
        metrics = json.dumps(_jsonable(dict(p.metrics)), sort_keys=True, allow_nan=False)
        blobs = pack_arrays(p.arrays)
        self._write_point(p, metrics, blobs)

    def _rollback(self) -> None:
        try:
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def count_points(self) -> int:
        """How many points (finished or failed) the store holds."""
        try:
            return int(self._con.execute("SELECT COUNT(*) FROM points").fetchone()[0])
        except sqlite3.Error:
            return -1

    @staticmethod
    def check_file(path: str | Path) -> None:
        """Refuse, with :class:`StoreError`, an existing file that cannot be used as a store, creating
        nothing (no lock, no side file): run before a run takes the store's lock."""
        path = Path(path)
        if not path.exists():
            return
        Store(path, readonly=True).close()

    @writes
    def _write_point(self, p: StoredPoint, metrics: str, blobs: dict[str, bytes]) -> None:
        with self._con:  # BEGIN ... COMMIT
            self._con.execute("BEGIN")
            self._con.execute("DELETE FROM artifacts WHERE point_id = ?", (p.point_id,))
            self._con.execute(
                "INSERT OR REPLACE INTO points (point_id, claim_id, profile, params, seed, version, status, "
                "metrics, error, provenance, runtime_s, host, started, ended, cpu_s) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    p.point_id,
                    p.claim_id,
                    p.profile,
                    canonical_json(_jsonable(dict(p.params))),
                    p.seed,
                    p.version,
                    p.status,
                    metrics,
                    p.error,
                    json.dumps(_jsonable(dict(p.provenance)), sort_keys=True),
                    p.runtime_s,
                    p.host,
                    p.started,
                    p.ended,
                    p.cpu_s,
                ),
            )
            self._con.executemany(
                "INSERT INTO artifacts VALUES (?,?,?)", [(p.point_id, k, v) for k, v in blobs.items()]
            )

    def rows(self, point_ids: Sequence[str], with_arrays: bool = False) -> list[Row]:
        """Stored rows for ``point_ids`` (in that order; missing ids are skipped)."""
        out: dict[str, Row] = {}
        ids = list(point_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            q = (
                "SELECT point_id, params, status, metrics, error, runtime_s FROM points "
                f"WHERE point_id IN ({','.join('?' * len(chunk))})"
            )
            for pid, params, status, metrics, error, rt in self._con.execute(q, chunk):
                arrays = self.arrays(pid) if with_arrays else {}
                out[pid] = Row(
                    pid, json.loads(params), status, json.loads(metrics or "{}"), error, rt or 0.0, arrays
                )
        return [out[i] for i in ids if i in out]

    def mean_runtime(self, claim_id: str) -> float | None:
        """Mean stored runtime of a claim's finished points (any profile), None when none is stored."""
        r = self._con.execute(
            "SELECT AVG(runtime_s), COUNT(*) FROM points WHERE claim_id = ? AND status = 'ok'", (claim_id,)
        ).fetchone()
        return float(r[0]) if r and r[1] else None

    def mean_runtimes(self, profile: str, versions: Mapping[str, int] | None = None) -> dict[str, float]:
        """Mean stored cost per point of each claim's finished points at ``profile``. With ``versions``
        (claim id -> current version) only the points of a claim's current version count where it has
        any (an older version's points may cost something else); a claim with none falls back to its
        older versions. Within the rows chosen, the points' CPU seconds where any are stored (schema 3),
        else the wall runtime (older rows, older stores; under load it is inflated). Claims with no
        finished point are absent: their cost is unknown, not 0."""
        cpu = "SUM(cpu_s), COUNT(cpu_s)" if self._has_cpu else "0.0, 0"
        q = (
            f"SELECT claim_id, version, {cpu}, SUM(runtime_s), COUNT(runtime_s) FROM points "
            "WHERE status = 'ok' AND profile = ? GROUP BY claim_id, version"
        )
        sums: dict[str, dict[bool, list[float]]] = {}  # claim -> current? -> [cpu sum, n, wall sum, n]
        for cid, ver, cpu_sum, cpu_n, wall_sum, wall_n in self._con.execute(q, (profile,)):
            current = versions is not None and versions.get(cid) == ver
            acc = sums.setdefault(cid, {}).setdefault(current, [0.0, 0, 0.0, 0])
            acc[0] += cpu_sum or 0.0
            acc[1] += cpu_n or 0
            acc[2] += wall_sum or 0.0
            acc[3] += wall_n or 0
        out: dict[str, float] = {}
        for cid, by_current in sums.items():
            if True in by_current:
                acc = by_current[True]
            else:  # no versions given, or none of the current version: every version pooled
                acc = [sum(a[i] for a in by_current.values()) for i in range(4)]
            if acc[1]:
                out[cid] = float(acc[0] / acc[1])
            elif acc[3]:
                out[cid] = float(acc[2] / acc[3])
        return out

    def arrays(self, point_id: str) -> dict[str, np.ndarray]:
        cur = self._con.execute("SELECT name, data FROM artifacts WHERE point_id = ?", (point_id,))
        return {name: unpack_array(blob) for name, blob in cur}

    def all_points(self, claim_id: str | None = None) -> list[dict[str, Any]]:
        """Every stored point as a flat dict (for ``results list`` / ``export``)."""
        q = (
            "SELECT point_id, claim_id, profile, params, seed, version, status, metrics, error, "
            "provenance, runtime_s, host, started, ended, "
            + ("cpu_s" if self._has_cpu else "NULL")
            + " FROM points"
        )
        args: tuple = ()
        if claim_id:
            q += " WHERE claim_id = ?"
            args = (claim_id,)
        q += " ORDER BY claim_id, started, point_id"
        cols = [
            "point_id",
            "claim_id",
            "profile",
            "params",
            "seed",
            "version",
            "status",
            "metrics",
            "error",
            "provenance",
            "runtime_s",
            "host",
            "started",
            "ended",
            "cpu_s",
        ]
        out = []
        for r in self._con.execute(q, args):
            d = dict(zip(cols, r))
            for k in ("params", "metrics", "provenance"):
                d[k] = json.loads(d[k] or "{}")
            out.append(d)
        return out

    # -- runs -------------------------------------------------------------------------------
    @writes
    def start_run(
        self,
        claim_id: str,
        profile: str,
        root_seed: int,
        overrides: Mapping[str, Any],
        point_ids: Sequence[str],
        backend: str,
    ) -> int:
        cur = self._con.execute(
            "INSERT INTO runs (claim_id, profile, root_seed, overrides, point_ids, backend, started) "
            "VALUES (?,?,?,?,?,?,?)",
            (
                claim_id,
                profile,
                root_seed,
                canonical_json(_jsonable(dict(overrides))),
                json.dumps(list(point_ids)),
                backend,
                now_utc(),
            ),
        )
        return int(cur.lastrowid)

    @writes
    def end_run(self, run_id: int) -> None:
        self._con.execute("UPDATE runs SET ended = ? WHERE run_id = ?", (now_utc(), run_id))

    @writes
    def write_verdict(self, v: StoredVerdict) -> None:
        """Store the verdict of run ``v.run_id`` (replacing an earlier one for that run)."""
        self._con.execute(
            "INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                v.run_id,
                v.claim_id,
                v.variant,
                v.profile,
                v.version,
                json.dumps(_jsonable(v.claim), sort_keys=True),
                v.status,
                json.dumps(_jsonable(v.numbers), sort_keys=True, allow_nan=False),
                v.tolerance,
                v.note,
                v.regime,
                json.dumps(_jsonable(v.power), sort_keys=True, allow_nan=False),
                v.points,
                v.failed,
                v.missing,
                v.runtime_s,
                v.created or now_utc(),
            ),
        )

    def latest_verdicts(self, claim_id: str | None = None) -> list[StoredVerdict]:
        """The latest stored verdict of each (claim, variant), oldest claim first."""
        if "verdicts" not in self._tables:
            return []
        q = (
            "SELECT v.run_id, v.claim_id, v.variant, v.profile, v.version, v.claim, v.status, v.numbers, "
            "v.tolerance, v.note, v.regime, v.power, v.points, v.failed, v.missing, v.runtime_s, v.created, "
            "r.point_ids, r.overrides, r.root_seed FROM verdicts v JOIN runs r ON r.run_id = v.run_id "
            "WHERE v.run_id IN (SELECT MAX(run_id) FROM verdicts GROUP BY claim_id, variant)"
        )
        args: tuple = ()
        if claim_id:
            q += " AND v.claim_id = ?"
            args = (claim_id,)
        q += " ORDER BY v.run_id"
        out = []
        for r in self._con.execute(q, args):
            out.append(
                StoredVerdict(
                    r[0],
                    r[1],
                    r[2],
                    r[3],
                    r[4],
                    json.loads(r[5]),
                    r[6],
                    json.loads(r[7]),
                    r[8] or "",
                    r[9] or "",
                    r[10] or "",
                    json.loads(r[11] or "{}"),
                    r[12] or 0,
                    r[13] or 0,
                    r[14] or 0,
                    r[15] or 0.0,
                    r[16] or "",
                    json.loads(r[17]),
                    json.loads(r[18]),
                    int(r[19] or 0),
                )
            )
        return out

    @writes
    def merge_not_testable(self, items: Mapping[str, Mapping[str, str]]) -> None:
        """Record, per area, the statements it lists as not testable (merged into what is stored)."""
        if not items:
            return
        current = self.not_testable()
        current.update({k: dict(v) for k, v in items.items()})
        self._con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('not_testable', ?)", (json.dumps(current, sort_keys=True),)
        )

    def not_testable(self) -> dict[str, dict[str, str]]:
        """Per area: statement -> why it cannot be tested from the papers' text."""
        if "meta" not in self._tables:
            return {}
        row = self._con.execute("SELECT value FROM meta WHERE key = 'not_testable'").fetchone()
        return json.loads(row[0]) if row else {}
